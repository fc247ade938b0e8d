"""Slack mrkdwn and Block Kit objects, within Slack's limits and safe for untrusted text.

Slack rejects a whole message when one limit is exceeded, so every text is clipped here
with an ellipsis rather than trusted to fit, and alert and log text is escaped so a label
cannot mention `<!channel>`, `<@U0CEO12345>` or `<!subteam^S1>`, link `<#C1>` or smuggle
a link. Mentions come only from the bot's own structured ids, resolved by the people
directory (`Mentions`: a person id -> their Slack user id): `person(actor)` for a log
entry's or a decision's actor, and `blocks.page` for the person or group being paged;
never from text (a `slack:U0123ABC` written in an alert stays text).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Any

Block = dict[str, Any]

# Block Kit limits (characters, as slack_sdk counts them: len()).
HEADER_TEXT = 150
SECTION_TEXT = 3000
SECTION_FIELDS = 10
FIELD_TEXT = 2000
BUTTON_TEXT = 75
CONFIRM_TITLE = 100
CONFIRM_TEXT = 300
CONFIRM_BUTTON = 30
MESSAGE_BLOCKS = 50
MODAL_TITLE = 24
# Not a Slack limit: a thread post longer than this is unreadable on a phone, and very
# large block payloads are refused (`msg_blocks_too_long`) well before 50 x 3000.
THREAD_POST_CHARS = 12_000
# How much of each untrusted piece a card shows: a phone screen, not the database.
STEP_LINE = 300
AWAITING_LINE = 700
FACT_VALUE = 300
NAMES = 160

BLANK = re.compile(r"[\s\x00-\x1f\x7f]+")
SLACK_USER = re.compile(r"slack:([UW][A-Z0-9]{2,30})")
SLACK_ID = re.compile(r"[UW][A-Z0-9]{2,30}")
DEFANG = re.compile(r"<(?=\S)")
SAFE_URL = re.compile(r"https?://[^\s<>|&]+")


# --- text ------------------------------------------------------------------------------


def escape(text: str) -> str:
    """Slack mrkdwn escaping: only `&`, `<`, `>` are control characters."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def one_line(text: str) -> str:
    """Collapse newlines and control characters: an alert cannot fake extra card lines."""
    return BLANK.sub(" ", text).strip()


def clip(text: str, limit: int, *, markup: bool = False) -> str:
    """`text` in at most `limit` characters, ending in an ellipsis when cut.

    With `markup`, never cut inside an entity (`&amp;`) or a mention (`<@U1>`): half of
    one would show as garbage or, worse, swallow the text after it.
    """
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    if markup:
        opener = max(cut.rfind("&"), cut.rfind("<"))
        if opener > max(cut.rfind(";"), cut.rfind(">")):
            cut = cut[:opener]
    return cut.rstrip() + "…"


def safe(text: str, limit: int) -> str:
    """Untrusted text on one line, clipped, then escaped (escaping may lengthen it)."""
    return escape(clip(one_line(text), limit))


Mentions = Callable[[str], str | None]
"""A person id -> the Slack user id to mention them by, or None (`people.Directory.slack_id`)."""


def slack_ids(actor: str) -> str | None:
    """The Slack user id in a Slack user's own person id (`slack:U0123ABC`): the mentions
    of a bot without a people directory at hand."""
    match = SLACK_USER.fullmatch(actor)
    return match.group(1) if match else None


def person(actor: str, mentions: Mentions = slack_ids) -> str:
    """A person the directory knows a Slack id of renders as a mention; anyone else
    (`alertmanager`, a name the bot cannot place) as text."""
    user = mentions(actor)
    return f"<@{user}>" if user is not None and SLACK_ID.fullmatch(user) else safe(actor, 60)


def with_people(text: str, people: Iterable[str | None], mentions: Mentions = slack_ids) -> str:
    """Escaped `text` in which the ids of `people` (the bot's own structured data: an
    owner, an on-call person) become mentions when the directory knows their Slack id;
    any other id stays text."""
    shown = escape(text)
    for who in {p for p in people if p}:
        user = mentions(who)
        if user is not None and SLACK_ID.fullmatch(user):
            own = re.compile(rf"(?<![\w:]){re.escape(escape(who))}(?![A-Za-z0-9])")
            shown = own.sub(f"<@{user}>", shown)
    return shown


def names(items: Iterable[str], limit: int = NAMES) -> str:
    """`a, b, c and 5 more`, escaped: a long list still says how long it is."""
    names = [one_line(item) for item in items]
    shown: list[str] = []
    used = 0
    for item in names:
        part = clip(item, limit // 2)
        if shown and used + len(part) + 2 > limit:
            break
        shown.append(part)
        used += len(part) + 2
    rest = len(names) - len(shown)
    return escape(", ".join(shown)) + (f" and {rest} more" if rest else "")


# --- Block Kit objects -------------------------------------------------------------------


def plain(text: str, limit: int) -> Block:
    # plain_text is never parsed for mentions or links, so it is clipped, not escaped;
    # an opening `<` still becomes `‹`, so that no `<@U1>` or `<!channel>` of an alert
    # reaches Slack in any field, whatever a client does with it.
    shown = DEFANG.sub("‹", clip(one_line(text) or "-", limit))
    return {"type": "plain_text", "text": shown, "emoji": True}


def mrkdwn(text: str, limit: int = SECTION_TEXT) -> Block:
    # verbatim: no auto-linking of bare URLs or #channels in alert text; our explicit
    # <@U...> mentions still render.
    return {"type": "mrkdwn", "text": clip(text or "-", limit, markup=True), "verbatim": True}


def section(text: str) -> Block:
    return {"type": "section", "text": mrkdwn(text)}


def context(text: str) -> Block:
    return {"type": "context", "elements": [mrkdwn(text)]}


def button(
    text: str,
    action_id: str,
    value: int,
    *,
    style: str | None = None,
    confirm: Block | None = None,
) -> Block:
    button: Block = {
        "type": "button",
        "text": plain(text, BUTTON_TEXT),
        "action_id": action_id,
        "value": str(value),
    }
    if style:
        button["style"] = style
    if confirm:
        button["confirm"] = confirm
    return button

"""Slack Block Kit for incident cards (`bot.chat.slack.card`), thread posts, the resolve,
done and skip dialogs and lists.

Pure functions of the plain views in `bot.chat.views`: no I/O, no Slack client. Each
message function returns `(fallback text, blocks)`; the fallback is what notifications
and screen readers read. Slack rejects a whole message when one limit is exceeded, so
every text is clipped with an ellipsis here rather than trusted to fit, and alert text
(titles, facts, summaries, parameters) is escaped so a label cannot mention `<!channel>`
or smuggle a link. Buttons carry only ids (a step-run id, an incident number).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import NamedTuple

from bot.chat.slack.card import card, emoji
from bot.chat.slack.mrkdwn import (
    MESSAGE_BLOCKS,
    MODAL_TITLE,
    SAFE_URL,
    SECTION_TEXT,
    THREAD_POST_CHARS,
    Block,
    Mentions,
    clip,
    escape,
    names,
    one_line,
    person,
    plain,
    safe,
    section,
    slack_ids,
    with_people,
)
from bot.chat.views import CardView, LogLine
from bot.chat.wording import elapsed, escalation_line, utc

__all__ = [
    "ThreadPost",
    "card",
    "done_modal",
    "elapsed",
    "ephemeral",
    "escalation_line",
    "escape",
    "incident_list",
    "resolve_modal",
    "skip_modal",
    "thread_message",
]

# --- other messages -------------------------------------------------------------------------


class _Line(NamedTuple):
    text: str


def _pack(items: Iterable[_Line | Block]) -> list[Block]:
    """Consecutive lines share a section (up to its 3000 characters); blocks stay as they are."""
    blocks: list[Block] = []
    lines: list[str] = []
    for item in items:
        if isinstance(item, _Line):
            if lines and len("\n".join([*lines, item.text])) > SECTION_TEXT:
                blocks.append(section("\n".join(lines)))
                lines = []
            lines.append(item.text)
        else:
            if lines:
                blocks.append(section("\n".join(lines)))
                lines = []
            blocks.append(item)
    if lines:
        blocks.append(section("\n".join(lines)))
    return blocks


class ThreadPost(NamedTuple):
    """One thread post: send `text` and `blocks`, then the rest, `lines[consumed:]`."""

    text: str
    blocks: list[Block]
    consumed: int


def thread_message(lines: Sequence[LogLine], mentions: Mentions = slack_ids) -> ThreadPost:
    """As many consecutive log entries as fit one post, in order; always at least one."""
    rendered: list[str] = []
    used = 0
    for line in lines:
        text = _log_line(line, mentions)
        if rendered and used + len(text) + 1 > THREAD_POST_CHARS:
            break
        if len(_pack(_Line(t) for t in [*rendered, text])) > MESSAGE_BLOCKS:
            break
        rendered.append(text)
        used += len(text) + 1
    if not rendered:
        return ThreadPost("", [], 0)
    text = clip(rendered[0], 300, markup=True)
    if len(rendered) > 1:
        text += f" (+{len(rendered) - 1} more)"
    return ThreadPost(text, _pack(_Line(t) for t in rendered), len(rendered))


def _log_line(line: LogLine, mentions: Mentions) -> str:
    """`04:12:03 <@U0123ABC> — approved power cycle (1/2)`, in UTC, on one line. Only a
    person is mentioned: an Alertmanager receiver's name comes from its payload."""
    at = utc(line.at).strftime("%H:%M:%S")
    who = person(line.actor, mentions) if line.human else safe(line.actor, 60)
    text = f"{at} {who} — {escape(one_line(line.summary))}"
    return clip(text, SECTION_TEXT, markup=True)


def resolve_modal(view: CardView) -> Block:
    """Asks for the disposition; a critical incident cannot be resolved without one."""
    return {
        "type": "modal",
        "callback_id": "incident.resolve",
        "private_metadata": str(view.number),
        "title": plain(f"Resolve {view.ref}", MODAL_TITLE),
        "submit": plain("Resolve", MODAL_TITLE),
        "close": plain("Cancel", MODAL_TITLE),
        "blocks": [
            section(f"{emoji(view)} *{escape(view.ref)}* {safe(view.title, 500)}"),
            {
                "type": "input",
                "block_id": "disposition",
                "optional": view.severity != "critical",
                "label": plain("Disposition: what was done, what is left", 2000),
                "element": {
                    "type": "plain_text_input",
                    "action_id": "text",
                    "multiline": True,
                    "max_length": SECTION_TEXT,
                    "placeholder": plain("Replaced GPU 5 on gpu-node-02; node back in pool", 150),
                },
            },
        ],
    }


def done_modal(run_id: int, step: str, summary: str = "") -> Block:
    """Marks a manual step done, with a note (required) of what was found or changed."""
    shown = escape(one_line(summary)) or "Marks this manual step done."
    return {
        "type": "modal",
        "callback_id": "step.done",
        "private_metadata": str(run_id),
        "title": plain("Step done", MODAL_TITLE),
        "submit": plain("Done", MODAL_TITLE),
        "close": plain("Cancel", MODAL_TITLE),
        "blocks": [
            section(f"*{safe(step, 100)}*\n{shown}"),
            {
                "type": "input",
                "block_id": "note",
                "optional": False,
                "label": plain("Note: what you found or did", 2000),
                "element": {
                    "type": "plain_text_input",
                    "action_id": "text",
                    "multiline": True,
                    "max_length": SECTION_TEXT,
                },
            },
        ],
    }


def skip_modal(run_id: int, title: str, dependents: Sequence[str]) -> Block:
    """Skipping a step others depend on: says what it also skips and asks why (required);
    the reason goes into the incident's log with the skip."""
    shown = [one_line(name) for name in dependents[:20]]
    more = len(dependents) - len(shown)
    also = ", ".join(shown) + (f" and {more} more" if more > 0 else "")
    return {
        "type": "modal",
        "callback_id": "step.skip",
        "private_metadata": str(run_id),
        "title": plain("Skip a step", MODAL_TITLE),
        "submit": plain("Skip them", MODAL_TITLE),
        "close": plain("Cancel", MODAL_TITLE),
        "blocks": [
            section(
                f"*Skip {safe(title, 150)}?*\nThis also skips {len(dependents)} later "
                f"step{'s' if len(dependents) != 1 else ''} that need it: {safe(also, 2000)}."
            ),
            {
                "type": "input",
                "block_id": "note",
                "optional": False,
                "label": plain("Why skip it?", 2000),
                "element": {
                    "type": "plain_text_input",
                    "action_id": "text",
                    "multiline": True,
                    "max_length": SECTION_TEXT,
                    "placeholder": plain("The node is already out of service", 150),
                },
            },
        ],
    }


def incident_list(views: Sequence[CardView]) -> tuple[str, list[Block]]:
    """`/incident list`: one line per incident; past 50 blocks, `… and N more`."""
    if not views:
        return "No incidents.", [section("No incidents.")]
    shown = views if len(views) <= MESSAGE_BLOCKS else views[: MESSAGE_BLOCKS - 1]
    blocks = [section(_list_line(view)) for view in shown]
    if len(shown) < len(views):
        blocks.append(section(f"… and {len(views) - len(shown)} more"))
    refs = names(view.ref for view in views)
    return clip(f"{len(views)} incidents: {refs}", 300, markup=True), blocks


def _list_line(view: CardView) -> str:
    """`🔴 *INC-7* critical · open · GPU 5 XID 79 · 42m · ⏳ decision waiting: Cordon`."""
    line = (
        f"{emoji(view)} *{escape(view.ref)}* {escape(view.severity)} · {escape(view.status)}"
        f" · {safe(view.title, 200)} · {elapsed(view.now - view.opened_at)}"
    )
    if view.decision is not None:
        line += f" · ⏳ decision waiting: {safe(view.decision.title, 120)}"
    return line


def page(who: str, text: str, mentions: Mentions = slack_ids) -> tuple[str, list[Block]]:
    """A page: the mention (a person, by the Slack id `mentions` gives them, or a user
    group `slack:S...` of the escalation settings) and why."""
    raw = who.removeprefix("slack:")
    if who.startswith("slack:S") and raw.isalnum():
        mention = f"<!subteam^{raw}>"
    else:
        mention = person(who, mentions)
    body = f"📟 {mention} {clip(escape(one_line(text)), SECTION_TEXT - 100, markup=True)}"
    return clip(safe(f"page: {text}", SECTION_TEXT), SECTION_TEXT, markup=True), [section(body)]


def ephemeral(
    text: str, people: Iterable[str | None] = (), mentions: Mentions = slack_ids
) -> tuple[str, list[Block]]:
    """A refusal or notice only the clicker sees (`you need the responder role ...`); the
    `people` (structured ids, never text) show as mentions where `mentions` knows them."""
    plain = clip(safe(text, SECTION_TEXT), SECTION_TEXT, markup=True)
    shown = with_people(text, people, mentions)
    return plain, [section(clip(shown, SECTION_TEXT, markup=True))]


def flood_summary(
    count: int,
    severity: str,
    pattern: str,
    first: int,
    last: int,
    since: datetime,
    console: str | None = None,
) -> tuple[str, list[Block]]:
    """The one message standing for the cards of a flood (`bot.chat.floods`)."""
    noun = "incident" if count == 1 else "incidents"
    span = f"INC-{first}" if first == last else f"INC-{first} … INC-{last}"
    where = f"<{console}|the console>" if console and SAFE_URL.fullmatch(console) else "the console"
    body = (
        f"🌊 *{count} more {safe(severity, 16)} {noun}* of `{safe(pattern, 200)}` since "
        f"{since:%H:%M} UTC ({span}): no card each, to keep the channel readable; "
        f"see {where} or `/incident list`."
    )
    plain = f"{count} more {severity} {noun} of {pattern} ({span})"
    return clip(safe(plain, SECTION_TEXT), SECTION_TEXT, markup=True), [section(body)]

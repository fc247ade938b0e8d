"""Slack Block Kit for incident cards, thread posts, the resolve modal and lists.

Pure functions of the plain views in `bot.chat.views`: no I/O, no Slack client. Each
message function returns `(fallback text, blocks)`; the fallback is what notifications
and screen readers read. Slack rejects a whole message when one limit is exceeded, so
every text is clipped with an ellipsis here rather than trusted to fit, and alert text
(titles, facts, summaries, parameters) is escaped so a label cannot mention `<!channel>`
or smuggle a link. Buttons carry only ids (a step-run id, an incident number).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, NamedTuple

from bot.chat.views import CardView, LogLine, StepView

__all__ = [
    "ThreadPost",
    "card",
    "done_modal",
    "elapsed",
    "ephemeral",
    "escape",
    "incident_list",
    "resolve_modal",
    "thread_message",
]

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

_SEVERITY = {"critical": "🔴", "warning": "🟠", "info": "🔵"}
_STATE = {
    "proposed": "🔜",
    "awaiting_approval": "⏳",
    "approved": "👍",
    "running": "🔄",
    "succeeded": "✅",
    "failed": "❌",
    "timed_out": "⌛",
    "expired": "⌛",
    "skipped": "⏭",
    "cancelled": "🚫",
    "interrupted": "⚠️",
    "not_reached": "▫️",
}
_BLANK = re.compile(r"[\s\x00-\x1f\x7f]+")
_SLACK_USER = re.compile(r"slack:([UW][A-Z0-9]{2,30})")
_SLACK_USER_IN_TEXT = re.compile(r"(?<![\w:])slack:([UW][A-Z0-9]{2,30})(?![A-Za-z0-9])")
_SAFE_URL = re.compile(r"https?://[^\s<>|&]+")


# --- text ------------------------------------------------------------------------------


def escape(text: str) -> str:
    """Slack mrkdwn escaping: only `&`, `<`, `>` are control characters."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _one_line(text: str) -> str:
    """Collapse newlines and control characters: an alert cannot fake extra card lines."""
    return _BLANK.sub(" ", text).strip()


def _clip(text: str, limit: int, *, markup: bool = False) -> str:
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


def _safe(text: str, limit: int) -> str:
    """Untrusted text on one line, clipped, then escaped (escaping may lengthen it)."""
    return escape(_clip(_one_line(text), limit))


def _person(actor: str) -> str:
    """A Slack user id renders as a mention; anyone else (`alice`, `alertmanager`) as text."""
    match = _SLACK_USER.fullmatch(actor)
    return f"<@{match.group(1)}>" if match else _safe(actor, 60)


def _with_mentions(text: str) -> str:
    """Escaped `text` in which `slack:U...` ids become mentions (ours, so never injected)."""
    return _SLACK_USER_IN_TEXT.sub(lambda m: f"<@{m.group(1)}>", escape(text))


def _names(items: Iterable[str], limit: int = NAMES) -> str:
    """`a, b, c and 5 more`, escaped: a long list still says how long it is."""
    names = [_one_line(item) for item in items]
    shown: list[str] = []
    used = 0
    for item in names:
        part = _clip(item, limit // 2)
        if shown and used + len(part) + 2 > limit:
            break
        shown.append(part)
        used += len(part) + 2
    rest = len(names) - len(shown)
    return escape(", ".join(shown)) + (f" and {rest} more" if rest else "")


def elapsed(delta: timedelta) -> str:
    """`45s`, `42m`, `3h 05m`, `2d 04h`: two units at most, to read at a glance."""
    seconds = max(0, int(delta.total_seconds()))
    minutes, secs = divmod(seconds, 60)
    hours, mins = divmod(minutes, 60)
    days, hrs = divmod(hours, 24)
    if days:
        return f"{days}d {hrs:02d}h"
    if hours:
        return f"{hours}h {mins:02d}m"
    if minutes:
        return f"{minutes}m"
    return f"{secs}s"


def _utc(at: datetime) -> datetime:
    return at.replace(tzinfo=UTC) if at.tzinfo is None else at.astimezone(UTC)


# --- Block Kit objects -------------------------------------------------------------------


def _plain(text: str, limit: int) -> Block:
    # plain_text is never parsed for mentions or links, so it is clipped, not escaped.
    return {"type": "plain_text", "text": _clip(_one_line(text) or "-", limit), "emoji": True}


def _mrkdwn(text: str, limit: int = SECTION_TEXT) -> Block:
    # verbatim: no auto-linking of bare URLs or #channels in alert text; our explicit
    # <@U...> mentions still render.
    return {"type": "mrkdwn", "text": _clip(text or "-", limit, markup=True), "verbatim": True}


def _section(text: str) -> Block:
    return {"type": "section", "text": _mrkdwn(text)}


def _context(text: str) -> Block:
    return {"type": "context", "elements": [_mrkdwn(text)]}


def _button(
    text: str,
    action_id: str,
    value: int,
    *,
    style: str | None = None,
    confirm: Block | None = None,
) -> Block:
    button: Block = {
        "type": "button",
        "text": _plain(text, BUTTON_TEXT),
        "action_id": action_id,
        "value": str(value),
    }
    if style:
        button["style"] = style
    if confirm:
        button["confirm"] = confirm
    return button


# --- the incident card ---------------------------------------------------------------------


def card(view: CardView) -> tuple[str, list[Block]]:
    """The incident card: header, status line, facts, runbook steps, then buttons."""
    head = [_header(view), _status(view)]
    if view.facts:
        head.append(_facts(view.facts))
    tail = [_incident_actions(view) if view.active else _resolution(view)]
    steps = _runbook(view, budget=MESSAGE_BLOCKS - len(head) - len(tail))
    return _fallback(view), [*head, *steps, *tail]


def _fallback(view: CardView) -> str:
    """One line for notifications: `🔴 INC-7 critical: GPU 5 XID 79 on gpu-node-02 (open)`."""
    title = _safe(view.title, HEADER_TEXT) or "(no title)"
    ref, severity, status = escape(view.ref), escape(view.severity), escape(view.status)
    return f"{_emoji(view)} {ref} {severity}: {title} ({status})"


def _emoji(view: CardView) -> str:
    return _SEVERITY.get(view.severity, "⚪")


def _header(view: CardView) -> Block:
    text = f"{_emoji(view)} {view.ref} {view.severity}: {_one_line(view.title) or '(no title)'}"
    return {"type": "header", "text": _plain(text, HEADER_TEXT)}


def _status(view: CardView) -> Block:
    parts = [f"*{escape(view.status.capitalize())}*"]
    parts.append(f"owner {_person(view.owner)}" if view.owner else "no owner")
    if view.acknowledged_by:
        parts.append(f"acked by {_person(view.acknowledged_by)}")
    parts.append(f"⏱ {elapsed(view.now - view.opened_at)}")
    alerts = f"🔔 {view.alerts_firing}/{view.alerts_total} alerts firing"
    if view.alert_names:
        alerts += f": {_names(view.alert_names)}"
    parts.append(alerts)
    if view.nodes:
        parts.append(f"🖥 {_names(view.nodes)}")
    if view.url and _SAFE_URL.fullmatch(view.url):
        parts.append(f"<{view.url}|open in console>")
    return _context(" · ".join(parts))


def _facts(facts: dict[str, str]) -> Block:
    items = list(facts.items())
    if len(items) > SECTION_FIELDS:
        rest = items[SECTION_FIELDS - 1 :]
        items = items[: SECTION_FIELDS - 1]
        items.append((f"{len(rest)} more", ", ".join(key for key, _ in rest)))
    fields = [
        _mrkdwn(f"*{_safe(key, 60)}*\n{_safe(value, FACT_VALUE)}", FIELD_TEXT)
        for key, value in items
    ]
    return {"type": "section", "fields": fields}


def _incident_actions(view: CardView) -> Block:
    buttons = []
    if view.status == "open":
        buttons.append(_button("Acknowledge", "incident.ack", view.number, style="primary"))
    buttons.append(_button("Take ownership", "incident.own", view.number))
    buttons.append(_button("Resolve", "incident.resolve", view.number))
    return {"type": "actions", "block_id": f"incident:{view.number}", "elements": buttons}


def _resolution(view: CardView) -> Block:
    if view.status == "resolved":
        word = "✅ *Resolved*"
    else:
        word = f"🔒 *{escape(view.status.capitalize())}*"
    if view.resolved_at:
        at = _utc(view.resolved_at).strftime("%Y-%m-%d %H:%M UTC")
        word += f" at {at}, {elapsed(view.resolved_at - view.opened_at)} after it opened"
    if view.resolved_by:
        word += f" by {_person(view.resolved_by)}"
    if view.owner:
        word += f" · owner {_person(view.owner)}"
    disposition = escape(view.disposition.strip()) if view.disposition else "none recorded"
    return _section(f"{word}\n*Disposition:* {disposition}")


# --- runbook steps ------------------------------------------------------------------------


class _Line(NamedTuple):
    text: str


def _runbook(view: CardView, *, budget: int) -> list[Block]:
    """Steps as packed lines, an actions block under each awaiting step, within `budget`.

    A long runbook keeps its first steps and ends with `… N more steps`: the number of
    blocks only grows with the steps shown, so a binary search finds how many fit.
    """
    if view.runbook is None and not view.steps:
        return [_section("📖 No runbook matched: follow the on-call rules by hand.")]
    items = [_Line(f"📖 *Runbook* {_safe(view.runbook or 'unknown', 100)}")]
    per_step = [_step_items(step, view) for step in view.steps]
    low, high = 0, len(per_step)
    while low < high:
        middle = (low + high + 1) // 2
        if len(_render(items, per_step, middle)) <= budget:
            low = middle
        else:
            high = middle - 1
    return _render(items, per_step, low)


def _render(head: list[_Line], per_step: list[list[_Line | Block]], shown: int) -> list[Block]:
    items = [*head, *(item for step in per_step[:shown] for item in step)]
    hidden = per_step[shown:]
    if hidden:
        waiting = sum(1 for step in hidden if len(step) > 1)
        note = f"… {len(hidden)} more steps"
        if waiting:
            note += f" ({waiting} awaiting a decision: see `runbook-bot steps`)"
        items.append(_Line(note))
    return _pack(items)


def _pack(items: Iterable[_Line | Block]) -> list[Block]:
    """Consecutive lines share a section (up to its 3000 characters); blocks stay as they are."""
    blocks: list[Block] = []
    lines: list[str] = []
    for item in items:
        if isinstance(item, _Line):
            if lines and len("\n".join([*lines, item.text])) > SECTION_TEXT:
                blocks.append(_section("\n".join(lines)))
                lines = []
            lines.append(item.text)
        else:
            if lines:
                blocks.append(_section("\n".join(lines)))
                lines = []
            blocks.append(item)
    if lines:
        blocks.append(_section("\n".join(lines)))
    return blocks


def _step_items(step: StepView, view: CardView) -> list[_Line | Block]:
    if not (step.awaiting and view.active and step.run_id is not None):
        return [_Line(_step_line(step, view.now, STEP_LINE))]
    return [_Line(_step_line(step, view.now, AWAITING_LINE)), _step_actions(step, step.run_id)]


def _step_line(step: StepView, now: datetime, limit: int) -> str:
    """`⏳ *Power cycle* · `bmc.power_cycle` node=n2 · 1/2 (alice) · expires in 12m — why`."""
    parts = [f"{_STATE.get(step.state, '❔')} *{_safe(step.title, 120) or escape(step.step)}*"]
    if step.action:
        action = f"`{_safe(step.action, 60)}`"
        if step.params:
            action += f" {_params(step.params)}"
        parts.append(action)
    if step.approvals_required:
        given = f"{step.approvals}/{step.approvals_required}"
        if step.approvers:
            given += f" ({', '.join(_person(who) for who in step.approvers)})"
        parts.append(given)
    if step.awaiting and step.expires_at:
        left = step.expires_at - now
        parts.append(f"expires in {elapsed(left)}" if left > timedelta(0) else "expired")
    line = " · ".join(parts)
    if step.summary.strip():
        line += f" — {_with_mentions(_one_line(step.summary))}"
    return _clip(line, limit, markup=True)


def _params(params: dict[str, object]) -> str:
    """`node=gpu-node-02, gpu=5`: shown to the human, never put in a button."""
    text = ", ".join(f"{key}={_clip(_one_line(str(value)), 40)}" for key, value in params.items())
    return _safe(text, 160)


def _step_actions(step: StepView, run_id: int) -> Block:
    if step.kind == "manual":
        decide = _button("Done", "step.done", run_id, style="primary")
    elif step.risk == "disruptive":
        decide = _button("Approve", "step.approve", run_id, style="danger", confirm=_confirm(step))
    else:
        decide = _button("Approve", "step.approve", run_id, style="primary")
    skip = _button("Skip", "step.skip", run_id)
    return {"type": "actions", "block_id": f"step:{run_id}", "elements": [decide, skip]}


def _confirm(step: StepView) -> Block:
    """The dialog names the action and its exact targets: a person confirms a node, not an id."""
    targets = [_one_line(target) for target in step.targets] or [
        _one_line(f"{key}={value}") for key, value in step.params.items()
    ]
    named = _clip(", ".join(targets) or "unknown targets", 200)
    title = _clip(_one_line(step.title), 60)
    if not all(target in title for target in targets):
        title += f": {named}"
    text = (
        f"{step.action or step.step} on {named}. "
        f"Disruptive: approval {step.approvals + 1} of {step.approvals_required or 1}."
    )
    return {
        "title": _plain(f"{title}?", CONFIRM_TITLE),
        "text": _plain(text, CONFIRM_TEXT),
        "confirm": _plain("Yes, approve", CONFIRM_BUTTON),
        "deny": _plain("Cancel", CONFIRM_BUTTON),
        "style": "danger",
    }


# --- other messages -------------------------------------------------------------------------


class ThreadPost(NamedTuple):
    """One thread post: send `text` and `blocks`, then the rest, `lines[consumed:]`."""

    text: str
    blocks: list[Block]
    consumed: int


def thread_message(lines: Sequence[LogLine]) -> ThreadPost:
    """As many consecutive log entries as fit one post, in order; always at least one."""
    rendered: list[str] = []
    used = 0
    for line in lines:
        text = _log_line(line)
        if rendered and used + len(text) + 1 > THREAD_POST_CHARS:
            break
        if len(_pack(_Line(t) for t in [*rendered, text])) > MESSAGE_BLOCKS:
            break
        rendered.append(text)
        used += len(text) + 1
    if not rendered:
        return ThreadPost("", [], 0)
    text = _clip(rendered[0], 300, markup=True)
    if len(rendered) > 1:
        text += f" (+{len(rendered) - 1} more)"
    return ThreadPost(text, _pack(_Line(t) for t in rendered), len(rendered))


def _log_line(line: LogLine) -> str:
    """`04:12:03 <@U0123ABC> — approved power cycle (1/2)`, in UTC, on one line."""
    at = _utc(line.at).strftime("%H:%M:%S")
    text = f"{at} {_person(line.actor)} — {_with_mentions(_one_line(line.summary))}"
    return _clip(text, SECTION_TEXT, markup=True)


def resolve_modal(view: CardView) -> Block:
    """Asks for the disposition; a critical incident cannot be resolved without one."""
    return {
        "type": "modal",
        "callback_id": "incident.resolve",
        "private_metadata": str(view.number),
        "title": _plain(f"Resolve {view.ref}", MODAL_TITLE),
        "submit": _plain("Resolve", MODAL_TITLE),
        "close": _plain("Cancel", MODAL_TITLE),
        "blocks": [
            _section(f"{_emoji(view)} *{escape(view.ref)}* {_safe(view.title, 500)}"),
            {
                "type": "input",
                "block_id": "disposition",
                "optional": view.severity != "critical",
                "label": _plain("Disposition: what was done, what is left", 2000),
                "element": {
                    "type": "plain_text_input",
                    "action_id": "text",
                    "multiline": True,
                    "max_length": SECTION_TEXT,
                    "placeholder": _plain("Replaced GPU 5 on gpu-node-02; node back in pool", 150),
                },
            },
        ],
    }


def done_modal(run_id: int, step: str, summary: str = "") -> Block:
    """Marks a manual step done, with a note (required) of what was found or changed."""
    shown = _with_mentions(_one_line(summary)) or "Marks this manual step done."
    return {
        "type": "modal",
        "callback_id": "step.done",
        "private_metadata": str(run_id),
        "title": _plain("Step done", MODAL_TITLE),
        "submit": _plain("Done", MODAL_TITLE),
        "close": _plain("Cancel", MODAL_TITLE),
        "blocks": [
            _section(f"*{_safe(step, 100)}*\n{shown}"),
            {
                "type": "input",
                "block_id": "note",
                "optional": False,
                "label": _plain("Note: what you found or did", 2000),
                "element": {
                    "type": "plain_text_input",
                    "action_id": "text",
                    "multiline": True,
                    "max_length": SECTION_TEXT,
                },
            },
        ],
    }


def incident_list(views: Sequence[CardView]) -> tuple[str, list[Block]]:
    """`/incident list`: one line per incident; past 50 blocks, `… and N more`."""
    if not views:
        return "No incidents.", [_section("No incidents.")]
    shown = views if len(views) <= MESSAGE_BLOCKS else views[: MESSAGE_BLOCKS - 1]
    blocks = [_section(_list_line(view)) for view in shown]
    if len(shown) < len(views):
        blocks.append(_section(f"… and {len(views) - len(shown)} more"))
    refs = _names(view.ref for view in views)
    return _clip(f"{len(views)} incidents: {refs}", 300, markup=True), blocks


def _list_line(view: CardView) -> str:
    return (
        f"{_emoji(view)} *{escape(view.ref)}* {escape(view.severity)} · {escape(view.status)}"
        f" · {_safe(view.title, 200)} · {elapsed(view.now - view.opened_at)}"
    )


def page(who: str, text: str) -> tuple[str, list[Block]]:
    """A page: the mention (a person `slack:U...` or a user group `slack:S...`) and why."""
    raw = who.removeprefix("slack:")
    if who.startswith("slack:S"):
        mention = f"<!subteam^{raw}>"
    elif who.startswith("slack:"):
        mention = f"<@{raw}>"
    else:
        mention = _safe(who, 60)
    body = f"📟 {mention} {_clip(escape(_one_line(text)), SECTION_TEXT - 100, markup=True)}"
    return _clip(_safe(f"page: {text}", SECTION_TEXT), SECTION_TEXT, markup=True), [_section(body)]


def ephemeral(text: str) -> tuple[str, list[Block]]:
    """A refusal or notice only the clicker sees (`you need the responder role ...`)."""
    plain = _clip(_safe(text, SECTION_TEXT), SECTION_TEXT, markup=True)
    return plain, [_section(_clip(_with_mentions(text), SECTION_TEXT, markup=True))]

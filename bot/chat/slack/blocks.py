"""Slack Block Kit for incident cards, thread posts, the resolve modal and lists.

Pure functions of the plain views in `bot.chat.views`: no I/O, no Slack client. Each
message function returns `(fallback text, blocks)`; the fallback is what notifications
and screen readers read. Slack rejects a whole message when one limit is exceeded, so
every text is clipped with an ellipsis here rather than trusted to fit, and alert text
(titles, facts, summaries, parameters) is escaped so a label cannot mention `<!channel>`
or smuggle a link. Buttons carry only ids (a step-run id, an incident number).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from typing import NamedTuple

from bot.chat.slack.mrkdwn import (
    AWAITING_LINE,
    CONFIRM_BUTTON,
    CONFIRM_TEXT,
    CONFIRM_TITLE,
    FACT_VALUE,
    FIELD_TEXT,
    HEADER_TEXT,
    MESSAGE_BLOCKS,
    MODAL_TITLE,
    SAFE_URL,
    SECTION_FIELDS,
    SECTION_TEXT,
    STEP_LINE,
    THREAD_POST_CHARS,
    Block,
    Mentions,
    button,
    clip,
    context,
    escape,
    mrkdwn,
    names,
    one_line,
    person,
    plain,
    safe,
    section,
    slack_ids,
    with_people,
)
from bot.chat.views import CardView, LogLine, StepView
from bot.chat.wording import elapsed, escalation_line, scope_line, utc

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
    "thread_message",
]

_SEVERITY = {"critical": "🔴", "warning": "🟠", "info": "🔵"}
FAILED_NAMED = 5
"""Failed nodes a step's line names; the rest are counted (the thread has every one)."""
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

# --- the incident card ---------------------------------------------------------------------


def card(view: CardView, mentions: Mentions = slack_ids) -> tuple[str, list[Block]]:
    """The incident card: header, status line, facts, runbook steps, then buttons; people
    are mentioned by the Slack ids `mentions` (the people directory) gives them."""
    head = [_header(view), _status(view, mentions)]
    line = escalation_line(view)
    if line:
        head.append(context(f"📟 {escape(line)}"))
    if view.facts:
        head.append(_facts(view.facts))
    tail = [_incident_actions(view) if view.active else _resolution(view, mentions)]
    steps = _runbook(view, budget=MESSAGE_BLOCKS - len(head) - len(tail), mentions=mentions)
    return _fallback(view), [*head, *steps, *tail]


def _fallback(view: CardView) -> str:
    """One line for notifications: `🔴 INC-7 critical: GPU 5 XID 79 on gpu-node-02 (open)`."""
    title = safe(view.title, HEADER_TEXT) or "(no title)"
    ref, severity, status = escape(view.ref), escape(view.severity), escape(view.status)
    return f"{_emoji(view)} {ref} {severity}: {title} ({status})"


def _emoji(view: CardView) -> str:
    return _SEVERITY.get(view.severity, "⚪")


def _header(view: CardView) -> Block:
    text = f"{_emoji(view)} {view.ref} {view.severity}: {one_line(view.title) or '(no title)'}"
    return {"type": "header", "text": plain(text, HEADER_TEXT)}


def _status(view: CardView, mentions: Mentions) -> Block:
    parts = [f"*{escape(view.status.capitalize())}*"]
    scope = scope_line(view)
    if scope:
        parts.append(escape(scope))
    parts.append(f"owner {person(view.owner, mentions)}" if view.owner else "no owner")
    if view.acknowledged_by:
        parts.append(f"acked by {person(view.acknowledged_by, mentions)}")
    parts.append(f"⏱ {elapsed(view.now - view.opened_at)}")
    alerts = f"🔔 {view.alerts_firing}/{view.alerts_total} alerts firing"
    if view.alert_names:
        alerts += f": {names(view.alert_names)}"
    parts.append(alerts)
    if view.nodes and view.domain is None:  # a domain's nodes are counted in its scope
        parts.append(f"🖥 {names(view.nodes)}")
    if view.url and SAFE_URL.fullmatch(view.url):
        parts.append(f"<{view.url}|open in console>")
    return context(" · ".join(parts))


def _facts(facts: dict[str, str]) -> Block:
    items = list(facts.items())
    if len(items) > SECTION_FIELDS:
        rest = items[SECTION_FIELDS - 1 :]
        items = items[: SECTION_FIELDS - 1]
        items.append((f"{len(rest)} more", ", ".join(key for key, _ in rest)))
    fields = [
        mrkdwn(f"*{safe(key, 60)}*\n{safe(value, FACT_VALUE)}", FIELD_TEXT) for key, value in items
    ]
    return {"type": "section", "fields": fields}


def _incident_actions(view: CardView) -> Block:
    buttons = []
    if view.status == "open":
        buttons.append(button("Acknowledge", "incident.ack", view.number, style="primary"))
    buttons.append(button("Take ownership", "incident.own", view.number))
    buttons.append(button("Resolve", "incident.resolve", view.number))
    return {"type": "actions", "block_id": f"incident:{view.number}", "elements": buttons}


def _resolution(view: CardView, mentions: Mentions) -> Block:
    if view.status == "resolved":
        word = "✅ *Resolved*"
    else:
        word = f"🔒 *{escape(view.status.capitalize())}*"
    if view.resolved_at:
        at = utc(view.resolved_at).strftime("%Y-%m-%d %H:%M UTC")
        word += f" at {at}, {elapsed(view.resolved_at - view.opened_at)} after it opened"
    if view.resolved_by:
        word += f" by {person(view.resolved_by, mentions)}"
    if view.owner:
        word += f" · owner {person(view.owner, mentions)}"
    disposition = escape(view.disposition.strip()) if view.disposition else "none recorded"
    return section(f"{word}\n*Disposition:* {disposition}")


# --- runbook steps ------------------------------------------------------------------------


class _Line(NamedTuple):
    text: str


def _runbook(view: CardView, *, budget: int, mentions: Mentions) -> list[Block]:
    """Steps as packed lines, an actions block under each awaiting step, within `budget`.

    A long runbook keeps its first steps and ends with `… N more steps`: the number of
    blocks only grows with the steps shown, so a binary search finds how many fit.
    """
    if view.runbook is None and not view.steps:
        return [section("📖 No runbook matched: follow the on-call rules by hand.")]
    items = [_Line(f"📖 *Runbook* {safe(view.runbook or 'unknown', 100)}")]
    per_step = [_step_items(step, view, mentions) for step in view.steps]
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


def _step_items(step: StepView, view: CardView, mentions: Mentions) -> list[_Line | Block]:
    if step.stoppable and view.active and step.run_id is not None:
        line = _step_line(step, view.now, AWAITING_LINE, mentions)
        return [_Line(line), _stop_actions(step, step.run_id)]
    if not (step.awaiting and view.active and step.run_id is not None):
        return [_Line(_step_line(step, view.now, STEP_LINE, mentions))]
    line = _step_line(step, view.now, AWAITING_LINE, mentions)
    return [_Line(line), _step_actions(step, step.run_id)]


def _step_line(step: StepView, now: datetime, limit: int, mentions: Mentions) -> str:
    """`⏳ *Power cycle* · `bmc.power_cycle` node=n2 · 1/2 (alice) · expires in 12m — why`."""
    parts = [f"{_STATE.get(step.state, '❔')} *{safe(step.title, 120) or escape(step.step)}*"]
    if step.action:
        action = f"`{safe(step.action, 60)}`"
        if step.each is not None:
            action += f" on {safe(step.each.set, 80)}"
        elif step.params:
            action += f" {_params(step.params)}"
        parts.append(action)
    if step.each is not None and step.state not in ("awaiting_approval", "not_reached"):
        parts.append(_counted(step))
    if step.approvals_required:
        given = f"{step.approvals}/{step.approvals_required}"
        if step.approvers:
            given += f" ({', '.join(person(who, mentions) for who in step.approvers)})"
        parts.append(given)
    if step.awaiting and step.expires_at:
        left = step.expires_at - now
        parts.append(f"expires in {elapsed(left)}" if left > timedelta(0) else "expired")
    line = " · ".join(parts)
    if step.summary.strip():
        line += f" — {escape(one_line(step.summary))}"
    return clip(line, limit, markup=True)


def _counted(step: StepView) -> str:
    """`done 12 · running 4 · failed 1 · left 15 (failed: a-07, a-09)`: counts, and the
    failed nodes named (a few: the card is read on a phone; the list is in the thread)."""
    assert step.each is not None
    text = step.each.counted
    if step.each.failed_nodes:
        named = ", ".join(step.each.failed_nodes[:FAILED_NAMED])
        more = len(step.each.failed_nodes) - FAILED_NAMED
        text += f" (failed: {named}{f' +{more}' if more > 0 else ''})"
    if step.each.stopped_by:
        text += f" · stopped by {step.each.stopped_by}"
    return safe(text, 300)


def _params(params: dict[str, object]) -> str:
    """`node=gpu-node-02, gpu=5`: shown to the human, never put in a button."""
    text = ", ".join(f"{key}={clip(one_line(str(value)), 40)}" for key, value in params.items())
    return safe(text, 160)


def _step_actions(step: StepView, run_id: int) -> Block:
    label = step.approve_label
    if step.kind == "manual":
        decide = button("Done", "step.done", run_id, style="primary")
    elif step.risk == "disruptive" or step.each is not None and step.each.count is not None:
        decide = button(label, "step.approve", run_id, style="danger", confirm=_confirm(step))
    else:
        decide = button(label, "step.approve", run_id, style="primary")
    skip = button("Skip", "step.skip", run_id)
    return {"type": "actions", "block_id": f"step:{run_id}", "elements": [decide, skip]}


def _stop_actions(step: StepView, run_id: int) -> Block:
    """Stop the rest of a running step over many nodes: those running finish."""
    assert step.each is not None
    confirm = {
        "title": plain(f"Stop the rest of {one_line(step.title)}?", CONFIRM_TITLE),
        "text": plain(
            f"{step.each.running} running finish; none of the {step.each.left} left starts. "
            "The runbook stops there.",
            CONFIRM_TEXT,
        ),
        "confirm": plain("Yes, stop the rest", CONFIRM_BUTTON),
        "deny": plain("Cancel", CONFIRM_BUTTON),
        "style": "danger",
    }
    stop = button("Stop the rest", "step.stop", run_id, style="danger", confirm=confirm)
    return {"type": "actions", "block_id": f"step-stop:{run_id}", "elements": [stop]}


def _confirm(step: StepView) -> Block:
    """The dialog names the action and its exact targets: a person confirms a node, not an id."""
    targets = [one_line(target) for target in step.targets] or [
        one_line(f"{key}={value}") for key, value in step.params.items()
    ]
    named = clip(", ".join(targets) or "unknown targets", 200)
    title = clip(one_line(step.title), 60)
    if not all(target in title for target in targets):
        title += f": {named}"
    kind = "Disruptive" if step.risk == "disruptive" else "A change"
    text = (
        f"{step.action or step.step} on {named}. "
        f"{kind}: approval {step.approvals + 1} of {step.approvals_required or 1}."
    )
    if step.each is not None and step.each.count is not None:
        text += f" You approve it on {step.each.count} nodes."
    return {
        "title": plain(f"{title}?", CONFIRM_TITLE),
        "text": plain(text, CONFIRM_TEXT),
        "confirm": plain("Yes, approve", CONFIRM_BUTTON),
        "deny": plain("Cancel", CONFIRM_BUTTON),
        "style": "danger",
    }


# --- other messages -------------------------------------------------------------------------


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
            section(f"{_emoji(view)} *{escape(view.ref)}* {safe(view.title, 500)}"),
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
    return (
        f"{_emoji(view)} *{escape(view.ref)}* {escape(view.severity)} · {escape(view.status)}"
        f" · {safe(view.title, 200)} · {elapsed(view.now - view.opened_at)}"
    )


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

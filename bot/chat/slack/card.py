"""The incident card in Block Kit, led by what a person has to decide now.

Top to bottom: the header; the status line (what happened, to which node or domain, since
when, who owns it) and the escalation line; the one step waiting for a decision, with its
buttons; the step running, with its progress (a domain step as counts and a compact grid,
never a line per node); the facts; then one context line for everything else (the steps
done, the skipped and not-reached ones folded into a count) and the incident's buttons.
The thread keeps the full log. The card is shared by everyone in the channel, so it says
who approved ("approved by @alice, waiting for one more") rather than "you".

Words come from `bot.chat.wording` (the console says the same); they are plain text, so
each is escaped here, and the people in them (structured ids, never alert text) become
mentions through `_say`. Every text is clipped to its Block Kit limit.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Callable
from datetime import datetime
from functools import partial

from bot.chat import wording
from bot.chat.slack.mrkdwn import (
    BLANK,
    CONFIRM_BUTTON,
    CONFIRM_TEXT,
    CONFIRM_TITLE,
    FACT_VALUE,
    FIELD_TEXT,
    HEADER_TEXT,
    SAFE_URL,
    SECTION_FIELDS,
    SECTION_TEXT,
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
)
from bot.chat.views import CardView, EachView, StepView
from bot.chat.wording import elapsed, escalation_line, utc

SEVERITY = {"critical": "🔴", "warning": "🟠", "info": "🔵"}
STATE = {
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
RISK = {"change": "a change", "disruptive": "disruptive: two people"}
"""What a step's risk means for whoever decides."""
CONTEXT_TEXT = 2000
"""A context element's text (Slack's limit for a text object in a context block)."""
FAILED_NAMED = 5
"""Failed nodes the running step names; the rest are counted (the thread has every one)."""
HISTORY_STEP = 160
"""How much of one ended step the history line shows."""
DEPENDENTS_NAMED = 6
PROPOSE_AGAIN = 3
"""Propose again buttons a card offers at most (the newest ends first)."""


def card(view: CardView, mentions: Mentions = slack_ids) -> tuple[str, list[Block]]:
    """The incident card: `(fallback text, blocks)`; people are mentioned by the Slack ids
    `mentions` (the people directory) gives them."""
    blocks = [header(view), _status(view, mentions)]
    line = escalation_line(view)
    if line:
        blocks.append(context(f"📟 {escape(line)}"))
    decision = view.decision
    if decision is not None and decision.run_id is not None:
        blocks += _decision(view, decision, decision.run_id, mentions)
    running = view.running_step
    if running is not None:
        blocks += _running(view, running, mentions)
    if view.facts:
        blocks.append(_facts(view.facts))
    blocks.append(_rest(view, mentions))
    if view.active:
        blocks += _propose_again(view)
        blocks.append(_incident_actions(view))
    else:
        blocks.append(_resolution(view, mentions))
    return fallback(view), blocks


def fallback(view: CardView) -> str:
    """One line for notifications: `🔴 INC-7 critical: GPU 5 XID 79 on gpu-node-02 (open)`,
    and what waits, if a decision does."""
    title = safe(view.title, HEADER_TEXT) or "(no title)"
    ref, severity, status = escape(view.ref), escape(view.severity), escape(view.status)
    text = f"{emoji(view)} {ref} {severity}: {title} ({status})"
    if view.decision is not None:
        text += f" · waiting for a decision: {safe(view.decision.title, 80)}"
    return text


def emoji(view: CardView) -> str:
    return SEVERITY.get(view.severity, "⚪")


def header(view: CardView) -> Block:
    text = f"{emoji(view)} {view.ref} {view.severity}: {one_line(view.title) or '(no title)'}"
    return {"type": "header", "text": plain(text, HEADER_TEXT)}


def _say(make: Callable[[wording.Who], str], mentions: Mentions) -> str:
    """Wording's plain text as escaped mrkdwn, the people it names as mentions. Each person
    is marked with a token no alert text can know, so only the bot's own ids mention."""
    nonce = secrets.token_hex(6)
    people: list[str] = []

    def who(person_id: str) -> str:
        people.append(person_id)
        return f"\x00{nonce}{len(people) - 1}\x00"

    pieces = re.split(f"\x00{nonce}(\\d+)\x00", make(who))
    shown = [
        person(people[int(piece)], mentions) if index % 2 else escape(BLANK.sub(" ", piece))
        for index, piece in enumerate(pieces)
    ]
    return "".join(shown).strip()


def _status(view: CardView, mentions: Mentions) -> Block:
    """`*Open* · GPU 5 XID 79 · on gpu-node-02 · since 03:00:12 UTC (42m) · no owner ·
    acked by @alice · 🔔 1/2 alerts firing · open in console`."""
    parts = [f"*{escape(view.status.capitalize())}*"]
    status = _say(lambda who: wording.status_line(view, who, title=False), mentions)
    parts.append(clip(status, 600, markup=True))
    if view.merged_into is not None:
        parts.append(f"merged into {escape(view.merged_into)}")
    for runbook, count in view.symptoms:
        noun = "alert" if count == 1 else "alerts"
        parts.append(f"{count} {safe(runbook, 60)} {noun} attached as symptoms")
    if view.acknowledged_by and view.acknowledged_by != view.owner:
        parts.append(f"acked by {person(view.acknowledged_by, mentions)}")
    alerts = f"🔔 {view.alerts_firing}/{view.alerts_total} alerts firing"
    if view.alert_names:
        alerts += f": {names(view.alert_names)}"
    parts.append(alerts)
    if view.url and SAFE_URL.fullmatch(view.url):
        parts.append(f"<{view.url}|open in console>")
    return {"type": "context", "elements": [mrkdwn(" · ".join(parts), CONTEXT_TEXT)]}


# --- the decision ----------------------------------------------------------------------------


def _decision(view: CardView, step: StepView, run_id: int, mentions: Mentions) -> list[Block]:
    """The waiting step: what it does, to what, where it stands, what a skip also skips,
    then its buttons (and Page the second line now while a second approver is missing)."""
    lines = [f"⏳ *Waiting for a decision: {safe(step.title, 150) or escape(step.step)}*"]
    what = _what(step)
    if what:
        lines.append(what)
    if _second_missing(step):
        words = _say(
            lambda who: wording.waiting_for_second(step, view.second_line, None, who), mentions
        )
        lines.append(words)
        if step.expires_at is not None:
            left = step.expires_at - view.now
            lines.append(f"expires in {elapsed(left)}" if left.total_seconds() > 0 else "expired")
    else:
        lines.append(_say(lambda who: wording.step_state(step, view.now, who), mentions))
    if step.kind == "manual" and step.summary.strip():
        lines.append(f"📋 {clip(safe(step.summary, 1200), 1200, markup=True)}")
    if step.dependents:
        lines.append(f"Skipping it also skips: {_dependents(step)}")
    text = clip("\n".join(lines), SECTION_TEXT, markup=True)
    return [section(text), _decision_actions(view, step, run_id)]


def _what(step: StepView) -> str:
    """`` `bmc.power_cycle` node=gpu-node-02 · disruptive``."""
    if not step.action:
        return ""
    text = f"`{safe(step.action, 60)}`"
    if step.each is not None:
        text += f" on {safe(step.each.set, 80)}"
    elif step.params:
        text += f" {_params(step.params)}"
    risk = RISK.get(step.risk or "")
    if risk:
        text += f" · {risk}"
    return text


def _second_missing(step: StepView) -> bool:
    return step.approvals > 0 and step.approvals < step.approvals_required


def _dependents(step: StepView) -> str:
    titles = step.dependent_titles or step.dependents
    shown = ", ".join(one_line(title) for title in titles[:DEPENDENTS_NAMED])
    more = len(titles) - DEPENDENTS_NAMED
    return safe(shown + (f" and {more} more" if more > 0 else ""), 600)


def _decision_actions(view: CardView, step: StepView, run_id: int) -> Block:
    if step.kind == "manual":
        decide = button("Done", "step.done", run_id, style="primary")
    elif step.risk == "disruptive" or step.each is not None and step.each.count is not None:
        decide = button(
            step.approve_label, "step.approve", run_id, style="danger", confirm=_confirm(step)
        )
    else:
        decide = button(step.approve_label, "step.approve", run_id, style="primary")
    elements = [decide]
    if step.dependents:  # asks why, and lists what it also skips, in a dialog
        elements.append(button("Skip…", "step.skip_why", run_id))
    else:
        elements.append(button("Skip", "step.skip", run_id))
    if _second_missing(step) and view.second_line is not None:
        elements.append(button("Page the second line now", "incident.page_second", view.number))
    return {"type": "actions", "block_id": f"step:{run_id}", "elements": elements}


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


def _params(params: dict[str, object]) -> str:
    """`node=gpu-node-02, gpu=5`: shown to the human, never put in a button."""
    text = ", ".join(f"{key}={clip(one_line(str(value)), 40)}" for key, value in params.items())
    return safe(text, 160)


# --- the running step -------------------------------------------------------------------------


def _running(view: CardView, step: StepView, mentions: Mentions) -> list[Block]:
    """`🔄 *Running: Drain 32 nodes of row/a*` with its progress: a domain step's counts and
    grid (■ done ▶ running ✖ failed □ left), the failed nodes named (a few)."""
    lines = [f"🔄 *Running: {safe(step.title, 150) or escape(step.step)}*"]
    what = _what(step)
    if what:
        lines.append(what)
    each = step.each
    if each is None:
        lines.append(_say(lambda who: wording.step_state(step, view.now, who), mentions))
    else:
        lines.append(escape(each.counted))
        lines.append(f"```{wording.grid(each)}```")
        lines.append("■ done · ▶ running · ✖ failed · □ left")
        if each.failed_nodes:
            named = ", ".join(each.failed_nodes[:FAILED_NAMED])
            more = len(each.failed_nodes) - FAILED_NAMED
            lines.append(f"failed: {safe(named, 400)}{f' +{more}' if more > 0 else ''}")
        if each.stopped_by:
            lines.append(f"stopped by {person(each.stopped_by, mentions)}")
    blocks = [section(clip("\n".join(lines), SECTION_TEXT, markup=True))]
    if step.stoppable and view.active and step.run_id is not None:
        blocks.append(_stop_actions(step, step.run_id))
    return blocks


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


# --- facts, the rest, buttons -------------------------------------------------------------------


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


def _rest(view: CardView, mentions: Mentions) -> Block:
    """One context block: the runbook and its ended steps, the folded count, the thread."""
    if view.runbook is None and not view.steps:
        return context("📖 No runbook matched: follow the on-call rules by hand.")
    ended = []
    for step in view.history:
        text = f"{STATE.get(step.state, '❔')} {safe(step.title, 80) or escape(step.step)}"
        if step.each is not None and step.state != "not_reached":
            text += f" ({_counted(step.each, mentions)})"
        elif step.state != "succeeded":
            words = _say(partial(_state_of, step, view.now), mentions)
            text += f" ({clip(words, HISTORY_STEP, markup=True)})"
        ended.append(text)
    history = f"📖 {safe(view.runbook or 'runbook', 100)}"
    if ended:
        history += ": " + " · ".join(ended)
    elements = [mrkdwn(clip(history, CONTEXT_TEXT, markup=True), CONTEXT_TEXT)]
    folded = wording.folded_line(view.folded)
    if folded:
        elements.append(mrkdwn(f"⏭ {safe(folded, 600)}", CONTEXT_TEXT))
    elements.append(mrkdwn("🧵 the full log is in the thread", CONTEXT_TEXT))
    return {"type": "context", "elements": elements}


def _counted(each: EachView, mentions: Mentions) -> str:
    """`done 3 · running 0 · failed 1 · left 0 (failed: a-07)` · stopped by @alice."""
    text = escape(each.counted)
    if each.failed_nodes:
        named = ", ".join(each.failed_nodes[:FAILED_NAMED])
        more = len(each.failed_nodes) - FAILED_NAMED
        text += f" (failed: {safe(named, 300)}{f' +{more}' if more > 0 else ''})"
    if each.stopped_by:
        text += f" · stopped by {person(each.stopped_by, mentions)}"
    return text


def _state_of(step: StepView, now: datetime, who: wording.Who) -> str:
    return wording.step_state(step, now, who)


def _propose_again(view: CardView) -> list[Block]:
    """Propose again, for the steps a person may propose again (`proposable_again`, the
    newest few): skipped by a person, failed, timed out, expired or cancelled."""
    found = list(reversed(view.proposable_again))[:PROPOSE_AGAIN]
    elements = [
        button(
            f"Propose again: {one_line(step.title) or step.step}",
            "step.repropose" if index == 0 else f"step.repropose.{index + 1}",
            step.run_id,
        )
        for index, step in enumerate(found)
        if step.run_id is not None
    ]
    if not elements:
        return []
    return [{"type": "actions", "block_id": f"repropose:{view.number}", "elements": elements}]


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

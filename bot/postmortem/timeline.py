"""Which log entries tell the story of an incident, as language-neutral facts.

The timeline holds what happened: alerts fired and resolved, decisions by people,
actions and their results, pages and acknowledgements. Each `Moment` carries the facts
of its entry (`facts`: the step's id and titles, the action's result, the note a person
wrote) so `bot.postmortem.phrases` can word it in the report's language; the log's own
English summary stays in `text` for templates that want it.

Left out: proposals, progress reports, the bot's automatic approvals of read-only steps
(their result is the row that matters), repeats of one alert, and the steps the bot
skipped because they did not apply (`when:` false): those are counted in `Skipped` and
said once, in one sentence, with their titles and never their expressions.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import Row

from bot.clock import as_utc
from bot.incidents import history
from bot.runbooks.models import StepRun
from bot.runbooks.schema import Text

TYPES = (
    "alert.firing",
    "alert.resolved",
    "incident.opened",
    "incident.acknowledged",
    "incident.owner",
    "incident.severity_raised",
    "incident.alerts_cleared",
    "incident.resolved",
    "incident.reopened",
    "incident.closed",
    "escalation.paged",
    "escalation.silenced",
    "page.failed",
    "step.approved",
    "step.succeeded",
    "step.failed",
    "step.timed_out",
    "step.skipped",
    "step.interrupted",
    "step.reproposed",
    "step.stop_requested",
    "followup.added",
)
"""Log entry types the timeline shows; progress reports and proposals stay in the log."""
DECISIONS = (
    "incident.acknowledged",
    "incident.owner",
    "incident.resolved",
    "step.approved",
    "step.succeeded",
    "step.skipped",
    "step.reproposed",
    "step.stop_requested",
)
"""Entry types that are a person's decision when a person wrote them: the first one is
the response, whether or not it acknowledged the incident."""
MAX_TIMELINE = 200
"""Entries shown at most; a storm's thousands of repeats are summarized, not listed."""


@dataclass(frozen=True)
class Moment:
    at: datetime
    actor: str
    kind: str
    text: str
    """The log entry's own summary (English, redacted)."""
    facts: dict[str, Any] = field(default_factory=dict)
    """What the phrases word: see `facts_of`."""
    new_day: bool = False
    """Its date differs from the row before (or from the incident's start)."""


@dataclass(frozen=True)
class Skipped:
    """Steps the bot skipped because they did not apply, once each, in runbook order."""

    titles: list[dict[str, str]] = field(default_factory=list)
    """Each step's title in `en` and `zh` (the same text when the runbook gives one)."""

    def __len__(self) -> int:
        return len(self.titles)


def titles_of(text: Text | None, step_id: str) -> dict[str, str]:
    """A step's title in both languages; the step id when the runbook gives none."""
    if text is None:
        return {"en": step_id, "zh": step_id}
    if isinstance(text, str):
        return {"en": text, "zh": text}
    en = text.en or text.zh or step_id
    return {"en": en, "zh": text.zh or en}


@dataclass(frozen=True)
class Story:
    moments: list[Moment]
    """Oldest first; at most `MAX_TIMELINE` (the first and the last half)."""
    left_out: int
    """Entries folded away: repeats of one alert, the middle of a storm."""
    skipped: Skipped
    failures: list[Moment]
    """Every step that failed, timed out or was interrupted, even those `moments` left out."""


FAILED = ("step.failed", "step.timed_out", "step.interrupted")


def build(
    entries: Sequence[Row[Any]],
    runs: list[StepRun],
    titles: dict[str, dict[str, str]],
    start: datetime,
    hide: Callable[[str], str],
    names: Callable[[str], str] = str,
) -> Story:
    """The moments that tell the story, and what was folded away."""
    by_run = {run.id: run for run in runs}
    moments: list[Moment] = []
    seen_firing: set[str] = set()
    skipped: list[str] = []
    left_out = 0
    for entry in entries:
        if entry.type not in TYPES:
            continue
        human = entry.actor_kind == "human"
        if entry.type == "alert.firing":
            key = str(entry.data.get("fingerprint", entry.summary))
            if key in seen_firing:
                left_out += 1
                continue
            seen_firing.add(key)
        if entry.type == "step.approved" and not human:
            continue  # the bot approving a read: its result is the row
        if entry.type == "step.skipped" and not human:
            step = str(entry.data.get("step", ""))
            if step not in skipped:
                skipped.append(step)
            continue
        facts = facts_of(entry, by_run, titles, hide, names)
        moments.append(
            Moment(as_utc(entry.at), _who(entry), entry.type, hide(entry.summary), facts)
        )
    # A step the bot skipped and people later ran (proposed again) did apply after all.
    ran = {m.facts.get("step") for m in moments if m.kind != "step.skipped"}
    shown = Skipped([titles.get(s, titles_of(None, s)) for s in skipped if s not in ran])
    failures = [m for m in moments if m.kind in FAILED]
    if len(moments) > MAX_TIMELINE:
        head, tail = moments[: MAX_TIMELINE // 2], moments[-MAX_TIMELINE // 2 :]
        left_out += len(moments) - len(head) - len(tail)
        moments = head + tail
    return Story(_days(moments, start), left_out, shown, failures)


def responded(entries: Sequence[Row[Any]]) -> tuple[datetime, str] | None:
    """When a person first acknowledged or decided anything on the incident, and who."""
    for entry in entries:
        if entry.actor_kind == "human" and entry.type in DECISIONS:
            return as_utc(entry.at), entry.actor_name
    return None


def facts_of(
    entry: Row[Any],
    by_run: dict[int, StepRun],
    titles: dict[str, dict[str, str]],
    hide: Callable[[str], str],
    names: Callable[[str], str] = str,
) -> dict[str, Any]:
    """The facts of one entry the phrases need; free text is redacted here, people known
    by an id are shown by `names`."""
    data: dict[str, Any] = dict(entry.data or {})
    facts: dict[str, Any] = {"human": entry.actor_kind == "human"}
    for key in ("note", "disposition", "reason", "owner", "title", "target"):
        if isinstance(data.get(key), str) and data[key]:
            facts[key] = hide(data[key])
    if entry.type.startswith("alert."):
        labels = data.get("labels") or {}
        facts["alertname"] = hide(str(labels.get("alertname", "")))
        facts["where"] = _where(labels, hide)
    elif entry.type.startswith("step."):
        step = str(data.get("step", ""))
        facts["step"] = step
        facts["titles"] = titles.get(step, titles_of(None, step))
        facts["approvers"] = [str(a) for a in data.get("approvers") or []]
        facts["dependents"] = [str(d) for d in data.get("dependents") or []]
        run = by_run.get(int(data["run"])) if isinstance(data.get("run"), int) else None
        if run is not None:
            facts["kind"] = run.kind
            facts["action"] = run.action
            facts["result"] = dict(run.result or {})
            facts["params"] = dict(run.params or {})
            if entry.type in FAILED:
                facts["error"] = hide(str(data.get("error") or run.summary or ""))
    elif entry.type == "incident.opened":
        facts["severity"] = str(data.get("severity", ""))
    elif entry.type == "incident.severity_raised":
        facts["to"] = str(data.get("to", ""))
    elif entry.type == "incident.owner":
        facts["took"] = data.get("owner") == entry.actor_id
    elif entry.type == "incident.acknowledged":
        facts["decision"] = str(data.get("decision") or "")
        facts["step"] = str(data.get("step") or "")
        if facts["step"]:
            facts["titles"] = titles.get(facts["step"], titles_of(None, facts["step"]))
    elif entry.type == "incident.resolved":
        facts["by_alerts"] = data.get("by") != "human" and entry.actor_kind != "human"
    elif entry.type == "escalation.paged":
        who = [names(str(w)) for w in data.get("chat") or []]
        who += [str(w) for w in data.get("targets") or []]
        facts["paged"] = [hide(w) for w in dict.fromkeys(who)]  # one name once
        facts["level"] = int(data.get("level") or 0) + 1
        facts["again"] = int(data.get("round") or 0) > 0
        facts["ack_timeout"] = data.get("kind") == "ack"
        # "alice (on call: no chat address; ...)": the name; the why is the ladder's English
        facts["unreachable"] = [
            hide(str(w).split(" (", 1)[0]) for w in data.get("unreachable") or []
        ]
    elif entry.type == "escalation.silenced":
        facts["until"] = str(data.get("until") or "")
    elif entry.type == "page.failed":
        facts["attempts"] = int(data.get("attempts") or 0)
    elif entry.type == "followup.added":
        facts["id"] = data.get("id")
    return facts


def _who(entry: Row[Any]) -> str:
    """Who, short: an Alertmanager receiver is "Alertmanager" (the receiver is no one)."""
    if entry.actor_kind == "alertmanager":
        return "Alertmanager"
    return str(entry.actor_name)


def _where(labels: dict[str, Any], hide: Callable[[str], str]) -> dict[str, str]:
    found = {"node": history.node_of(labels) or ""}
    for key, names in (("gpu", ("gpu",)), ("xid", ("xid", "XID"))):
        value = next((labels[n] for n in names if labels.get(n) not in (None, "")), None)
        found[key] = str(value) if value is not None else ""
    return {key: hide(value) for key, value in found.items() if value}


def _days(moments: list[Moment], start: datetime) -> list[Moment]:
    day = as_utc(start).date()
    marked = []
    for moment in moments:
        marked.append(
            Moment(
                moment.at,
                moment.actor,
                moment.kind,
                moment.text,
                moment.facts,
                new_day=moment.at.date() != day,
            )  # fmt: skip
        )
        day = moment.at.date()
    return marked

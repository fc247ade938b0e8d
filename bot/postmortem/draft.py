"""What a postmortem draft says, read from the incident, its log, its alerts and its steps.

`build` gathers language-neutral facts (times, durations, nodes, GPUs, pods evicted, the
direct cause, the timeline, follow-ups, GPU history); the templates
(`postmortem/5why.{zh,en}.md.j2`) word them. Every free text that came from outside (log
summaries, notes, alert annotations) passes `redact` first, so a token pasted into a note
never reaches a draft.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Row, select
from sqlalchemy.orm import Session

from bot.actions import registry
from bot.actions.gpu import xid as xids
from bot.actions.registry import Risk
from bot.clock import as_utc
from bot.incidents import history
from bot.incidents import service as incidents
from bot.incidents.models import Alert, LogEntry
from bot.postmortem import timeline
from bot.postmortem.models import Followup
from bot.postmortem.timeline import Moment, Skipped
from bot.runbooks import versions
from bot.runbooks.models import IncidentRunbook, StepRun

_SECRET = re.compile(
    r"(xox[abposr]-[A-Za-z0-9-]+|xapp-[A-Za-z0-9-]+|(?i:bearer)\s+[A-Za-z0-9._~+/=-]{8,}"
    r"|(?i:(?:password|passwd|secret|token|key)\s*[=:]\s*)\S+)"
)


@dataclass(frozen=True)
class Item:
    id: int
    title: str
    type: str
    owner: str | None
    deadline: str | None
    status: str
    link: str | None


@dataclass(frozen=True)
class Cause:
    """The direct cause as facts: the templates word it in each language."""

    node: str | None
    gpu: str | None
    xid: str | None
    fault_class: str | None
    meaning: str | None
    alert: str
    summary: str


@dataclass
class Draft:
    ref: str
    number: int
    title: str
    severity: str
    status: str
    start: datetime
    end: datetime | None
    duration_minutes: int
    acknowledged_at: datetime | None
    acknowledged_by: str | None
    responded_at: datetime | None
    """The first acknowledgement or the first decision by a person, whichever came first."""
    responded_by: str | None
    mitigated_at: datetime | None
    resolved_at: datetime | None
    back_in_service_at: datetime | None
    owner: str | None
    disposition: str | None
    runbook: str | None
    cause: Cause
    nodes: list[str] = field(default_factory=list)
    gpus: list[str] = field(default_factory=list)
    evicted: list[str] = field(default_factory=list)
    namespaces: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    timeline: list[Moment] = field(default_factory=list)
    left_out: int = 0
    skipped: Skipped = field(default_factory=Skipped)
    followups: list[Item] = field(default_factory=list)
    gpu_history: list[dict[str, Any]] = field(default_factory=list)
    """`gpu.fault_history` results: {"result": the result's fields, "window": "7d"}."""
    pages: int = 0
    pages_failed: int = 0
    steps_failed: list[str] = field(default_factory=list)
    """`step: summary` in the log's English; the templates word `failures`."""
    failures: list[Moment] = field(default_factory=list)
    generated_at: datetime | None = None

    def minutes(self, at: datetime | None) -> int | None:
        """Whole minutes from the start to `at` (None when it did not happen)."""
        if at is None:
            return None
        return max(int((as_utc(at) - self.start).total_seconds() // 60), 0)

    @property
    def tta(self) -> int | None:
        """Time to acknowledge: to the first acknowledgement or decision by a person."""
        return self.minutes(self.responded_at)

    @property
    def ttm(self) -> int | None:
        return self.minutes(self.mitigated_at)

    @property
    def ttr(self) -> int | None:
        return self.minutes(self.resolved_at)


def build(
    session: Session,
    number: int,
    now: datetime,
    secrets: Iterable[str] = (),
    names: Callable[[str], str] = str,
) -> Draft:
    """The draft's facts for incident `number` as of `now`; `names` shows a person known by
    an id (who was paged, who acknowledged) by their name."""
    hide = Redactor(secrets)
    incident = incidents.get(session, number)
    start = as_utc(incident.opened_at)
    end = as_utc(incident.resolved_at) if incident.resolved_at else None
    frozen = session.get(IncidentRunbook, number)
    runs = list(
        session.scalars(
            select(StepRun).where(StepRun.incident_number == number).order_by(StepRun.id)
        )
    )
    alerts = incidents.alerts_of(session, number)
    # Plain rows, not ORM objects: a long night's log is thousands of entries.
    entries = session.execute(
        select(LogEntry.type, LogEntry.at, LogEntry.actor_kind, LogEntry.actor_id,
               LogEntry.actor_name, LogEntry.summary, LogEntry.data)
        .where(LogEntry.incident_number == number)
        .order_by(LogEntry.seq)
    ).all()  # fmt: skip
    acknowledged_at = _utc(incident.acknowledged_at)
    responded_at, responded_by = acknowledged_at, incident.acknowledged_by
    first = timeline.responded(entries)
    if first is not None and (responded_at is None or first[0] <= responded_at):
        responded_at, responded_by = first
    responded_by = names(responded_by) if responded_by else None
    draft = Draft(
        ref=incident.ref,
        number=number,
        title=hide(incident.title),
        severity=incident.severity,
        status=incident.status,
        start=start,
        end=end,
        duration_minutes=int(((end or as_utc(now)) - start).total_seconds() // 60),
        acknowledged_at=acknowledged_at,
        acknowledged_by=incident.acknowledged_by,
        responded_at=responded_at,
        responded_by=responded_by,
        mitigated_at=_first_change(runs),
        resolved_at=end,
        back_in_service_at=_back_in_service(runs),
        owner=incident.owner,
        disposition=hide(incident.disposition) if incident.disposition else None,
        runbook=f"{frozen.runbook_id} v{frozen.runbook_version}" if frozen else None,
        cause=_cause(frozen.facts if frozen else {}, alerts, hide),
        generated_at=as_utc(now),
    )
    draft.nodes = sorted({n for a in alerts if (n := history.node_of(a.labels))})
    draft.gpus = _gpus(alerts)
    _impact(draft, entries, runs, hide)
    titles = _titles(session, frozen)
    story = timeline.build(entries, runs, titles, start, hide, names)
    draft.timeline, draft.left_out, draft.skipped = story.moments, story.left_out, story.skipped
    draft.failures = story.failures
    draft.followups = _followups(session, number, hide)
    draft.gpu_history = [
        {"result": _hidden_values(run.result, hide), "window": str(run.params.get("window", ""))}
        for run in runs
        if run.action == "gpu.fault_history" and run.state == "succeeded" and run.result
    ]
    draft.pages = sum(1 for e in entries if e.type == "escalation.paged")
    draft.pages_failed = sum(1 for e in entries if e.type == "page.failed")
    draft.steps_failed = [
        f"{run.step_id}: {hide(run.summary or '')}"
        for run in runs
        if run.state in ("failed", "timed_out", "interrupted")
    ]
    return draft


def _titles(session: Session, frozen: IncidentRunbook | None) -> dict[str, dict[str, str]]:
    """Each step's title in both languages, from the runbook frozen onto the incident."""
    if frozen is None:
        return {}
    try:
        runbook = versions.runbook(session, frozen.runbook_digest)
    except Exception:  # a version no longer stored: the rows name steps by their ids
        return {}
    return {step.id: timeline.titles_of(step.title, step.id) for step in runbook.steps}


def _hidden_values(result: dict[str, Any], hide: Redactor) -> dict[str, Any]:
    return {k: hide(v) if isinstance(v, str) else v for k, v in result.items()}


def _utc(value: datetime | None) -> datetime | None:
    return as_utc(value) if value is not None else None


def _first_change(runs: list[StepRun]) -> datetime | None:
    """When the first action that changes the cluster or a machine succeeded: mitigation."""
    done = [
        as_utc(run.finished_at)
        for run in runs
        if run.state == "succeeded" and run.finished_at and _risk(run.action) is not Risk.READ
    ]
    return min(done, default=None)


def _back_in_service(runs: list[StepRun]) -> datetime | None:
    done = [
        as_utc(run.finished_at)
        for run in runs
        if run.state == "succeeded" and run.finished_at and run.action == "k8s.uncordon"
    ]
    return max(done, default=None)


def _risk(action: str | None) -> Risk | None:
    if action is None:
        return None
    try:
        return registry.get(action).risk
    except Exception:  # an action no longer registered: not evidence of mitigation
        return None


def _cause(facts: dict[str, Any], alerts: list[Alert], hide: Redactor) -> Cause:
    first = next((a for a in alerts if a.status == "firing"), alerts[0] if alerts else None)
    labels: dict[str, Any] = dict(first.labels) if first else {}
    node = facts.get("node") or history.node_of(labels)
    gpu = facts.get("gpu") or labels.get("gpu")
    code = str(facts.get("xid") or labels.get("xid") or labels.get("XID") or "")
    fault_class = meaning = None
    if code.isdigit():
        found = xids.classify([int(code)])
        fault_class, meaning = found.fault_class, found.meaning
    summary = ""
    if first is not None:
        summary = str(
            first.annotations.get("summary") or first.annotations.get("description") or ""
        )
    return Cause(
        node=hide(str(node)) if node else None,
        gpu=hide(str(gpu)) if gpu not in (None, "") else None,
        xid=code or None,
        fault_class=fault_class,
        meaning=meaning,
        alert=hide(first.alertname) if first else "",
        summary=hide(summary),
    )


def _gpus(alerts: list[Alert]) -> list[str]:
    found = []
    for alert in alerts:
        node = history.node_of(alert.labels) or "?"
        gpu = alert.labels.get("gpu")
        if gpu not in (None, ""):
            name = f"{node}/GPU {gpu}"
            if name not in found:
                found.append(name)
    return found


def _impact(draft: Draft, entries: Sequence[Row[Any]], runs: list[StepRun], hide: Redactor) -> None:
    """Pods the drains evicted (with their namespaces) and what people noted by hand. A
    drain's plan (`drain.started`) counts only once it went ahead: not when it was refused
    before any eviction, and not for the pods still on the node when it gave up."""
    planned: dict[tuple[Any, Any], list[str]] = {}
    for entry in entries:
        key = (entry.data.get("run"), entry.data.get("node"))
        if entry.type == "drain.started" and not entry.data.get("dry_run"):
            planned[key] = [str(pod) for pod in entry.data.get("evict") or []]
        elif entry.type == "drain.refused":
            planned.pop(key, None)
        elif entry.type == "drain.finished" and key in planned:
            left = {str(note.get("pod")) for note in entry.data.get("remaining") or []
                    if isinstance(note, dict)}  # fmt: skip
            planned[key] = [pod for pod in planned[key] if pod not in left]
    for pods in planned.values():
        for pod in pods:
            if hide(pod) not in draft.evicted:
                draft.evicted.append(hide(pod))
    draft.namespaces = sorted({pod.split("/", 1)[0] for pod in draft.evicted if "/" in pod})
    for run in runs:
        if run.kind == "manual" and run.state == "succeeded" and run.summary:
            draft.notes.append(f"{run.step_id}: {hide(run.summary)}")


def _followups(session: Session, number: int, hide: Redactor) -> list[Item]:
    rows = session.scalars(
        select(Followup)
        .where(Followup.incident_number == number, Followup.status != "cancelled")
        .order_by(Followup.id)
    )
    return [
        Item(
            row.id,
            hide(row.title),
            row.type,
            row.owner,
            row.deadline.isoformat() if row.deadline else None,
            row.status,
            row.link,
        )
        for row in rows
    ]


class Redactor:
    """Hides tokens, bearer credentials, `password=...` pairs and the configured secrets."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        self.secrets = sorted({s for s in secrets if s and len(s) >= 4}, key=len, reverse=True)

    def __call__(self, text: str) -> str:
        for secret in self.secrets:
            text = text.replace(secret, "[redacted]")
        return _SECRET.sub(_hidden, text)


def _hidden(match: re.Match[str]) -> str:
    found = match.group(0)
    for prefix in ("password", "passwd", "secret", "token", "key"):
        if found.lower().startswith(prefix):
            sep = re.match(r"[A-Za-z]+\s*[=:]\s*", found)
            return (sep.group(0) if sep else "") + "[redacted]"
    if found.lower().startswith("bearer"):
        return "Bearer [redacted]"
    return "[redacted]"


def elapsed(delta: timedelta) -> int:
    return int(delta.total_seconds() // 60)

"""Build what chat shows from the database: an incident's card and its log lines.

Read inside the caller's session, so a card is one consistent picture. Every chat
surface renders these views; none of them reads the database itself.
"""

from __future__ import annotations

from collections import Counter
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from bot.actions import registry
from bot.chat.views import CardView, EachView, EscalationView, LogLine, SecondLineView, StepView
from bot.config import Settings
from bot.errors import BotError
from bot.escalation import ladder, second_level
from bot.incidents import service as incidents
from bot.incidents.models import Alert, LogEntry
from bot.runbooks import foreach
from bot.runbooks import service as runbooks
from bot.runbooks.models import IncidentRunbook
from bot.runbooks.service import StepRow

NODE_LABELS = ("Hostname", "node", "kubernetes_node", "instance_node")
"""Labels that name a node, in the order they are trusted."""
TARGET_KEYS = ("node", "nodes", "gpu", "gpus", "queue", "namespace", "pod")
"""Parameters a confirm dialog names, in this order."""


def card(
    session: Session,
    number: int,
    now: datetime,
    *,
    console: str | None = None,
    settings: Settings | None = None,
) -> CardView:
    """The incident's card as it stands; `console` is the console's public URL, for a
    link to the incident's page there. With `settings`, the card names the second line
    (who the next level pages) while a decision waits for a second person."""
    incident = incidents.get(session, number)
    alerts = incidents.alerts_of(session, number)
    frozen = session.get(IncidentRunbook, number)
    runbook, steps = (None, ()) if frozen is None else _steps(session, number)
    names = Counter(alert.alertname for alert in alerts)
    return CardView(
        number=incident.number,
        ref=incident.ref,
        title=incident.title,
        severity=incident.severity,
        status=incident.status,
        opened_at=incident.opened_at,
        now=now,
        owner=incident.owner,
        acknowledged_by=incident.acknowledged_by,
        resolved_at=incident.resolved_at,
        resolved_by=incident.resolved_by,
        facts=dict(frozen.facts) if frozen is not None else {},
        runbook=runbook,
        steps=steps,
        alerts_firing=sum(alert.status == "firing" for alert in alerts),
        alerts_total=len(alerts),
        alert_names=tuple(name for name, _ in names.most_common()),
        nodes=_nodes(alerts),
        disposition=incident.disposition,
        escalation=escalation(session, number),
        url=f"{console.rstrip('/')}/incidents/{number}" if console else None,
        domain=incident.domain,
        merged_into=f"INC-{incident.merged_into}" if incident.merged_into is not None else None,
        symptoms=tuple(Counter(a.symptom for a in alerts if a.symptom is not None).most_common()),
        second_line=_second_line(session, settings, number, now, steps),
    )


def _second_line(
    session: Session,
    settings: Settings | None,
    number: int,
    now: datetime,
    steps: tuple[StepView, ...],
) -> SecondLineView | None:
    """Read only when a step waits for more people than it has (it costs a policy read)."""
    waiting = any(step.awaiting and step.approvals_required > 1 for step in steps)
    if settings is None or not waiting:
        return None
    found = second_level.second_line(session, settings, number, now)
    if found is None:
        return None
    return SecondLineView(names=found.names, level=found.level, paged_at=found.paged_at)


def escalation(session: Session, number: int) -> EscalationView | None:
    """Where the incident's escalation stands; None when its severity never pages."""
    standing = ladder.standing(session, number)
    if standing is None:
        return None
    return EscalationView(
        level=standing.level + 1,
        levels=standing.levels,
        round=standing.round + 1,
        paged_at=standing.paged_at,
        next_kind=standing.next_kind,
        next_at=standing.next_at,
        next_level=None if standing.next_level is None else standing.next_level + 1,
        silenced_until=standing.silenced_until,
        working_hours_only=standing.working_hours_only,
    )


def log_lines(session: Session, number: int, first: int, last: int) -> list[LogLine]:
    """Log entries `first`..`last` (sequence numbers, inclusive), in order."""
    stmt = (
        select(LogEntry)
        .where(
            LogEntry.incident_number == number,
            LogEntry.seq >= first,
            LogEntry.seq <= last,
        )
        .order_by(LogEntry.seq)
    )
    return [
        LogLine(
            seq=e.seq,
            at=e.at,
            actor=e.actor_id,
            type=e.type,
            summary=e.summary,
            human=e.actor_kind == "human",
        )
        for e in session.scalars(stmt)
    ]


def _steps(session: Session, number: int) -> tuple[str, tuple[StepView, ...]]:
    runbook, rows = runbooks.rows_in(session, number)
    titles = {row.step: row.title for row in rows}
    return runbook, tuple(_step(row, titles) for row in rows)


def _step(row: StepRow, titles: dict[str, str]) -> StepView:
    dependents = tuple(row.dependents)
    return StepView(
        step=row.step,
        title=row.title,
        state=row.state,
        kind=row.kind or ("action" if row.action else "manual"),
        run_id=row.run_id,
        attempt=row.attempt,
        action=row.action,
        risk=risk_of(row.action),
        params=dict(row.params),
        approvals=row.approvals,
        approvals_required=row.approvals_required,
        approvers=tuple(row.approvers),
        expires_at=datetime.fromisoformat(row.expires_at) if row.expires_at else None,
        summary=row.summary,
        targets=targets_of(row.params),
        each=_each(row),
        dependents=dependents,
        dependent_titles=tuple(titles.get(step, step) for step in dependents),
    )


def _each(row: StepRow) -> EachView | None:
    progress = row.progress
    if progress is None:
        return None
    return EachView(
        set=progress["set"],
        total=progress["total"],
        succeeded=progress["succeeded"],
        running=progress["running"],
        failed=progress["failed"],
        left=progress["left"],
        failed_nodes=tuple(progress["failed_nodes"]),
        nodes=tuple(progress["nodes"]),
        states=tuple(str(node.get("state", "left")) for node in progress["nodes"].values()),
        count=progress["total"] if foreach.needs_count(row.params, row.action) else None,
        stopped_by=progress["stopped_by"],
    )


def risk_of(action: str | None) -> str | None:
    if action is None:
        return None
    try:
        return registry.get(action).risk.value
    except BotError:  # a frozen runbook naming an action this version no longer has
        return None


def targets_of(params: dict[str, object]) -> tuple[str, ...]:
    """`node=gpu-node-02, gpu=5` -> ("gpu-node-02", "GPU 5"): what a confirm names. A
    step over many nodes names its set: ("32 nodes of row/a (a-01 ... a-32)",)."""
    if foreach.is_for_each(params):
        return (foreach.shown(params).removeprefix("on "),)
    found = []
    for key in TARGET_KEYS:
        value = params.get(key)
        if value in (None, "", []):
            continue
        shown = ", ".join(map(str, value)) if isinstance(value, list) else str(value)
        found.append(
            shown
            if key in ("node", "nodes")
            else f"{key.upper() if key.startswith('gpu') else key} {shown}"
        )
    return tuple(found)


def _nodes(alerts: list[Alert]) -> tuple[str, ...]:
    seen: dict[str, None] = {}
    for alert in alerts:
        for label in NODE_LABELS:
            value = alert.labels.get(label)
            if isinstance(value, str) and value:
                seen.setdefault(value, None)
                break
    return tuple(seen)

"""Incidents as plain functions: find, list, and the human lifecycle transitions.

Every transition locks the incident row, checks the lifecycle, changes the row and writes
the log entry in the caller's transaction, so the change and its record commit together.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from bot.errors import IncidentNotFound, TransitionRefused
from bot.incidents import log
from bot.incidents.lifecycle import Severity, Status, check_transition
from bot.incidents.models import ACTIVE_STATUSES, Alert, Incident


def parse_ref(text: str | int) -> int:
    """`INC-42`, `inc-42` or `42` -> 42; anything else raises IncidentNotFound with the form."""
    raw = str(text).strip()
    digits = raw[4:] if raw.upper().startswith("INC-") else raw
    # ASCII digits only ('²' is a digit to str.isdigit), and within the integer column.
    # At most ten of them: int() of a 5,000-digit string raises before any range check.
    ok = digits.isascii() and digits.isdigit() and len(digits) <= 10
    if not ok or not 1 <= int(digits) < 2**31:
        raise IncidentNotFound(f"{raw!r} is not an incident number; write it like INC-42")
    return int(digits)


def get(session: Session, number: int, *, lock: bool = False) -> Incident:
    stmt = select(Incident).where(Incident.number == number)
    if lock:
        stmt = stmt.with_for_update()
    incident = session.scalars(stmt).one_or_none()
    if incident is None:
        raise IncidentNotFound(f"INC-{number} does not exist; `runbook-bot incidents list`")
    return incident


def list_incidents(
    session: Session,
    *,
    status: Sequence[str] = (),
    severity: Sequence[str] = (),
    limit: int = 100,
) -> list[Incident]:
    stmt = select(Incident).order_by(Incident.number.desc()).limit(limit)
    if status:
        stmt = stmt.where(Incident.status.in_(status))
    if severity:
        stmt = stmt.where(Incident.severity.in_(severity))
    return list(session.scalars(stmt))


def alerts_of(session: Session, number: int) -> list[Alert]:
    stmt = select(Alert).where(Alert.incident_number == number).order_by(Alert.starts_at)
    return list(session.scalars(stmt))


def active_counts(session: Session) -> dict[str, int]:
    """Active (open or acknowledged) incidents per severity."""
    stmt = (
        select(Incident.severity, func.count())
        .where(Incident.status.in_(ACTIVE_STATUSES))
        .group_by(Incident.severity)
    )
    counts = {severity.value: 0 for severity in Severity}
    counts.update({row[0]: row[1] for row in session.execute(stmt)})
    return counts


@dataclass
class Recent:
    """What the last days looked like, for the metrics (drills left out): incidents opened
    in the window by their status now, and the mean time to acknowledge and to resolve,
    per severity, of those acknowledged or resolved in it (seconds)."""

    by_status: dict[str, int] = field(default_factory=dict)
    mtta: dict[str, float] = field(default_factory=dict)
    mttr: dict[str, float] = field(default_factory=dict)


def recent(session: Session, now: datetime, window: timedelta = timedelta(days=7)) -> Recent:
    """Recent incidents' figures (one indexed range read of the window's incidents)."""
    since = now - window
    stmt = select(
        Incident.severity,
        Incident.status,
        Incident.opened_at,
        Incident.acknowledged_at,
        Incident.resolved_at,
    ).where(Incident.opened_at >= since - window, Incident.drill.is_(None))
    figures = Recent(by_status={status.value: 0 for status in Status})
    acks: dict[str, list[float]] = {}
    fixes: dict[str, list[float]] = {}
    for severity, status, opened, acked, resolved in session.execute(stmt):
        if opened >= since:
            figures.by_status[status] = figures.by_status.get(status, 0) + 1
        if acked is not None and acked >= since:
            acks.setdefault(severity, []).append((acked - opened).total_seconds())
        if resolved is not None and resolved >= since:
            fixes.setdefault(severity, []).append((resolved - opened).total_seconds())
    figures.mtta = {severity: sum(v) / len(v) for severity, v in acks.items()}
    figures.mttr = {severity: sum(v) / len(v) for severity, v in fixes.items()}
    return figures


def acknowledge(
    session: Session,
    number: int,
    *,
    actor: log.Actor,
    at: datetime,
    note: str | None = None,
    by: str | None = None,
    decision: dict[str, Any] | None = None,
) -> Incident:
    """Acknowledge; the acknowledger becomes owner when there is none. Repeats are no-ops.
    A decision that acknowledges says which (`by`: "approving step cordon", `decision`:
    {"decision": "approve", "step": "cordon"}, kept in the entry's data)."""
    incident = get(session, number, lock=True)
    if incident.status == Status.ACKNOWLEDGED:
        return incident
    check_transition(incident.ref, Status(incident.status), Status.ACKNOWLEDGED)
    incident.status = Status.ACKNOWLEDGED
    incident.acknowledged_at, incident.acknowledged_by = at, actor.id
    incident.owner = incident.owner or actor.id
    incident.updated_at = at
    summary = f"{actor.name} acknowledged {incident.ref}"
    if by:
        summary += f" by {by}"
    log.append(
        session,
        incident,
        at=at,
        actor=actor,
        type="incident.acknowledged",
        summary=f"{summary}: {note}" if note else summary,
        data={"owner": incident.owner, "note": note, **(decision or {})},
    )
    return incident


def assign_owner(
    session: Session, number: int, owner: str, *, actor: log.Actor, at: datetime
) -> Incident:
    """Make `owner` the incident's owner (taking ownership: `owner` is the actor). Only
    while it is active; a repeat is a no-op."""
    incident = get(session, number, lock=True)
    if not Status(incident.status).active:
        raise TransitionRefused(
            f"{incident.ref} is {incident.status}: reopen it to change its owner"
        )
    if incident.owner == owner:
        return incident
    before, incident.owner, incident.updated_at = incident.owner, owner, at
    took = owner == actor.id
    log.append(
        session,
        incident,
        at=at,
        actor=actor,
        type="incident.owner",
        summary=f"{actor.name} took ownership of {incident.ref}"
        if took
        else f"{actor.name} made {owner} the owner of {incident.ref}",
        data={"owner": owner, "before": before},
    )
    return incident


def resolve(
    session: Session,
    number: int,
    *,
    actor: log.Actor,
    at: datetime,
    disposition: str | None,
    owner: str | None = None,
) -> Incident:
    """Resolve by hand. Critical incidents need an owner and a disposition (no silent fixes)."""
    incident = get(session, number, lock=True)
    if incident.status == Status.RESOLVED:
        return incident
    check_transition(incident.ref, Status(incident.status), Status.RESOLVED)
    disposition = (disposition or "").strip() or None
    if incident.severity == Severity.CRITICAL and disposition is None:
        raise TransitionRefused(
            f"{incident.ref} is critical: say what was done before resolving it, e.g. "
            "'drained gpu-node-02, GPU 5 reset, back in service'"
        )
    incident.owner = owner or incident.owner or actor.id
    incident.status = Status.RESOLVED
    incident.resolved_at, incident.resolved_by = at, actor.id
    incident.disposition = disposition
    incident.updated_at = at
    log.append(
        session,
        incident,
        at=at,
        actor=actor,
        type="incident.resolved",
        summary=f"{actor.name} resolved {incident.ref}"
        + (f": {disposition}" if disposition else ""),
        data={"owner": incident.owner, "disposition": disposition, "by": "human"},
    )
    return incident


def reopen(
    session: Session, number: int, *, actor: log.Actor, at: datetime, reason: str
) -> Incident:
    incident = get(session, number, lock=True)
    if incident.merged_into is not None:
        raise TransitionRefused(
            f"{incident.ref} was merged into INC-{incident.merged_into}, which holds its "
            f"alerts now: work INC-{incident.merged_into} (split its nodes out to work them apart)"
        )
    return reopen_locked(session, incident, actor=actor, at=at, reason=reason)


def reopen_locked(
    session: Session, incident: Incident, *, actor: log.Actor, at: datetime, reason: str
) -> Incident:
    check_transition(incident.ref, Status(incident.status), Status.OPEN)
    incident.status = Status.OPEN
    incident.reopened_at = at
    incident.reopen_count += 1
    incident.acknowledged_at = incident.acknowledged_by = None
    incident.resolved_at = incident.resolved_by = None
    incident.alerts_cleared_at = None
    incident.updated_at = at
    log.append(
        session,
        incident,
        at=at,
        actor=actor,
        type="incident.reopened",
        summary=f"{incident.ref} reopened: {reason}",
        data={"reason": reason, "reopen_count": incident.reopen_count},
    )
    return incident


def close(session: Session, number: int, *, actor: log.Actor, at: datetime) -> Incident:
    incident = get(session, number, lock=True)
    if incident.status == Status.CLOSED:
        return incident
    check_transition(incident.ref, Status(incident.status), Status.CLOSED)
    incident.status = Status.CLOSED
    incident.closed_at = at
    incident.updated_at = at
    log.append(
        session,
        incident,
        at=at,
        actor=actor,
        type="incident.closed",
        summary=f"{actor.name} closed {incident.ref}",
    )
    return incident

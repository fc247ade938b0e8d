"""Ingest one Alertmanager notification: group its alerts into an incident, log what changed.

One notification is one transaction. Which incident it joins, in order:
1. the active incident of its `groupKey`;
2. the incident already holding its alert instances (Alertmanager was re-grouped, or
   these are repeats/resolutions for an incident a human already resolved);
3. a resolved incident of the same group resolved within `reopen_window`, reopened when a
   new firing arrives;
4. otherwise a new incident.
A repeat of a known (fingerprint, startsAt) only bumps its last-received time.

Concurrency: on PostgreSQL a transaction-scoped advisory lock per group serializes posts of
one group; a partial unique index (one active incident per group) and the unique alert
instance key are the backstop, and a violated one retries the whole notification. SQLite
serializes writers at BEGIN.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import cast

from sqlalchemy import Table, bindparam, func, insert, select, tuple_, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from bot.alerts.payload import WebhookAlert, WebhookPayload
from bot.clock import Clock
from bot.db import Database
from bot.incidents import log, service
from bot.incidents.lifecycle import Severity, Status
from bot.incidents.models import ACTIVE_STATUSES, GENESIS, Alert, Incident, LogEntry

logger = logging.getLogger(__name__)

ATTEMPTS = 3
# Core handles of the two tables ingest writes in bulk (see `_Writes`).
ALERTS = cast(Table, Alert.__table__)
LOG = cast(Table, LogEntry.__table__)


@dataclass
class IngestResult:
    incident: int
    opened: bool = False
    reopened: bool = False
    resolved: bool = False
    new: int = 0
    repeats: int = 0
    resolved_alerts: int = 0
    refired: int = 0

    def counts(self) -> dict[str, int]:
        return {
            "new": self.new,
            "repeat": self.repeats,
            "resolved": self.resolved_alerts,
            "refired": self.refired,
        }

    def as_dict(self) -> dict[str, object]:
        return {
            "incident": f"INC-{self.incident}",
            "opened": self.opened,
            "reopened": self.reopened,
            "resolved": self.resolved,
            "alerts": self.counts(),
        }


@dataclass
class _Known:
    """What ingest needs of a stored (or just staged) alert instance."""

    id: int | None
    status: str
    incident_number: int
    annotations: dict[str, str]
    ends_at: datetime | None
    staged: dict[str, object] | None = None  # the pending INSERT row of a new instance


@dataclass
class _Writes:
    """Rows staged during one notification, written in a few statements at the end.

    The ORM's unit of work costs more than the whole rest of ingest at webhook rates, so
    alert and log rows go out as Core executemany statements (one each), and every
    repeated alert is bumped by a single UPDATE.
    """

    alerts: list[dict[str, object]] = field(default_factory=list)
    bumps: list[int] = field(default_factory=list)
    changes: list[_Known] = field(default_factory=list)
    log: list[dict[str, object]] = field(default_factory=list)

    def entry(self, incident: Incident, **fields: object) -> None:
        self.log.append(log.next_entry(incident, **fields))  # type: ignore[arg-type]

    def flush_alerts(self, session: Session, now: datetime) -> None:
        if self.alerts:
            session.connection().execute(insert(ALERTS), self.alerts)
        if self.bumps:
            session.connection().execute(
                update(ALERTS)
                .where(ALERTS.c.id.in_(self.bumps))
                .values(last_received_at=now, receive_count=ALERTS.c.receive_count + 1)
            )
        if self.changes:
            # One executemany for every changed instance: status, end and annotations.
            session.connection().execute(
                update(ALERTS)
                .where(ALERTS.c.id == bindparam("_id"))
                .values(
                    status=bindparam("_status"),
                    ends_at=bindparam("_ends_at"),
                    annotations=bindparam("_annotations"),
                    last_received_at=now,
                    receive_count=ALERTS.c.receive_count + 1,
                ),
                [
                    {
                        "_id": row.id,
                        "_status": row.status,
                        "_ends_at": row.ends_at,
                        "_annotations": row.annotations,
                    }
                    for row in self.changes
                ],
            )
        self.alerts, self.bumps, self.changes = [], [], []

    def flush_log(self, session: Session) -> None:
        if self.log:
            session.connection().execute(insert(LOG), self.log)
        self.log = []


def group_hash(group_key: str) -> str:
    return hashlib.sha256(group_key.encode()).hexdigest()


def ingest(
    db: Database, payload: WebhookPayload, *, clock: Clock, reopen_window: timedelta
) -> IngestResult:
    """Store one notification; return what it did. Retries on a lost uniqueness race."""
    for attempt in range(1, ATTEMPTS + 1):
        try:
            with db.transaction() as session:
                if db.is_postgres:
                    _lock_group(session, group_hash(payload.group_key))
                return _ingest(session, payload, clock.now(), reopen_window)
        except IntegrityError:
            if attempt == ATTEMPTS:
                raise
            logger.info("ingest of group %s lost a race; retrying", payload.group_key[:80])
    raise AssertionError("unreachable")


def _lock_group(session: Session, digest: str) -> None:
    key = int(digest[:15], 16)  # 60 bits: fits PostgreSQL's signed bigint
    session.execute(select(func.pg_advisory_xact_lock(key)))


def _ingest(
    session: Session, payload: WebhookPayload, now: datetime, window: timedelta
) -> IngestResult:
    digest = group_hash(payload.group_key)
    actor = log.Actor.alertmanager(payload.receiver)
    writes = _Writes()
    known = _known_instances(session, payload.alerts)
    latest = _latest_of_group(session, digest)
    incident = latest if latest is not None and Status(latest.status).active else None
    opened = reopened = False

    if incident is None:
        incident = _holding(session, known, payload)
        if incident is not None and Status(incident.status).active:
            _regroup(writes, incident, payload, digest, now, actor)
    if incident is None and latest is not None and _reopens(latest, now - window):
        incident = latest  # a late resolution or repeat for it lands there, no reopen
        if _fresh_firing(payload, known):
            service.reopen_locked(
                session, incident, actor=actor, at=now, reason="its alert fired again"
            )
            reopened = True
    if incident is None:
        previous = latest.number if latest is not None else None
        incident = _open(session, writes, payload, digest, now, actor, previous)
        opened = True

    result = IngestResult(incident.number, opened=opened, reopened=reopened)
    arrived = [
        _severity_of(alert)
        for alert in payload.alerts
        if _apply(session, writes, incident, alert, known, now, actor, result)
    ]
    _raise_severity(writes, incident, arrived, now, actor)
    if payload.truncated_alerts and payload.truncated_alerts != incident.truncated_alerts:
        incident.truncated_alerts = payload.truncated_alerts
        writes.entry(
            incident,
            at=now,
            actor=actor,
            type="incident.alerts_truncated",
            summary=f"Alertmanager left out {payload.truncated_alerts} alerts of this group "
            "(max_alerts); the full list is in its /api/v2/alerts",
            data={"truncated_alerts": payload.truncated_alerts},
        )
    writes.flush_alerts(session, now)
    if result.resolved_alerts or (opened and not any(a.firing for a in payload.alerts)):
        result.resolved = _settle(session, writes, incident, now)
    elif result.new or result.refired:
        incident.alerts_cleared_at = None
    writes.flush_log(session)
    incident.updated_at = now
    return result


def _known_instances(
    session: Session, alerts: list[WebhookAlert]
) -> dict[tuple[str, datetime], _Known]:
    keys = list({(a.fingerprint, a.starts_at) for a in alerts})
    table = ALERTS.c
    stmt = select(
        table.id,
        table.fingerprint,
        table.starts_at,
        table.status,
        table.incident_number,
        table.annotations,
        table.ends_at,
    ).where(tuple_(table.fingerprint, table.starts_at).in_(keys))
    return {
        (row.fingerprint, row.starts_at): _Known(
            row.id, row.status, row.incident_number, row.annotations, row.ends_at
        )
        for row in session.execute(stmt)
    }


def _latest_of_group(session: Session, digest: str) -> Incident | None:
    """The group's active incident, else its most recent one; locked. One query serves the
    join, the reopen decision and the "follows INC-n" pointer."""
    stmt = (
        select(Incident)
        .where(Incident.group_hash == digest)
        .order_by(Incident.status.in_(ACTIVE_STATUSES).desc(), Incident.number.desc())
        .limit(1)
        .with_for_update()
    )
    return session.scalars(stmt).one_or_none()


def _reopens(incident: Incident | None, since: datetime) -> bool:
    return (
        incident is not None
        and incident.status == Status.RESOLVED
        and incident.resolved_at is not None
        and incident.resolved_at >= since
    )


def _holding(
    session: Session, known: dict[tuple[str, datetime], _Known], payload: WebhookPayload
) -> Incident | None:
    """The incident that already holds these alert instances, if joining it is right."""
    if not known:
        return None
    numbers = [row.incident_number for row in known.values()]
    number = max(set(numbers), key=numbers.count)
    incident = service.get(session, number, lock=True)
    if Status(incident.status).active:
        return incident
    # A finished incident takes repeats and resolutions of its own alerts, but a new or
    # re-firing alert must not be buried in it.
    return None if _fresh_firing(payload, known) else incident


def _fresh_firing(payload: WebhookPayload, known: dict[tuple[str, datetime], _Known]) -> bool:
    """True when the notification carries an alert that is newly firing (not a repeat)."""
    for alert in payload.alerts:
        row = known.get((alert.fingerprint, alert.starts_at))
        if alert.firing and (row is None or row.status != "firing"):
            return True
    return False


def _regroup(
    writes: _Writes,
    incident: Incident,
    payload: WebhookPayload,
    digest: str,
    now: datetime,
    actor: log.Actor,
) -> None:
    old = incident.group_key
    incident.group_key, incident.group_hash = payload.group_key, digest
    incident.group_labels = dict(payload.group_labels)
    writes.entry(
        incident,
        at=now,
        actor=actor,
        type="incident.regrouped",
        summary=f"Alertmanager now groups these alerts as {payload.group_key}",
        data={"from": old, "to": payload.group_key},
    )


def _severity_of(alert: WebhookAlert) -> Severity:
    return Severity.from_label(alert.labels.get("severity")) or Severity.WARNING


def _title(payload: WebhookPayload) -> str:
    first = payload.alerts[0]
    summary = (
        payload.common_annotations.get("summary")
        or first.annotations.get("summary")
        or payload.common_annotations.get("description")
    )
    if summary:
        return summary[:500]
    name = payload.common_labels.get("alertname") or first.alertname or "alert"
    extra = [v for k, v in sorted(payload.group_labels.items()) if k != "alertname"]
    return " ".join([name, *extra])[:500]


def _open(
    session: Session,
    writes: _Writes,
    payload: WebhookPayload,
    digest: str,
    now: datetime,
    actor: log.Actor,
    previous: int | None,
) -> Incident:
    severity = max((_severity_of(a) for a in payload.alerts), key=lambda s: s.rank)
    incident = Incident(
        title=_title(payload),
        severity=severity,
        status=Status.OPEN,
        group_key=payload.group_key,
        group_hash=digest,
        receiver=payload.receiver,
        group_labels=dict(payload.group_labels),
        common_labels=dict(payload.common_labels),
        external_url=payload.external_url,
        truncated_alerts=0,
        reopen_count=0,
        opened_at=now,
        updated_at=now,
        log_seq=0,
        log_head=GENESIS,
    )
    session.add(incident)
    session.flush()  # assigns the number
    unknown = sorted(
        {a.labels["severity"] for a in payload.alerts if "severity" in a.labels}
        - {s.value for s in Severity}
    )
    data: dict[str, object] = {
        "group_key": payload.group_key,
        "group_labels": payload.group_labels,
        "receiver": payload.receiver,
        "severity": severity.value,
    }
    if previous is not None:
        data["follows"] = f"INC-{previous}"
    if unknown:
        data["unknown_severities"] = unknown
    writes.entry(
        incident,
        at=now,
        actor=actor,
        type="incident.opened",
        summary=f"{incident.ref} opened ({severity.value}): {incident.title}"
        + (f"; severity label {', '.join(unknown)} read as warning" if unknown else ""),
        data=data,
    )
    return incident


def _describe(alert: WebhookAlert) -> str:
    summary = alert.annotations.get("summary")
    return summary or alert.alertname or alert.fingerprint


def _apply(
    session: Session,
    writes: _Writes,
    incident: Incident,
    alert: WebhookAlert,
    known: dict[tuple[str, datetime], _Known],
    now: datetime,
    actor: log.Actor,
    result: IngestResult,
) -> bool:
    """Stage the insert or update of one alert instance; True when it is new."""
    key = (alert.fingerprint, alert.starts_at)
    row = known.get(key)
    if row is None:
        staged: dict[str, object] = {
            "incident_number": incident.number,
            "fingerprint": alert.fingerprint,
            "starts_at": alert.starts_at,
            "status": alert.status,
            "alertname": alert.alertname[:200],
            "severity": _severity_of(alert).value,
            "labels": dict(alert.labels),
            "annotations": dict(alert.annotations),
            "generator_url": alert.generator_url,
            "ends_at": alert.ends_at,
            "first_received_at": now,
            "last_received_at": now,
            "receive_count": 1,
        }
        writes.alerts.append(staged)
        known[key] = _Known(
            None, alert.status, incident.number, dict(alert.annotations), alert.ends_at, staged
        )
        result.new += 1
        _log_alert(writes, incident, alert, now, actor, first=True)
        if not alert.firing:
            result.resolved_alerts += 1
        return True

    changed_status = row.status != alert.status
    if row.annotations != alert.annotations or changed_status:
        row.annotations = dict(alert.annotations)
        row.status, row.ends_at = alert.status, alert.ends_at
        _stage_update(writes, row, now, changed=True)
    else:
        _stage_update(writes, row, now, changed=False)
    if not changed_status:
        result.repeats += 1
        return False
    owner = (
        incident
        if row.incident_number == incident.number
        else service.get(session, row.incident_number, lock=True)
    )
    _log_alert(writes, owner, alert, now, actor, first=False)
    if alert.firing:
        result.refired += 1
    else:
        result.resolved_alerts += 1
    return False


def _stage_update(writes: _Writes, row: _Known, now: datetime, *, changed: bool) -> None:
    if row.staged is not None:  # the same instance twice in one notification
        row.staged.update(status=row.status, ends_at=row.ends_at, annotations=row.annotations)
        row.staged["receive_count"] = cast(int, row.staged["receive_count"]) + 1
    elif changed:
        writes.changes.append(row)
    else:
        writes.bumps.append(cast(int, row.id))


def _log_alert(
    writes: _Writes,
    incident: Incident,
    alert: WebhookAlert,
    now: datetime,
    actor: log.Actor,
    *,
    first: bool,
) -> None:
    if alert.firing:
        kind, verb = "alert.firing", "firing" if first else "firing again"
    else:
        kind, verb = "alert.resolved", "resolved" + (" (first seen resolved)" if first else "")
    writes.entry(
        incident,
        at=now,
        actor=actor,
        type=kind,
        summary=f"{alert.alertname or 'alert'} {verb}: {_describe(alert)}",
        data={
            "fingerprint": alert.fingerprint,
            "starts_at": alert.starts_at.isoformat(),
            "ends_at": alert.ends_at.isoformat() if alert.ends_at else None,
            "labels": alert.labels,
        },
    )


def _raise_severity(
    writes: _Writes,
    incident: Incident,
    arrived: list[Severity],
    now: datetime,
    actor: log.Actor,
) -> None:
    """Only alerts new to the incident can raise it; earlier ones were counted already."""
    current = Severity(incident.severity)
    highest = max(arrived, key=lambda s: s.rank, default=current)
    if highest.rank <= current.rank:
        return
    incident.severity = highest
    writes.entry(
        incident,
        at=now,
        actor=actor,
        type="incident.severity_raised",
        summary=f"severity raised from {current.value} to {highest.value}",
        data={"from": current.value, "to": highest.value},
    )


def _settle(session: Session, writes: _Writes, incident: Incident, now: datetime) -> bool:
    """After alerts resolved: resolve warning/info incidents; critical ones wait for a human."""
    if not Status(incident.status).active:
        return False
    firing = session.connection().scalar(
        select(func.count())
        .select_from(Alert)
        .where(Alert.incident_number == incident.number, Alert.status == "firing")
    )
    if firing:
        return False
    if incident.severity == Severity.CRITICAL:
        if incident.alerts_cleared_at is None:
            incident.alerts_cleared_at = now
            writes.entry(
                incident,
                at=now,
                actor=log.SYSTEM,
                type="incident.alerts_cleared",
                summary="all alerts cleared; a critical incident stays open until a human "
                "resolves it with an owner and a disposition",
            )
        return False
    incident.status = Status.RESOLVED
    incident.resolved_at, incident.resolved_by = now, log.SYSTEM.id
    writes.entry(
        incident,
        at=now,
        actor=log.SYSTEM,
        type="incident.resolved",
        summary=f"{incident.ref} resolved itself: all its alerts cleared",
        data={"by": "alerts"},
    )
    return True

"""Rows one notification changes, staged in memory and written in a few statements.

The ORM's unit of work cost more than the whole rest of ingest at webhook rates, so
alert and log rows go out as one multi-row INSERT each, every repeated alert is bumped by
one UPDATE and every status change by one executemany, all through the session's
connection so the incident row itself is written once, at commit.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import cast

from sqlalchemy import Table, bindparam, insert, select, tuple_, update
from sqlalchemy.orm import Session

from bot.alerts.payload import WebhookAlert
from bot.incidents import log
from bot.incidents.models import Alert, Incident, LogEntry

ALERTS = cast(Table, Alert.__table__)
LOG = cast(Table, LogEntry.__table__)

Key = tuple[str, datetime]
"""An alert instance: (fingerprint, startsAt)."""


@dataclass
class Known:
    """What ingest needs of a stored (or just staged) alert instance."""

    id: int | None
    status: str
    incident_number: int
    annotations: dict[str, str]
    ends_at: datetime | None
    staged: dict[str, object] | None = None  # the pending INSERT row of a new instance


@dataclass
class Writes:
    """Rows staged during one notification, written by `flush_alerts` and `flush_log`."""

    alerts: list[dict[str, object]] = field(default_factory=list)
    bumps: list[int] = field(default_factory=list)
    changes: list[Known] = field(default_factory=list)
    log: list[dict[str, object]] = field(default_factory=list)
    key: bytes | None = None
    """The log key (`bot.incidents.log.key_of`)."""

    def entry(self, incident: Incident, **fields: object) -> None:
        self.log.append(log.next_entry(incident, key=self.key, **fields))  # type: ignore[arg-type]

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


def known_instances(session: Session, alerts: list[WebhookAlert]) -> dict[Key, Known]:
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
        (row.fingerprint, row.starts_at): Known(
            row.id, row.status, row.incident_number, row.annotations, row.ends_at
        )
        for row in session.execute(stmt)
    }


def stage_update(writes: Writes, row: Known, now: datetime, *, changed: bool) -> None:
    if row.staged is not None:  # the same instance twice in one notification
        row.staged.update(status=row.status, ends_at=row.ends_at, annotations=row.annotations)
        row.staged["receive_count"] = cast(int, row.staged["receive_count"]) + 1
    elif changed:
        writes.changes.append(row)
    else:
        writes.bumps.append(cast(int, row.id))

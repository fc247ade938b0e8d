"""Rows one notification changes, staged in memory and written in a few statements.

The ORM's unit of work cost more than the whole rest of ingest at webhook rates, so
alert and log rows go out as one multi-row INSERT each, every repeated alert is bumped by
one UPDATE and every status change by one executemany, all through the session's
connection so the incident row itself is written once, at commit.

On PostgreSQL the alert statements take their rows as arrays (`unnest`), so a group of
1,000 alerts is one INSERT, one UPDATE and one SELECT whose text never changes: no
per-row round trip in the pipeline and nothing for the driver to re-parse. SQLite takes
them as executemany.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from enum import Enum
from typing import Any, cast

from sqlalchemy import Table, bindparam, insert, select, tuple_, update
from sqlalchemy.orm import Session

from bot.alerts.payload import WebhookAlert
from bot.clock import as_utc
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


ONE_BY_ONE = 10
"""A notification changing at most this many alerts logs one entry per alert."""
PER_ENTRY = 100
"""Above that, alerts of one incident, kind and alertname share entries of this many."""
SHOWN = 3
"""Alerts a shared entry's summary describes; the rest are counted."""


@dataclass(slots=True)
class AlertEvent:
    """One alert that fired or resolved, waiting to be logged (`Writes.alert`)."""

    incident: Incident
    at: datetime
    actor: log.Actor
    type: str
    verb: str
    alertname: str
    described: str
    data: dict[str, Any]


@dataclass
class Writes:
    """Rows staged during one notification, written by `flush_alerts` and `flush_log`."""

    alerts: list[dict[str, object]] = field(default_factory=list)
    bumps: list[int] = field(default_factory=list)
    changes: list[Known] = field(default_factory=list)
    log: list[dict[str, object]] = field(default_factory=list)
    key: bytes | None = None
    """The log key (`bot.incidents.log.key_of`)."""
    events: list[AlertEvent] = field(default_factory=list)
    """Alerts to log, held until the next other entry or the flush (`_log_events`)."""

    def entry(self, incident: Incident, **fields: object) -> None:
        self._log_events()
        self._entry(incident, **fields)

    def _entry(self, incident: Incident, **fields: object) -> None:
        self.log.append(log.next_entry(incident, key=self.key, **fields))  # type: ignore[arg-type]

    def alert(self, event: AlertEvent) -> None:
        """Log that an alert fired or resolved: at the latest before the next entry."""
        self.events.append(event)

    def _log_events(self) -> None:
        """Every held alert into the log, in the order they came. A few alerts get an
        entry each (data: fingerprint, starts_at, ends_at, labels); a storm's group of
        1,000 gets one entry per `PER_ENTRY` alerts of one incident, kind and alertname,
        whose data lists each of them (`_shared`: count, labels, alerts), so the log still
        names every alert while its chain grows by tens of entries, not thousands."""
        events, self.events = self.events, []
        if len(events) <= ONE_BY_ONE:
            for one in events:
                self._single(one)
            return
        buckets: dict[tuple[int, str, str, str], list[AlertEvent]] = {}
        for one in events:
            key = (one.incident.number, one.type, one.verb, one.alertname)
            buckets.setdefault(key, []).append(one)
        for bucket in buckets.values():
            if len(bucket) == 1:
                self._single(bucket[0])
                continue
            for start in range(0, len(bucket), PER_ENTRY):
                self._shared(bucket[start : start + PER_ENTRY])

    def _single(self, one: AlertEvent) -> None:
        self._entry(
            one.incident,
            at=one.at,
            actor=one.actor,
            type=one.type,
            summary=f"{one.alertname or 'alert'} {one.verb}: {one.described}",
            data=one.data,
        )

    def _shared(self, events: list[AlertEvent]) -> None:
        """One entry for many alerts: the labels they all share once (`labels`), and each
        alert with only its own (an alert's labels are `labels` | its `labels`)."""
        first, count = events[0], len(events)
        shown = "; ".join(one.described[:200] for one in events[:SHOWN])
        more = f" and {count - SHOWN} more" if count > SHOWN else ""
        common = dict(first.data["labels"])
        for one in events[1:]:
            labels = one.data["labels"]
            common = {k: v for k, v in common.items() if labels.get(k) == v}
        alerts = [
            {**one.data, "labels": {k: v for k, v in one.data["labels"].items() if k not in common}}
            for one in events
        ]
        self._entry(
            first.incident,
            at=first.at,
            actor=first.actor,
            type=first.type,
            summary=f"{first.alertname or 'alert'} {first.verb}: {count} alerts: {shown}{more}",
            data={"count": count, "labels": common, "alerts": alerts},
        )

    def flush_alerts(self, session: Session, now: datetime) -> None:
        if session.get_bind().dialect.name == "postgresql":
            _flush_postgres(session, self, now)
            self.alerts, self.bumps, self.changes = [], [], []
            return
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
        self._log_events()
        if self.log:
            session.connection().execute(insert(LOG), self.log)
        self.log = []


_COLUMNS = (
    ("incident_number", "bigint"),
    ("fingerprint", "text"),
    ("starts_at", "timestamptz"),
    ("status", "text"),
    ("alertname", "text"),
    ("severity", "text"),
    ("labels", "jsonb"),
    ("annotations", "jsonb"),
    ("generator_url", "text"),
    ("ends_at", "timestamptz"),
    ("first_received_at", "timestamptz"),
    ("last_received_at", "timestamptz"),
    ("receive_count", "integer"),
    ("symptom", "text"),
)
_JSON = frozenset(name for name, kind in _COLUMNS if kind == "jsonb")
# jsonb travels as text[] (one JSON document per row) and is cast row by row; every
# parameter is sent in binary (%(name)b): text arrays need no escaping.
_INSERT = (
    f"INSERT INTO alerts ({', '.join(name for name, _ in _COLUMNS)}) SELECT "
    + ", ".join(f"{name}::jsonb" if name in _JSON else name for name, _ in _COLUMNS)
    + " FROM unnest("
    + ", ".join(f"%({name})b::{'text' if name in _JSON else kind}[]" for name, kind in _COLUMNS)
    + f") AS rows ({', '.join(name for name, _ in _COLUMNS)})"
)
_BUMP = """UPDATE alerts SET last_received_at = %(now)b, receive_count = receive_count + 1
WHERE id = ANY(%(ids)b::bigint[])"""
_CHANGE = """UPDATE alerts SET status = rows.status, ends_at = rows.ends_at,
    annotations = rows.annotations::jsonb, last_received_at = %(now)b,
    receive_count = alerts.receive_count + 1
FROM unnest(%(ids)b::bigint[], %(statuses)b::text[], %(ends)b::timestamptz[],
    %(annotations)b::text[]) AS rows (id, status, ends_at, annotations)
WHERE alerts.id = rows.id"""
_KNOWN = """SELECT alerts.id, alerts.fingerprint, alerts.starts_at, alerts.status,
    alerts.incident_number, alerts.annotations, alerts.ends_at
FROM alerts JOIN unnest(%(fingerprints)b::text[], %(starts)b::timestamptz[])
    AS keys (fingerprint, starts_at)
    ON alerts.fingerprint = keys.fingerprint AND alerts.starts_at = keys.starts_at"""


_ENUMS = frozenset({"status", "severity"})
"""Columns staged as enums (`StrEnum`): sent as their values."""


def _text(value: object) -> object:
    """A column value as the driver should send it: enums as their value."""
    return value.value if isinstance(value, Enum) else value


def _json(value: object) -> str:
    return json.dumps(value, ensure_ascii=False)


def _column(rows: list[dict[str, object]], name: str) -> list[Any]:
    if name in _JSON:
        return [_json(row[name]) for row in rows]
    if name in _ENUMS:
        return [_text(row[name]) for row in rows]
    return [row[name] for row in rows]


def _flush_postgres(session: Session, writes: Writes, now: datetime) -> None:
    conn = session.connection()
    if writes.alerts:
        columns = {name: _column(writes.alerts, name) for name, _ in _COLUMNS}
        conn.exec_driver_sql(_INSERT, columns)
    if writes.bumps:
        conn.exec_driver_sql(_BUMP, {"now": now, "ids": writes.bumps})
    if writes.changes:
        # One row per instance: the same instance twice in one notification keeps the last.
        last = {cast(int, row.id): row for row in writes.changes}
        conn.exec_driver_sql(
            _CHANGE,
            {
                "now": now,
                "ids": list(last),
                "statuses": [_text(row.status) for row in last.values()],
                "ends": [row.ends_at for row in last.values()],
                "annotations": [_json(row.annotations) for row in last.values()],
            },
        )


def known_instances(session: Session, alerts: list[WebhookAlert]) -> dict[Key, Known]:
    keys = list({(a.fingerprint, a.starts_at) for a in alerts})
    if session.get_bind().dialect.name == "postgresql":
        params = {"fingerprints": [k[0] for k in keys], "starts": [k[1] for k in keys]}
        rows = session.connection().exec_driver_sql(_KNOWN, params)
        return {
            (row.fingerprint, as_utc(row.starts_at)): Known(
                row.id,
                row.status,
                row.incident_number,
                row.annotations,
                None if row.ends_at is None else as_utc(row.ends_at),
            )
            for row in rows
        }
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

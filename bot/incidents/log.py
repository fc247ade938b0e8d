"""The incident log: the one function through which everything that happens is recorded.

Entries are append-only (database triggers refuse UPDATE and DELETE) and hash-chained:
each stores the SHA-256 of its own canonical form, which includes the previous entry's
hash, so editing, deleting or reordering any entry breaks verification from that entry on.
The chain head lives on the incident row; callers hold that row (locked on PostgreSQL)
while appending, which serializes appends per incident and nowhere else.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from sqlalchemy import select
from sqlalchemy.orm import Session

from bot.clock import as_utc
from bot.incidents.models import GENESIS, Incident, LogEntry

ActorKind = Literal["alertmanager", "human", "bot", "system"]


@dataclass(frozen=True)
class Actor:
    """Who did something: an Alertmanager receiver, a person, the bot, or the system."""

    kind: ActorKind
    id: str
    name: str

    @classmethod
    def human(cls, user: str, name: str | None = None) -> Actor:
        return cls("human", user, name or user)

    @classmethod
    def alertmanager(cls, receiver: str) -> Actor:
        return cls("alertmanager", receiver, f"Alertmanager ({receiver})")


SYSTEM = Actor("system", "runbook-bot", "runbook-bot")


def next_entry(
    incident: Incident,
    *,
    at: datetime,
    actor: Actor,
    type: str,
    summary: str,
    data: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The column values of `incident`'s next entry, chained; advances the incident's head.

    For bulk writers (ingest) that insert many entries in one statement; everyone else
    uses `append`.
    """
    fields: dict[str, Any] = {
        "incident_number": incident.number,
        "seq": incident.log_seq + 1,
        "at": as_utc(at),
        "actor_kind": actor.kind,
        "actor_id": actor.id,
        "actor_name": actor.name,
        "type": type,
        "summary": summary,
        # Round-trip through JSON now so the hashed form is the stored form on every backend.
        "data": json.loads(json.dumps(data or {}, default=str, ensure_ascii=False)),
        "prev_hash": incident.log_head,
    }
    fields["hash"] = _hash(fields)
    incident.log_seq = fields["seq"]
    incident.log_head = fields["hash"]
    return fields


def append(
    session: Session,
    incident: Incident,
    *,
    at: datetime,
    actor: Actor,
    type: str,
    summary: str,
    data: dict[str, Any] | None = None,
) -> LogEntry:
    """Record one event on `incident`; the caller commits with its other changes."""
    entry = LogEntry(
        **next_entry(incident, at=at, actor=actor, type=type, summary=summary, data=data)
    )
    session.add(entry)
    return entry


_HASHED = (
    "incident_number",
    "seq",
    "at",
    "actor_kind",
    "actor_id",
    "actor_name",
    "type",
    "summary",
    "data",
    "prev_hash",
)


def entry_hash(entry: LogEntry) -> str:
    return _hash({name: getattr(entry, name) for name in _HASHED})


def _hash(fields: dict[str, Any]) -> str:
    canonical = {
        "incident": fields["incident_number"],
        "seq": fields["seq"],
        "at": as_utc(fields["at"]).isoformat(timespec="microseconds"),
        "actor": [fields["actor_kind"], fields["actor_id"], fields["actor_name"]],
        "type": fields["type"],
        "summary": fields["summary"],
        "data": fields["data"],
        "prev": fields["prev_hash"],
    }
    text = json.dumps(canonical, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


def entries(session: Session, number: int) -> list[LogEntry]:
    stmt = select(LogEntry).where(LogEntry.incident_number == number).order_by(LogEntry.seq)
    return list(session.scalars(stmt))


@dataclass(frozen=True)
class Broken:
    """The first place an incident's log fails to verify."""

    incident: int
    seq: int
    reason: str

    def __str__(self) -> str:
        return f"INC-{self.incident} log entry #{self.seq}: {self.reason}"


def verify(incident: Incident, log: Iterable[LogEntry]) -> Broken | None:
    """Check one incident's chain; return the first broken entry, or None when it verifies."""
    prev, expected_seq = GENESIS, 1
    for entry in log:
        if entry.seq != expected_seq:
            return Broken(incident.number, expected_seq, "missing (entries deleted)")
        if entry.prev_hash != prev:
            return Broken(incident.number, entry.seq, "does not link to the entry before it")
        if entry_hash(entry) != entry.hash:
            return Broken(incident.number, entry.seq, "content was changed after it was written")
        prev, expected_seq = entry.hash, expected_seq + 1
    if expected_seq - 1 != incident.log_seq or prev != incident.log_head:
        return Broken(
            incident.number,
            expected_seq,
            f"missing: the incident records {incident.log_seq} entries ending in "
            f"{incident.log_head[:12]}, the log holds {expected_seq - 1}",
        )
    return None

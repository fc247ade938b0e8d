"""The incident log: the one function through which everything that happens is recorded.

Entries are append-only (database triggers refuse UPDATE and DELETE, and the runtime
database role may only INSERT and SELECT them) and hash-chained: each stores the hash of
its own canonical form, which includes the previous entry's hash, so editing, deleting or
reordering any entry breaks verification from that entry on. The chain head lives on the
incident row; callers hold that row (locked on PostgreSQL) while appending, which
serializes appends per incident and nowhere else.

With the log key (`log_key_file`, which the database never holds) each new entry's hash is
an HMAC-SHA256 under it (`keyed`), and the incident row carries the MAC of its head
(`log_mac`: number, sequence, head hash), so anyone with database access alone can neither
edit, forge, drop the newest entries and move the head back, nor append an entry of their
own. Entries written before the key was set stay plain SHA-256 links and verify as such;
`seal` covers their heads when the key arrives. The key reaches appends through the
session (`Database(log_key=...)` puts it in `session.info`); it is never logged.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from sqlalchemy import select
from sqlalchemy.orm import Session

from bot.clock import as_utc
from bot.incidents.models import GENESIS, Incident, LogEntry
from bot.people import Decider

ActorKind = Literal["alertmanager", "human", "bot", "system"]


@dataclass(frozen=True)
class Actor:
    """Who did something: an Alertmanager receiver, a person, the bot, or the system. A
    person deciding also says through which channel and identity (`deciding`): entries
    they write carry `data["by"]` = {person, channel, via}."""

    kind: ActorKind
    id: str
    name: str
    channel: str | None = None
    via: str | None = None

    @classmethod
    def human(cls, user: str, name: str | None = None) -> Actor:
        return cls("human", user, name or user)

    @classmethod
    def deciding(cls, who: Decider) -> Actor:
        return cls("human", who.person.id, who.person.name, who.channel, who.via)

    def stamped(self, data: dict[str, Any] | None) -> dict[str, Any]:
        """`data` with who decided and how, when the actor says so."""
        if self.channel is None:
            return data or {}
        return {**(data or {}), "by": {"person": self.id, "channel": self.channel, "via": self.via}}

    @classmethod
    def alertmanager(cls, receiver: str) -> Actor:
        return cls("alertmanager", receiver, f"Alertmanager ({receiver})")


SYSTEM = Actor("system", "runbook-bot", "runbook-bot")

KEY_INFO = "log_key"
"""Where a session carries the log key (`Session.info`), set by `bot.db.Database`."""


def key_of(session: Session) -> bytes | None:
    """The log key the session's database was opened with; None without one."""
    key = session.info.get(KEY_INFO)
    return key if isinstance(key, bytes) else None


def next_entry(
    incident: Incident,
    *,
    key: bytes | None,
    at: datetime,
    actor: Actor,
    type: str,
    summary: str,
    data: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The column values of `incident`'s next entry, chained (an HMAC under `key` when
    there is one); advances the incident's head and its MAC.

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
        "data": json.loads(json.dumps(actor.stamped(data), default=str, ensure_ascii=False)),
        "prev_hash": incident.log_head,
    }
    fields["keyed"] = key is not None
    fields["hash"] = _hash(fields, key)
    incident.log_seq = fields["seq"]
    incident.log_head = fields["hash"]
    # Without the key the head cannot be covered: a stale MAC would only look like
    # tampering, and a missing one after keyed entries says the key went away.
    incident.log_mac = head_mac(incident, key) if key is not None else None
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
    fields = next_entry(
        incident, key=key_of(session), at=at, actor=actor, type=type, summary=summary, data=data
    )
    entry = LogEntry(**fields)
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


def entry_hash(entry: LogEntry, key: bytes | None = None) -> str:
    """The entry's hash recomputed: an HMAC under `key` when given, else plain SHA-256."""
    return _hash({name: getattr(entry, name) for name in _HASHED}, key)


def head_mac(incident: Incident, key: bytes) -> str:
    """The MAC of the incident's head: which entry is the newest, and its hash."""
    text = f"runbook-bot log head\n{incident.number}\n{incident.log_seq}\n{incident.log_head}"
    return hmac.new(key, text.encode(), hashlib.sha256).hexdigest()


def _hash(fields: dict[str, Any], key: bytes | None) -> str:
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
    if key is None:
        return hashlib.sha256(text.encode()).hexdigest()
    return hmac.new(key, text.encode(), hashlib.sha256).hexdigest()


def entries(session: Session, number: int) -> list[LogEntry]:
    stmt = select(LogEntry).where(LogEntry.incident_number == number).order_by(LogEntry.seq)
    return list(session.scalars(stmt))


def seal(session: Session, key: bytes) -> int:
    """Cover the head of every incident that has no MAC yet (its log was written before
    the key was set) with one under `key`; how many. Idempotent: the MAC of one head is
    always the same. Run with the key's arrival (the worker does at start); from then on,
    an entry appended around the bot breaks the incident's head."""
    stmt = select(Incident).where(Incident.log_mac.is_(None)).with_for_update()
    sealed = 0
    for incident in session.scalars(stmt):
        incident.log_mac = head_mac(incident, key)
        sealed += 1
    return sealed


@dataclass(frozen=True)
class Broken:
    """The first place an incident's log fails to verify."""

    incident: int
    seq: int
    reason: str

    def __str__(self) -> str:
        return f"INC-{self.incident} log entry #{self.seq}: {self.reason}"


def keyed_from(log: Iterable[LogEntry]) -> int | None:
    """The first entry whose hash is an HMAC (None: a plain chain throughout)."""
    return next((entry.seq for entry in log if entry.keyed), None)


def verify(incident: Incident, log: Iterable[LogEntry], key: bytes | None = None) -> Broken | None:
    """Check one incident's chain; return the first broken entry, or None when it verifies.

    Plain entries verify as SHA-256 links. Keyed entries verify as HMACs under `key`;
    without it only their links and order are checked (say so to the user: `keyed_from`).
    Once an entry is keyed every later one must be, and with `key` the incident's head
    must carry its MAC (`seal` gives one to logs written before the key): a plain entry
    after keyed ones, or a head that lost or does not match its MAC, is a forgery, a
    rewrite or a truncation by someone without the key."""
    prev, expected_seq, keyed = GENESIS, 1, False
    for entry in log:
        if entry.seq != expected_seq:
            return Broken(incident.number, expected_seq, "missing (entries deleted)")
        if entry.prev_hash != prev:
            return Broken(incident.number, entry.seq, "does not link to the entry before it")
        if keyed and not entry.keyed:
            return Broken(
                incident.number,
                entry.seq,
                "a plain SHA-256 entry after HMAC entries: written around the bot, without "
                "the log key (forged or rewritten)",
            )
        keyed = keyed or entry.keyed
        if entry.keyed and key is None:
            pass  # its MAC needs the key; link and order were checked
        elif not hmac.compare_digest(entry_hash(entry, key if entry.keyed else None), entry.hash):
            return Broken(incident.number, entry.seq, "content was changed after it was written")
        prev, expected_seq = entry.hash, expected_seq + 1
    if expected_seq - 1 != incident.log_seq or prev != incident.log_head:
        return Broken(
            incident.number,
            expected_seq,
            f"missing: the incident records {incident.log_seq} entries ending in "
            f"{incident.log_head[:12]}, the log holds {expected_seq - 1}",
        )
    if key is not None:
        newest = max(incident.log_seq, 1)
        if incident.log_mac is None:
            return Broken(
                incident.number,
                newest,
                "the incident's head carries no MAC: it was rewritten without the log key, "
                "or written while no key was set and never sealed (the worker seals every "
                "head when it starts with log_key_file)",
            )
        if not hmac.compare_digest(head_mac(incident, key), incident.log_mac):
            return Broken(
                incident.number,
                newest,
                f"the incident's head (entry #{incident.log_seq}) does not match its MAC: "
                "newest entries were dropped or added without the log key",
            )
    return None

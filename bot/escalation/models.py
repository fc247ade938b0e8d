"""ORM classes of the escalation room: where each incident stands on its ladder, the timers,
the pages to deliver, on-call overrides and hand-overs, and the workers' heartbeats.

An incident has at most one pending timer (a partial unique index): the ladder is a
sequence, so arming the next deadline always replaces the last one, and cancelling is one
UPDATE. Timers and pages are rows first: a worker that dies loses nothing, another one
claims them (`FOR UPDATE SKIP LOCKED` on PostgreSQL).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import BigInteger, ForeignKey, Index, Integer, String, Text, text
from sqlalchemy.orm import Mapped, mapped_column

from bot.db import Base

_ID = BigInteger().with_variant(Integer, "sqlite")
PENDING = "state = 'pending'"
OPEN_PAGES = "state IN ('pending', 'sending')"


class IncidentEscalation(Base):
    """One incident's escalation: the policy frozen when it opened and how far it went."""

    __tablename__ = "incident_escalations"

    incident_number: Mapped[int] = mapped_column(ForeignKey("incidents.number"), primary_key=True)
    policy: Mapped[dict[str, Any]]
    """`EscalationSettings.frozen()` as it was when the incident opened."""
    severity: Mapped[str] = mapped_column(String(16))
    """The severity whose ladder it is on (a raised severity starts its own)."""
    round: Mapped[int] = mapped_column(Integer, default=0)
    level: Mapped[int] = mapped_column(Integer, default=-1)
    """The last level paged in `round`; -1 before the first page."""
    paged_at: Mapped[datetime | None]
    silenced_until: Mapped[datetime | None]
    updated_at: Mapped[datetime]


class EscalationTimer(Base):
    """A deadline: when it comes and nothing cancelled it, the worker pages."""

    __tablename__ = "escalation_timers"
    __table_args__ = (
        Index(
            "ix_escalation_timers_due",
            "due_at",
            postgresql_where=text(PENDING),
            sqlite_where=text(PENDING),
        ),  # fmt: skip
        Index(
            "uq_escalation_timers_pending",
            "incident_number",
            unique=True,
            postgresql_where=text(PENDING),
            sqlite_where=text(PENDING),
        ),  # fmt: skip
    )

    id: Mapped[int] = mapped_column(_ID, primary_key=True, autoincrement=True)
    incident_number: Mapped[int] = mapped_column(ForeignKey("incidents.number"), index=True)
    kind: Mapped[str] = mapped_column(String(16))
    """`level` (page the next level), `ack` (an acknowledgement went stale), `resume` (a
    silence ends)."""
    round: Mapped[int] = mapped_column(Integer, default=0)
    level: Mapped[int] = mapped_column(Integer, default=0)
    due_at: Mapped[datetime]
    state: Mapped[str] = mapped_column(String(16), default="pending")
    """`pending`, `fired`, `cancelled`."""
    created_at: Mapped[datetime]
    fired_at: Mapped[datetime | None]
    fired_by: Mapped[str | None] = mapped_column(String(200))
    cancelled_at: Mapped[datetime | None]
    note: Mapped[str] = mapped_column(Text, default="")


class PageDelivery(Base):
    """One page (or its acknowledge / resolve follow-up) to one configured target."""

    __tablename__ = "page_deliveries"
    __table_args__ = (
        Index(
            "ix_page_deliveries_open",
            "due_at",
            postgresql_where=text(OPEN_PAGES),
            sqlite_where=text(OPEN_PAGES),
        ),  # fmt: skip
    )

    id: Mapped[int] = mapped_column(_ID, primary_key=True, autoincrement=True)
    incident_number: Mapped[int] = mapped_column(ForeignKey("incidents.number"), index=True)
    timer_id: Mapped[int | None] = mapped_column(ForeignKey("escalation_timers.id"))
    target: Mapped[str] = mapped_column(String(100))
    event: Mapped[str] = mapped_column(String(16))
    """`trigger`, `acknowledge`, `resolve`."""
    level: Mapped[int] = mapped_column(Integer, default=0)
    text: Mapped[str] = mapped_column(Text, default="")
    state: Mapped[str] = mapped_column(String(16), default="pending")
    """`pending`, `sending` (under a lease), `delivered`, `failed`."""
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    due_at: Mapped[datetime]
    lease_owner: Mapped[str | None] = mapped_column(String(200))
    lease_until: Mapped[datetime | None]
    created_at: Mapped[datetime]
    finished_at: Mapped[datetime | None]
    detail: Mapped[str] = mapped_column(Text, default="")


class OncallOverride(Base):
    """Someone took the pager from the rotation (`/incident oncall @user`) for a while."""

    __tablename__ = "oncall_overrides"

    id: Mapped[int] = mapped_column(_ID, primary_key=True, autoincrement=True)
    person: Mapped[str] = mapped_column(String(200))
    starts_at: Mapped[datetime] = mapped_column(index=True)
    ends_at: Mapped[datetime]
    set_by: Mapped[str] = mapped_column(String(200))
    set_at: Mapped[datetime]


class OncallHandover(Base):
    """A hand-over that happened: its summary was sent once, by whichever worker took it."""

    __tablename__ = "oncall_handovers"

    at: Mapped[datetime] = mapped_column(primary_key=True)
    outgoing: Mapped[str | None] = mapped_column(String(200))
    incoming: Mapped[str] = mapped_column(String(200))
    posted_at: Mapped[datetime]
    posted_by: Mapped[str] = mapped_column(String(200))
    incidents: Mapped[int] = mapped_column(Integer, default=0)


class WorkerHeartbeat(Base):
    """A worker's last sign of life (`runbook-bot workers`, `/metrics`)."""

    __tablename__ = "worker_heartbeats"

    owner: Mapped[str] = mapped_column(String(200), primary_key=True)
    started_at: Mapped[datetime]
    beat_at: Mapped[datetime]

"""ORM classes of the incidents room: Incident, Alert and the incident log."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
    false,
    text,
)
from sqlalchemy.orm import Mapped, mapped_column

from bot.db import Base, EnumText
from bot.incidents.lifecycle import AlertStatus, Severity, Status

ACTIVE_STATUSES = tuple(status for status in Status if status.active)
_ACTIVE_SQL = f"status IN ({', '.join(repr(status.value) for status in ACTIVE_STATUSES)})"
_UNANNOUNCED_SQL = "log_seq > announced_seq"
GENESIS = "0" * 64
"""The `prev_hash` of an incident's first log entry."""


NODE_SCOPE = "node"
DOMAIN_SCOPE = "domain"
"""An incident's `scope`: about one node, or about many nodes of one failure domain."""

DRILL_LABEL = "runbook_bot_drill"
"""The label `runbook-bot drill` puts on its alerts; its value is the drill's id."""


class Incident(Base):
    __tablename__ = "incidents"
    __table_args__ = (
        # At most one active incident per Alertmanager group: the database, not the code,
        # is what makes concurrent webhook posts of one group open a single incident.
        Index(
            "uq_incidents_active_group",
            "group_hash",
            unique=True,
            postgresql_where=text(_ACTIVE_SQL),
            sqlite_where=text(_ACTIVE_SQL),
        ),
        Index("ix_incidents_status_severity", "status", "severity"),
        Index("ix_incidents_correlation_key", "correlation_key"),
        # Incidents whose log has entries chat has not taken yet (`announced_seq`): the
        # chat projector's work list, as small as its backlog.
        Index(
            "ix_incidents_unannounced",
            "number",
            postgresql_where=text(_UNANNOUNCED_SQL),
            sqlite_where=text(_UNANNOUNCED_SQL),
        ),
    )

    number: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    title: Mapped[str] = mapped_column(String(500))
    severity: Mapped[Severity] = mapped_column(EnumText(Severity, 16))
    status: Mapped[Status] = mapped_column(EnumText(Status, 16))
    owner: Mapped[str | None] = mapped_column(String(200))
    disposition: Mapped[str | None] = mapped_column(Text)
    group_key: Mapped[str] = mapped_column(Text)
    group_hash: Mapped[str] = mapped_column(String(64), index=True)
    receiver: Mapped[str] = mapped_column(String(200))
    group_labels: Mapped[dict[str, Any]]
    common_labels: Mapped[dict[str, Any]]
    external_url: Mapped[str] = mapped_column(Text, default="")
    truncated_alerts: Mapped[int] = mapped_column(Integer, default=0)
    reopen_count: Mapped[int] = mapped_column(Integer, default=0)
    opened_at: Mapped[datetime]
    acknowledged_at: Mapped[datetime | None]
    acknowledged_by: Mapped[str | None] = mapped_column(String(200))
    resolved_at: Mapped[datetime | None]
    resolved_by: Mapped[str | None] = mapped_column(String(200))
    closed_at: Mapped[datetime | None]
    reopened_at: Mapped[datetime | None]
    alerts_cleared_at: Mapped[datetime | None]
    updated_at: Mapped[datetime]
    # Head of the hash chain; appends lock this row, so entries of one incident serialize
    # while different incidents never wait on each other.
    log_seq: Mapped[int] = mapped_column(Integer, default=0)
    log_head: Mapped[str] = mapped_column(String(64), default=GENESIS)
    log_mac: Mapped[str | None] = mapped_column(String(64))
    """HMAC of (number, log_seq, log_head) under the log key; None without a key."""
    announced_seq: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    """The last log entry chat surfaces have taken (card update and thread post queued)."""
    drill: Mapped[str | None] = mapped_column(String(64))
    """The drill's id when `runbook-bot drill` opened this incident (its alerts carry the
    `runbook_bot_drill` label): every step runs as a dry run, and no real alert joins it."""
    scope: Mapped[str] = mapped_column(String(16), default=NODE_SCOPE, server_default=NODE_SCOPE)
    """`node` (about one node, or none) or `domain` (many nodes of one failure domain)."""
    domain: Mapped[str | None] = mapped_column(String(300))
    """A domain incident's domain (`row/a`, `storage/nfs-01`); None for a node incident."""
    domain_size: Mapped[int | None] = mapped_column(Integer)
    """The domain's member count in the topology when the incident became the domain's
    (None for a storage domain: its size is the incident's node count)."""
    correlation_key: Mapped[str | None] = mapped_column(String(64))
    """The hash of the runbook id and the alert's group_by values (domain included), for a
    runbook that correlates; None otherwise, and for a node a person split off."""
    merged_into: Mapped[int | None] = mapped_column(Integer)
    """The incident this one was merged into (it is resolved, its alerts moved there)."""

    @property
    def ref(self) -> str:
        return f"INC-{self.number}"


class Alert(Base):
    """One alert instance: Alertmanager's fingerprint plus the time it started firing."""

    __tablename__ = "alerts"
    __table_args__ = (UniqueConstraint("fingerprint", "starts_at", name="uq_alerts_instance"),)

    id: Mapped[int] = mapped_column(
        BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True
    )
    incident_number: Mapped[int] = mapped_column(ForeignKey("incidents.number"), index=True)
    fingerprint: Mapped[str] = mapped_column(String(64))
    starts_at: Mapped[datetime]
    status: Mapped[AlertStatus] = mapped_column(EnumText(AlertStatus, 16))
    alertname: Mapped[str] = mapped_column(String(200))
    severity: Mapped[Severity] = mapped_column(EnumText(Severity, 16))
    labels: Mapped[dict[str, Any]]
    annotations: Mapped[dict[str, Any]]
    generator_url: Mapped[str] = mapped_column(Text, default="")
    ends_at: Mapped[datetime | None]
    first_received_at: Mapped[datetime]
    last_received_at: Mapped[datetime]
    receive_count: Mapped[int] = mapped_column(Integer, default=1)
    symptom: Mapped[str | None] = mapped_column(String(64))
    """The runbook this alert matched when it was attached to another runbook's (its
    cause's) incident as a symptom; None for an alert of the incident's own runbook."""


class LogEntry(Base):
    """One immutable line of an incident's log (PostgreSQL and SQLite triggers refuse edits)."""

    __tablename__ = "incident_log"
    __table_args__ = (UniqueConstraint("incident_number", "seq", name="uq_incident_log_seq"),)

    id: Mapped[int] = mapped_column(
        BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True
    )
    incident_number: Mapped[int] = mapped_column(ForeignKey("incidents.number"))
    seq: Mapped[int] = mapped_column(Integer)
    at: Mapped[datetime]
    actor_kind: Mapped[str] = mapped_column(String(16))
    actor_id: Mapped[str] = mapped_column(String(200))
    actor_name: Mapped[str] = mapped_column(String(200))
    type: Mapped[str] = mapped_column(String(64))
    summary: Mapped[str] = mapped_column(Text)
    data: Mapped[dict[str, Any]]
    prev_hash: Mapped[str] = mapped_column(String(64))
    hash: Mapped[str] = mapped_column(String(64))
    keyed: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    """`hash` is an HMAC-SHA256 under the log key (else a plain SHA-256, written before
    the key was set)."""

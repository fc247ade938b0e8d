"""ORM classes of the runbooks room: the runbook frozen onto an incident, its step runs,
and the approvals people gave them.

A step run is one attempt at one step of one incident's runbook: unique per (incident,
step, attempt), so a double click, a Slack retry or a second replica can never create a
second run of the same attempt. Its rendered parameters are stored with their hash; an
approval binds to that hash and expires, and one person approves a run at most once.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import BigInteger, ForeignKey, Index, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from bot.db import Base

_ID = BigInteger().with_variant(Integer, "sqlite")


class IncidentRunbook(Base):
    """The runbook an incident follows, frozen when it opened (DESIGN invariant 7): editing
    the YAML later never changes an open incident."""

    __tablename__ = "incident_runbooks"

    incident_number: Mapped[int] = mapped_column(ForeignKey("incidents.number"), primary_key=True)
    runbook_id: Mapped[str] = mapped_column(String(63))
    runbook_version: Mapped[int] = mapped_column(Integer)
    source: Mapped[str] = mapped_column(String(500), default="")
    document: Mapped[dict[str, Any]]
    """The whole runbook as it was (`Runbook.model_dump(by_alias=True, mode="json")`)."""
    facts: Mapped[dict[str, Any]]
    labels: Mapped[dict[str, Any]] = mapped_column(server_default="{}")
    """The matched alert's labels (over the incident's common labels), for step templates."""
    annotations: Mapped[dict[str, Any]] = mapped_column(server_default="{}")
    matched_at: Mapped[datetime]


class StepRun(Base):
    __tablename__ = "step_runs"
    __table_args__ = (
        UniqueConstraint("incident_number", "step_id", "attempt", name="uq_step_runs_attempt"),
        # What the worker claims: approved runs (once due), and running ones whose lease
        # ran out; the expiry sweep looks for awaiting runs past `expires_at`.
        Index("ix_step_runs_state_lease", "state", "lease_until"),
    )

    id: Mapped[int] = mapped_column(_ID, primary_key=True, autoincrement=True)
    incident_number: Mapped[int] = mapped_column(ForeignKey("incidents.number"), index=True)
    step_id: Mapped[str] = mapped_column(String(63))
    attempt: Mapped[int] = mapped_column(Integer, default=1)
    state: Mapped[str] = mapped_column(String(24))
    kind: Mapped[str] = mapped_column(String(8))
    """`action` or `manual`."""
    action: Mapped[str | None] = mapped_column(String(100))
    params: Mapped[dict[str, Any]]
    params_hash: Mapped[str] = mapped_column(String(64))
    approvals_required: Mapped[int] = mapped_column(Integer, default=0)
    proposed_at: Mapped[datetime]
    expires_at: Mapped[datetime | None]
    """Approvals given after this no longer count; the run expires."""
    not_before: Mapped[datetime | None]
    """An approved run is not claimed before this: a retry waits as long as the failure's
    `retry_after` said (the API was throttled, the BMC did not answer)."""
    decided_at: Mapped[datetime | None]
    started_at: Mapped[datetime | None]
    finished_at: Mapped[datetime | None]
    lease_owner: Mapped[str | None] = mapped_column(String(100))
    lease_until: Mapped[datetime | None]
    result: Mapped[dict[str, Any] | None]
    summary: Mapped[str] = mapped_column(Text, default="")
    actor: Mapped[str | None] = mapped_column(String(200))
    """Who the action runs as (the approver who completed the approval), or who marked a
    manual step done or skipped it."""


class StepApproval(Base):
    __tablename__ = "step_approvals"
    __table_args__ = (UniqueConstraint("step_run_id", "approver", name="uq_step_approvals_person"),)

    id: Mapped[int] = mapped_column(_ID, primary_key=True, autoincrement=True)
    step_run_id: Mapped[int] = mapped_column(ForeignKey("step_runs.id"), index=True)
    approver: Mapped[str] = mapped_column(String(200))
    role: Mapped[str] = mapped_column(String(32))
    params_hash: Mapped[str] = mapped_column(String(64))
    approved_at: Mapped[datetime]

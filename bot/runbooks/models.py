"""ORM classes of the runbooks room: runbook documents (stored once per content), the
runbook frozen onto an incident, its step runs, and the approvals people gave them.

A step run is one attempt at one step of one incident's runbook: unique per (incident,
step, attempt), so a double click, a Slack retry or a second replica can never create a
second run of the same attempt. Its rendered parameters are stored with their hash; an
approval binds to that hash and expires, and one person approves a run at most once.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
    text,
)
from sqlalchemy.orm import Mapped, mapped_column

from bot.db import Base, EnumText
from bot.runbooks.steps import StepState

_ID = BigInteger().with_variant(Integer, "sqlite")


class RunbookVersion(Base):
    """One runbook document exactly as it was, stored once per content (its SHA-256) and
    shared by every incident that follows it; never updated or deleted."""

    __tablename__ = "runbook_versions"

    digest: Mapped[str] = mapped_column(String(64), primary_key=True)
    runbook_id: Mapped[str] = mapped_column(String(63))
    version: Mapped[int] = mapped_column(Integer)
    source: Mapped[str] = mapped_column(String(500), default="")
    """The file it was first loaded from."""
    document: Mapped[dict[str, Any]]
    """The whole runbook (`Runbook.model_dump(by_alias=True, mode="json")`)."""
    stored_at: Mapped[datetime]


class IncidentRunbook(Base):
    """The runbook an incident follows, frozen when it opened (DESIGN invariant 7): editing
    the YAML later never changes an open incident."""

    __tablename__ = "incident_runbooks"
    __table_args__ = (
        # What the worker looks for: runbooks frozen by ingest whose steps it has not
        # proposed yet. Partial, so it stays as small as the backlog.
        Index(
            "ix_incident_runbooks_unproposed",
            "incident_number",
            postgresql_where=text("proposed_at IS NULL"),
            sqlite_where=text("proposed_at IS NULL"),
        ),
    )

    incident_number: Mapped[int] = mapped_column(ForeignKey("incidents.number"), primary_key=True)
    runbook_id: Mapped[str] = mapped_column(String(63))
    runbook_version: Mapped[int] = mapped_column(Integer)
    runbook_digest: Mapped[str] = mapped_column(ForeignKey("runbook_versions.digest"), index=True)
    """The document followed: `RunbookVersion.digest`."""
    facts: Mapped[dict[str, Any]]
    labels: Mapped[dict[str, Any]] = mapped_column(server_default="{}")
    """The matched alert's labels (over the incident's common labels), for step templates."""
    annotations: Mapped[dict[str, Any]] = mapped_column(server_default="{}")
    matched_at: Mapped[datetime]
    proposed_at: Mapped[datetime | None]
    """When the engine first proposed its steps; null while the worker has yet to."""


class StepRun(Base):
    __tablename__ = "step_runs"
    __table_args__ = (
        UniqueConstraint("incident_number", "step_id", "attempt", name="uq_step_runs_attempt"),
        # What the worker claims: approved runs (once due), and running ones whose lease
        # ran out; the expiry sweep looks for awaiting runs past `expires_at` (its own
        # index: thousands of runs may await people during an alert storm).
        Index("ix_step_runs_state_lease", "state", "lease_until"),
        Index("ix_step_runs_state_expiry", "state", "expires_at"),
    )

    id: Mapped[int] = mapped_column(_ID, primary_key=True, autoincrement=True)
    incident_number: Mapped[int] = mapped_column(ForeignKey("incidents.number"), index=True)
    step_id: Mapped[str] = mapped_column(String(63))
    attempt: Mapped[int] = mapped_column(Integer, default=1)
    state: Mapped[StepState] = mapped_column(EnumText(StepState, 24))
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
    progress: Mapped[dict[str, Any] | None]
    """A `for_each` run's nodes while it runs: `{"nodes": {node: {"state", "summary"}}}`
    (`bot.runbooks.foreach`), what the card and the API count."""
    approved_count: Mapped[int | None] = mapped_column(Integer)
    """The node count its approvals named (`for_each`): the run's actions get an
    `Allowance` for that many nodes."""
    override_count: Mapped[int | None] = mapped_column(Integer)
    """How many nodes past the circuit breaker's global cap an admin's approval of this
    `for_each` run let it take out (None: none; the cap holds)."""
    stop_requested_by: Mapped[str | None] = mapped_column(String(200))
    """Who asked a running `for_each` run to stop the rest (no new node starts)."""
    stop_requested_at: Mapped[datetime | None]

    def next_attempt(self, *, now: datetime, not_before: datetime, summary: str) -> StepRun:
        """The same step's next attempt with the same parameters and approval, proposed
        now and due `not_before` (a retry, a re-read); the caller adds and approves it."""
        return StepRun(
            incident_number=self.incident_number,
            step_id=self.step_id,
            attempt=self.attempt + 1,
            state=StepState.PROPOSED,
            kind=self.kind,
            action=self.action,
            params=dict(self.params),
            params_hash=self.params_hash,
            approvals_required=self.approvals_required,
            proposed_at=now,
            decided_at=now,
            not_before=not_before,
            actor=self.actor,
            approved_count=self.approved_count,
            override_count=self.override_count,
            summary=summary[:2000],
        )


class StepApproval(Base):
    __tablename__ = "step_approvals"
    __table_args__ = (UniqueConstraint("step_run_id", "approver", name="uq_step_approvals_person"),)

    id: Mapped[int] = mapped_column(_ID, primary_key=True, autoincrement=True)
    step_run_id: Mapped[int] = mapped_column(ForeignKey("step_runs.id"), index=True)
    approver: Mapped[str] = mapped_column(String(200))
    role: Mapped[str] = mapped_column(String(32))
    params_hash: Mapped[str] = mapped_column(String(64))
    approved_at: Mapped[datetime]
    channel: Mapped[str | None] = mapped_column(String(16))
    """slack, console, api or cli (`bot.people.Channel`); None before people."""
    count: Mapped[int | None] = mapped_column(Integer)
    """The node count this person named approving a `for_each` run (None: none named)."""

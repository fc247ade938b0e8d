"""Runbooks frozen onto incidents (with the alert labels and annotations they matched,
which step templates render against long after), step runs and their approvals.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def _at(name: str, nullable: bool = True) -> sa.Column[object]:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=nullable)


def _incident(primary_key: bool = False) -> sa.Column[object]:
    return sa.Column(
        "incident_number",
        sa.Integer(),
        sa.ForeignKey("incidents.number"),
        nullable=False,
        primary_key=primary_key,
    )


def upgrade() -> None:
    op.create_table(
        "incident_runbooks",
        _incident(primary_key=True),
        sa.Column("runbook_id", sa.String(63), nullable=False),
        sa.Column("runbook_version", sa.Integer(), nullable=False),
        sa.Column("source", sa.String(500), nullable=False),
        sa.Column("document", JSON, nullable=False),
        sa.Column("facts", JSON, nullable=False),
        sa.Column("labels", JSON, nullable=False, server_default="{}"),
        sa.Column("annotations", JSON, nullable=False, server_default="{}"),
        _at("matched_at", nullable=False),
    )
    op.create_table(
        "step_runs",
        sa.Column("id", ID, primary_key=True, autoincrement=True),
        _incident(),
        sa.Column("step_id", sa.String(63), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("state", sa.String(24), nullable=False),
        sa.Column("kind", sa.String(8), nullable=False),
        sa.Column("action", sa.String(100)),
        sa.Column("params", JSON, nullable=False),
        sa.Column("params_hash", sa.String(64), nullable=False),
        sa.Column("approvals_required", sa.Integer(), nullable=False),
        _at("proposed_at", nullable=False),
        _at("expires_at"),
        _at("not_before"),
        _at("decided_at"),
        _at("started_at"),
        _at("finished_at"),
        sa.Column("lease_owner", sa.String(100)),
        _at("lease_until"),
        sa.Column("result", JSON),
        sa.Column("summary", sa.Text(), nullable=False),
        sa.Column("actor", sa.String(200)),
        sa.UniqueConstraint("incident_number", "step_id", "attempt", name="uq_step_runs_attempt"),
    )
    op.create_index("ix_step_runs_incident_number", "step_runs", ["incident_number"])
    op.create_index("ix_step_runs_state_lease", "step_runs", ["state", "lease_until"])
    op.create_table(
        "step_approvals",
        sa.Column("id", ID, primary_key=True, autoincrement=True),
        sa.Column("step_run_id", ID, sa.ForeignKey("step_runs.id"), nullable=False),
        sa.Column("approver", sa.String(200), nullable=False),
        sa.Column("role", sa.String(32), nullable=False),
        sa.Column("params_hash", sa.String(64), nullable=False),
        _at("approved_at", nullable=False),
        sa.UniqueConstraint("step_run_id", "approver", name="uq_step_approvals_person"),
    )
    op.create_index("ix_step_approvals_step_run_id", "step_approvals", ["step_run_id"])


def downgrade() -> None:
    op.drop_table("step_approvals")
    op.drop_table("step_runs")
    op.drop_table("incident_runbooks")

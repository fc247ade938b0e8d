"""Escalation: each incident's frozen policy and place on its ladder, durable timers (at
most one pending per incident), the pages to deliver, on-call overrides and hand-overs,
and the workers' heartbeats.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
PENDING = sa.text("state = 'pending'")
OPEN_PAGES = sa.text("state IN ('pending', 'sending')")


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
        "incident_escalations",
        _incident(primary_key=True),
        sa.Column("policy", JSON, nullable=False),
        sa.Column("severity", sa.String(16), nullable=False),
        sa.Column("round", sa.Integer(), nullable=False),
        sa.Column("level", sa.Integer(), nullable=False),
        _at("paged_at"),
        _at("silenced_until"),
        _at("updated_at", nullable=False),
    )
    op.create_table(
        "escalation_timers",
        sa.Column("id", ID, primary_key=True, autoincrement=True),
        _incident(),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("round", sa.Integer(), nullable=False),
        sa.Column("level", sa.Integer(), nullable=False),
        _at("due_at", nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        _at("created_at", nullable=False),
        _at("fired_at"),
        sa.Column("fired_by", sa.String(200)),
        _at("cancelled_at"),
        sa.Column("note", sa.Text(), nullable=False),
    )
    op.create_index(
        "ix_escalation_timers_incident_number", "escalation_timers", ["incident_number"]
    )
    op.create_index(
        "ix_escalation_timers_due",
        "escalation_timers",
        ["due_at"],
        postgresql_where=PENDING,
        sqlite_where=PENDING,
    )
    op.create_index(
        "uq_escalation_timers_pending",
        "escalation_timers",
        ["incident_number"],
        unique=True,
        postgresql_where=PENDING,
        sqlite_where=PENDING,
    )
    op.create_table(
        "page_deliveries",
        sa.Column("id", ID, primary_key=True, autoincrement=True),
        _incident(),
        sa.Column("timer_id", ID, sa.ForeignKey("escalation_timers.id")),
        sa.Column("target", sa.String(100), nullable=False),
        sa.Column("event", sa.String(16), nullable=False),
        sa.Column("level", sa.Integer(), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        _at("due_at", nullable=False),
        sa.Column("lease_owner", sa.String(200)),
        _at("lease_until"),
        _at("created_at", nullable=False),
        _at("finished_at"),
        sa.Column("detail", sa.Text(), nullable=False),
    )
    op.create_index("ix_page_deliveries_incident_number", "page_deliveries", ["incident_number"])
    op.create_index(
        "ix_page_deliveries_open",
        "page_deliveries",
        ["due_at"],
        postgresql_where=OPEN_PAGES,
        sqlite_where=OPEN_PAGES,
    )
    op.create_table(
        "oncall_overrides",
        sa.Column("id", ID, primary_key=True, autoincrement=True),
        sa.Column("person", sa.String(200), nullable=False),
        _at("starts_at", nullable=False),
        _at("ends_at", nullable=False),
        sa.Column("set_by", sa.String(200), nullable=False),
        _at("set_at", nullable=False),
    )
    op.create_index("ix_oncall_overrides_starts_at", "oncall_overrides", ["starts_at"])
    op.create_table(
        "oncall_handovers",
        _at("at", nullable=False),
        sa.Column("outgoing", sa.String(200)),
        sa.Column("incoming", sa.String(200), nullable=False),
        _at("posted_at", nullable=False),
        sa.Column("posted_by", sa.String(200), nullable=False),
        sa.Column("incidents", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("at"),
    )
    op.create_table(
        "worker_heartbeats",
        sa.Column("owner", sa.String(200), primary_key=True),
        _at("started_at", nullable=False),
        _at("beat_at", nullable=False),
    )


def downgrade() -> None:
    op.drop_table("worker_heartbeats")
    op.drop_table("oncall_handovers")
    op.drop_index("ix_oncall_overrides_starts_at", "oncall_overrides")
    op.drop_table("oncall_overrides")
    op.drop_index("ix_page_deliveries_open", "page_deliveries")
    op.drop_index("ix_page_deliveries_incident_number", "page_deliveries")
    op.drop_table("page_deliveries")
    op.drop_index("uq_escalation_timers_pending", "escalation_timers")
    op.drop_index("ix_escalation_timers_due", "escalation_timers")
    op.drop_index("ix_escalation_timers_incident_number", "escalation_timers")
    op.drop_table("escalation_timers")
    op.drop_table("incident_escalations")

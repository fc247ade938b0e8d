"""Chat: one card per incident, the outbox of chat calls, per-channel pacing, Slack request
signatures already handled (replays), and the
incidents' `announced_seq` (how far chat has taken each log) with a partial index on the
incidents whose log chat has yet to take.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
UNANNOUNCED = sa.text("log_seq > announced_seq")
PENDING = sa.text("state = 'pending'")
PENDING_CARD = sa.text("kind = 'card' AND state = 'pending'")


def _at(name: str, nullable: bool = True) -> sa.Column[object]:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=nullable)


def _incident(nullable: bool = False, primary_key: bool = False) -> sa.Column[object]:
    return sa.Column(
        "incident_number",
        sa.Integer(),
        sa.ForeignKey("incidents.number"),
        nullable=nullable,
        primary_key=primary_key,
    )


def upgrade() -> None:
    op.add_column(
        "incidents", sa.Column("announced_seq", sa.Integer(), nullable=False, server_default="0")
    )
    # What was logged before chat existed is not announced again, except on open incidents
    # (their cards appear once chat is configured).
    op.execute(
        "UPDATE incidents SET announced_seq = log_seq WHERE status NOT IN ('open', 'acknowledged')"
    )
    op.create_index(
        "ix_incidents_unannounced",
        "incidents",
        ["number"],
        postgresql_where=UNANNOUNCED,
        sqlite_where=UNANNOUNCED,
    )
    op.create_table(
        "chat_cards",
        _incident(primary_key=True),
        sa.Column("channel", sa.String(64), nullable=False),
        sa.Column("ts", sa.String(32)),
        _at("posted_at"),
        _at("updated_at"),
        sa.Column("thread_seq", sa.Integer(), nullable=False),
    )
    op.create_table(
        "chat_outbox",
        sa.Column("id", ID, primary_key=True, autoincrement=True),
        _incident(nullable=True),
        sa.Column("channel", sa.String(64), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("priority", sa.Integer(), nullable=False),
        sa.Column("payload", JSON, nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        _at("not_before"),
        _at("created_at", nullable=False),
        _at("sent_at"),
        sa.Column("error", sa.Text(), nullable=False),
    )
    op.create_index(
        "ix_chat_outbox_pending",
        "chat_outbox",
        ["channel", "priority", "id"],
        postgresql_where=PENDING,
        sqlite_where=PENDING,
    )
    op.create_index(
        "uq_chat_outbox_pending_card",
        "chat_outbox",
        ["incident_number"],
        unique=True,
        postgresql_where=PENDING_CARD,
        sqlite_where=PENDING_CARD,
    )
    op.create_table(
        "chat_channels",
        sa.Column("channel", sa.String(64), primary_key=True),
        _at("next_at", nullable=False),
        _at("low_at", nullable=False),
        sa.Column("tokens", sa.Float(), nullable=False),
        _at("tokens_at", nullable=False),
        sa.Column("lease_owner", sa.String(100)),
        _at("lease_until"),
    )
    op.create_table(
        "slack_requests",
        sa.Column("signature", sa.String(80), primary_key=True),
        _at("received_at", nullable=False),
    )
    op.create_index("ix_slack_requests_received_at", "slack_requests", ["received_at"])


def downgrade() -> None:
    op.drop_index("ix_slack_requests_received_at", "slack_requests")
    op.drop_table("slack_requests")
    op.drop_table("chat_channels")
    op.drop_index("uq_chat_outbox_pending_card", "chat_outbox")
    op.drop_index("ix_chat_outbox_pending", "chat_outbox")
    op.drop_table("chat_outbox")
    op.drop_table("chat_cards")
    op.drop_index("ix_incidents_unannounced", "incidents")
    # A plain DROP COLUMN (SQLite >= 3.35 has it): a batch rebuild of `incidents` would
    # trip the foreign keys of every table that points at it.
    op.execute("ALTER TABLE incidents DROP COLUMN announced_seq")

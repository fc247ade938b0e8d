"""The outbox orders by severity, and a flood of one pattern is summarised: chat cards
carry their pattern (alertname) and the flood summary they were folded into; the
`chat_summaries` table holds the "N more warning incidents" messages. Pending outbox rows
move to the new priority scale (a critical new card 0, any other new card 1, card
updates 2, thread posts and messages 3; answers and pages stay 0).

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa

from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("chat_cards", sa.Column("pattern", sa.String(200)))
    op.add_column("chat_cards", sa.Column("summary_id", sa.Integer()))
    op.create_table(
        "chat_summaries",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("channel", sa.String(64), nullable=False),
        sa.Column("pattern", sa.String(200), nullable=False),
        sa.Column("severity", sa.String(16), nullable=False),
        sa.Column("window", sa.BigInteger(), nullable=False),
        sa.Column("count", sa.Integer(), nullable=False),
        sa.Column("first_incident", sa.Integer(), nullable=False),
        sa.Column("last_incident", sa.Integer(), nullable=False),
        sa.Column("opened_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("ts", sa.String(32)),
        sa.Column("queued", sa.Boolean(), nullable=False),
    )
    op.create_index(
        "uq_chat_summaries_window",
        "chat_summaries",
        ["channel", "pattern", "severity", "window"],
        unique=True,
    )
    # Old scale: answers, pages and new cards 0, card updates 1, the rest 2.
    op.execute(
        "UPDATE chat_outbox SET priority = priority + 1 "
        "WHERE state = 'pending' AND (priority >= 1 OR kind = 'card')"
    )


def downgrade() -> None:
    op.execute("UPDATE chat_outbox SET priority = priority - 1 WHERE priority >= 1")
    op.drop_index("uq_chat_summaries_window", "chat_summaries")
    op.drop_table("chat_summaries")
    # Plain DROP COLUMN, as 0007.
    op.execute("ALTER TABLE chat_cards DROP COLUMN summary_id")
    op.execute("ALTER TABLE chat_cards DROP COLUMN pattern")

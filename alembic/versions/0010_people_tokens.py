"""People: personal API tokens (`api_tokens`, the SHA-256 of each secret, never the
secret), and the channel each step approval came through (`step_approvals.channel`:
slack, console, api or cli; NULL for approvals given before people).

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa

from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "api_tokens",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("person", sa.String(64), nullable=False),
        sa.Column("name", sa.String(100), nullable=False),
        sa.Column("secret_hash", sa.String(64), nullable=False, unique=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("revoked_at", sa.DateTime(timezone=True)),
    )
    op.create_index("ix_api_tokens_person", "api_tokens", ["person"])
    op.add_column("step_approvals", sa.Column("channel", sa.String(16)))


def downgrade() -> None:
    # Plain DROP COLUMN, as 0007.
    op.execute("ALTER TABLE step_approvals DROP COLUMN channel")
    op.drop_index("ix_api_tokens_person", "api_tokens")
    op.drop_table("api_tokens")

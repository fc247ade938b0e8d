"""Drills: an incident opened by `runbook-bot drill` carries the drill's id. Its steps run
as dry runs and its alerts never group with real ones.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa

from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("incidents", sa.Column("drill", sa.String(64)))


def downgrade() -> None:
    # A plain DROP COLUMN (SQLite >= 3.35 has it), as 0004: a batch rebuild of `incidents`
    # would trip the foreign keys of every table that points at it.
    op.execute("ALTER TABLE incidents DROP COLUMN drill")

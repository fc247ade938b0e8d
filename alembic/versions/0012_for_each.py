"""Steps over many nodes (`for_each: nodes`): a run's per-node progress while it runs
(`step_runs.progress`), the count its approval named (`step_runs.approved_count`, and
each person's in `step_approvals.count`), and who asked to stop the rest and when
(`step_runs.stop_requested_by`, `stop_requested_at`), and how far past the breaker's global
cap an admin's approval let it go (`step_runs.override_count`).

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None

JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def upgrade() -> None:
    op.add_column("step_runs", sa.Column("progress", JSON))
    op.add_column("step_runs", sa.Column("approved_count", sa.Integer()))
    op.add_column("step_runs", sa.Column("stop_requested_by", sa.String(200)))
    op.add_column("step_runs", sa.Column("stop_requested_at", sa.DateTime(timezone=True)))
    op.add_column("step_runs", sa.Column("override_count", sa.Integer()))
    op.add_column("step_approvals", sa.Column("count", sa.Integer()))


def downgrade() -> None:
    # Plain DROP COLUMN, as 0007.
    op.execute("ALTER TABLE step_approvals DROP COLUMN count")
    columns = ("override_count", "stop_requested_at", "stop_requested_by", "approved_count")
    for column in (*columns, "progress"):
        op.execute(f"ALTER TABLE step_runs DROP COLUMN {column}")

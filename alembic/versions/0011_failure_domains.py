"""Failure domains: an incident is a node's or a domain's (`scope`, `domain` such as
`row/a`, `domain_size`: the domain's member count when it became the domain's), the key
correlation finds it by (`correlation_key`: the runbook and its group_by values, hashed),
and the incident a merged one was merged into (`merged_into`). An alert attached to a
cause's incident as a symptom says which runbook it matched (`alerts.symptom`).

Revision ID: 0011_failure_domains
Revises: 0010
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa

from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column(
        "incidents", sa.Column("scope", sa.String(16), nullable=False, server_default="node")
    )
    op.add_column("incidents", sa.Column("domain", sa.String(300)))
    op.add_column("incidents", sa.Column("domain_size", sa.Integer()))
    op.add_column("incidents", sa.Column("correlation_key", sa.String(64)))
    op.add_column("incidents", sa.Column("merged_into", sa.Integer()))
    op.create_index("ix_incidents_correlation_key", "incidents", ["correlation_key"])
    op.add_column("alerts", sa.Column("symptom", sa.String(64)))


def downgrade() -> None:
    # Plain DROP COLUMN (SQLite >= 3.35), as 0007: a batch rebuild of `incidents` would
    # trip the foreign keys of every table that points at it.
    op.drop_index("ix_incidents_correlation_key", table_name="incidents")
    op.execute("ALTER TABLE alerts DROP COLUMN symptom")
    for column in ("merged_into", "correlation_key", "domain_size", "domain", "scope"):
        op.execute(f"ALTER TABLE incidents DROP COLUMN {column}")

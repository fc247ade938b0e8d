"""The log key: which entries' hashes are HMACs under `log_key_file`, and the MAC of each
incident's head (its latest sequence number and hash), so that dropping the newest
entries and moving the head back is caught too. Entries written before stay plain
SHA-256 links and verify as such.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa

from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # A constant default: PostgreSQL records it in the catalogue, rewriting no row (the
    # append-only triggers never fire).
    op.add_column(
        "incident_log",
        sa.Column("keyed", sa.Boolean(), nullable=False, server_default=sa.false()),
    )
    op.add_column("incidents", sa.Column("log_mac", sa.String(64)))


def downgrade() -> None:
    # Plain DROP COLUMN, as 0007 (a batch rebuild would trip the foreign keys).
    op.execute("ALTER TABLE incidents DROP COLUMN log_mac")
    op.execute("ALTER TABLE incident_log DROP COLUMN keyed")

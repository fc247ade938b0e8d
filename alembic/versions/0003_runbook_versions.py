"""Runbook documents stored once per content: `runbook_versions`, keyed by the SHA-256 of
the document's canonical JSON, referenced from `incident_runbooks` instead of a copy of
the whole document per incident. Existing copies move into the new table. And
`incident_runbooks.proposed_at`, with a partial index on the rows still null: the worker's
backlog of runbooks whose steps it has yet to propose, found without scanning every
incident; and an index for the worker's sweep of runs whose approval expired.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-30
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
FK = "fk_incident_runbooks_runbook_digest"
UNPROPOSED = sa.text("proposed_at IS NULL")


def _digest(document: dict[str, Any]) -> str:
    """As `LoadedRunbook.digest` computes it (frozen here: a migration never changes)."""
    text = json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


def upgrade() -> None:
    versions = op.create_table(
        "runbook_versions",
        sa.Column("digest", sa.String(64), primary_key=True),
        sa.Column("runbook_id", sa.String(63), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("source", sa.String(500), nullable=False),
        sa.Column("document", JSON, nullable=False),
        sa.Column("stored_at", sa.DateTime(timezone=True), nullable=False),
    )
    assert versions is not None
    with op.batch_alter_table("incident_runbooks") as batch:
        batch.add_column(sa.Column("runbook_digest", sa.String(64)))
        batch.add_column(sa.Column("proposed_at", sa.DateTime(timezone=True)))

    frozen = sa.table(
        "incident_runbooks",
        sa.column("incident_number", sa.Integer()),
        sa.column("runbook_id", sa.String()),
        sa.column("runbook_version", sa.Integer()),
        sa.column("source", sa.String()),
        sa.column("document", JSON),
        sa.column("matched_at", sa.DateTime(timezone=True)),
        sa.column("runbook_digest", sa.String()),
    )
    bind = op.get_bind()
    stored: set[str] = set()
    rows = bind.execute(sa.select(frozen).order_by(frozen.c.incident_number)).all()
    for row in rows:
        key = _digest(row.document)
        if key not in stored:
            stored.add(key)
            op.bulk_insert(
                versions,
                [
                    {
                        "digest": key,
                        "runbook_id": row.runbook_id,
                        "version": row.runbook_version,
                        "source": row.source,
                        "document": row.document,
                        "stored_at": row.matched_at,
                    }
                ],
            )
        bind.execute(
            frozen.update()
            .where(frozen.c.incident_number == row.incident_number)
            .values(runbook_digest=key)
        )

    with op.batch_alter_table("incident_runbooks") as batch:
        batch.alter_column("runbook_digest", existing_type=sa.String(64), nullable=False)
        batch.create_foreign_key(FK, "runbook_versions", ["runbook_digest"], ["digest"])
        batch.create_index("ix_incident_runbooks_runbook_digest", ["runbook_digest"])
        batch.drop_column("document")
        batch.drop_column("source")
    # Runbooks whose steps were proposed already; the rest are the worker's backlog.
    op.execute(
        "UPDATE incident_runbooks SET proposed_at = matched_at WHERE EXISTS (SELECT 1 FROM "
        "step_runs WHERE step_runs.incident_number = incident_runbooks.incident_number)"
    )
    op.create_index("ix_step_runs_state_expiry", "step_runs", ["state", "expires_at"])
    op.create_index(
        "ix_incident_runbooks_unproposed",
        "incident_runbooks",
        ["incident_number"],
        postgresql_where=UNPROPOSED,
        sqlite_where=UNPROPOSED,
    )


def downgrade() -> None:
    op.drop_index("ix_incident_runbooks_unproposed", "incident_runbooks")
    op.drop_index("ix_step_runs_state_expiry", "step_runs")
    with op.batch_alter_table("incident_runbooks") as batch:
        batch.add_column(sa.Column("source", sa.String(500), nullable=False, server_default=""))
        batch.add_column(sa.Column("document", JSON))
    op.execute(
        "UPDATE incident_runbooks SET document = (SELECT v.document FROM runbook_versions v "
        "WHERE v.digest = incident_runbooks.runbook_digest), source = (SELECT v.source FROM "
        "runbook_versions v WHERE v.digest = incident_runbooks.runbook_digest)"
    )
    with op.batch_alter_table("incident_runbooks") as batch:
        batch.alter_column("document", existing_type=JSON, nullable=False)
        batch.drop_index("ix_incident_runbooks_runbook_digest")
        batch.drop_constraint(FK, type_="foreignkey")
        batch.drop_column("runbook_digest")
        batch.drop_column("proposed_at")
    op.drop_table("runbook_versions")

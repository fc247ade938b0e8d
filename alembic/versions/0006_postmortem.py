"""Postmortems: follow-ups with owners, deadlines and the reminders sent, stored postmortem
versions, and the weekly digests posted.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa

from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def _at(name: str, nullable: bool = True) -> sa.Column[object]:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=nullable)


def _incident() -> sa.Column[object]:
    return sa.Column(
        "incident_number", sa.Integer(), sa.ForeignKey("incidents.number"), nullable=False
    )


def upgrade() -> None:
    op.create_table(
        "followups",
        sa.Column("id", ID, primary_key=True, autoincrement=True),
        _incident(),
        sa.Column("title", sa.String(500), nullable=False),
        sa.Column("type", sa.String(16), nullable=False),
        sa.Column("owner", sa.String(200)),
        sa.Column("deadline", sa.Date()),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("link", sa.Text()),
        sa.Column("source", sa.String(32), nullable=False),
        sa.Column("created_by", sa.String(200), nullable=False),
        _at("created_at", nullable=False),
        _at("updated_at", nullable=False),
        _at("closed_at"),
        sa.Column("reminded_before", sa.Date()),
        sa.Column("reminded_due", sa.Date()),
        sa.Column("reminded_overdue", sa.Date()),
    )
    op.create_index("ix_followups_incident_number", "followups", ["incident_number"])
    op.create_table(
        "postmortems",
        sa.Column("id", ID, primary_key=True, autoincrement=True),
        _incident(),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("lang", sa.String(8), nullable=False),
        sa.Column("body", sa.Text(), nullable=False),
        sa.Column("author", sa.String(200), nullable=False),
        _at("created_at", nullable=False),
        sa.Column("note", sa.Text(), nullable=False),
        sa.UniqueConstraint("incident_number", "version", name="uq_postmortem_version"),
    )
    op.create_index("ix_postmortems_incident_number", "postmortems", ["incident_number"])
    op.create_table(
        "postmortem_digests",
        sa.Column("week", sa.Date(), primary_key=True),
        _at("posted_at", nullable=False),
        sa.Column("posted_by", sa.String(200), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("postmortem_digests")
    op.drop_index("ix_postmortems_incident_number", "postmortems")
    op.drop_table("postmortems")
    op.drop_index("ix_followups_incident_number", "followups")
    op.drop_table("followups")

"""Incidents, alerts and the append-only incident log.

Revision ID: 0001
Revises:
Create Date: 2026-11-29
"""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
ACTIVE = sa.text("status IN ('open', 'acknowledged')")
REFUSE = "incident_log is append-only: UPDATE, DELETE and TRUNCATE are refused"


def _at(name: str, nullable: bool = True) -> sa.Column[object]:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=nullable)


def upgrade() -> None:
    op.create_table(
        "incidents",
        sa.Column("number", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("title", sa.String(500), nullable=False),
        sa.Column("severity", sa.String(16), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("owner", sa.String(200)),
        sa.Column("disposition", sa.Text()),
        sa.Column("group_key", sa.Text(), nullable=False),
        sa.Column("group_hash", sa.String(64), nullable=False),
        sa.Column("receiver", sa.String(200), nullable=False),
        sa.Column("group_labels", JSON, nullable=False),
        sa.Column("common_labels", JSON, nullable=False),
        sa.Column("external_url", sa.Text(), nullable=False),
        sa.Column("truncated_alerts", sa.Integer(), nullable=False),
        sa.Column("reopen_count", sa.Integer(), nullable=False),
        _at("opened_at", nullable=False),
        _at("acknowledged_at"),
        sa.Column("acknowledged_by", sa.String(200)),
        _at("resolved_at"),
        sa.Column("resolved_by", sa.String(200)),
        _at("closed_at"),
        _at("reopened_at"),
        _at("alerts_cleared_at"),
        _at("updated_at", nullable=False),
        sa.Column("log_seq", sa.Integer(), nullable=False),
        sa.Column("log_head", sa.String(64), nullable=False),
    )
    op.create_index("ix_incidents_group_hash", "incidents", ["group_hash"])
    op.create_index("ix_incidents_status_severity", "incidents", ["status", "severity"])
    op.create_index(
        "uq_incidents_active_group",
        "incidents",
        ["group_hash"],
        unique=True,
        postgresql_where=ACTIVE,
        sqlite_where=ACTIVE,
    )

    op.create_table(
        "alerts",
        sa.Column("id", ID, primary_key=True, autoincrement=True),
        sa.Column(
            "incident_number", sa.Integer(), sa.ForeignKey("incidents.number"), nullable=False
        ),
        sa.Column("fingerprint", sa.String(64), nullable=False),
        _at("starts_at", nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("alertname", sa.String(200), nullable=False),
        sa.Column("severity", sa.String(16), nullable=False),
        sa.Column("labels", JSON, nullable=False),
        sa.Column("annotations", JSON, nullable=False),
        sa.Column("generator_url", sa.Text(), nullable=False),
        _at("ends_at"),
        _at("first_received_at", nullable=False),
        _at("last_received_at", nullable=False),
        sa.Column("receive_count", sa.Integer(), nullable=False),
        sa.UniqueConstraint("fingerprint", "starts_at", name="uq_alerts_instance"),
    )
    op.create_index("ix_alerts_incident_number", "alerts", ["incident_number"])

    op.create_table(
        "incident_log",
        sa.Column("id", ID, primary_key=True, autoincrement=True),
        sa.Column(
            "incident_number", sa.Integer(), sa.ForeignKey("incidents.number"), nullable=False
        ),
        sa.Column("seq", sa.Integer(), nullable=False),
        _at("at", nullable=False),
        sa.Column("actor_kind", sa.String(16), nullable=False),
        sa.Column("actor_id", sa.String(200), nullable=False),
        sa.Column("actor_name", sa.String(200), nullable=False),
        sa.Column("type", sa.String(64), nullable=False),
        sa.Column("summary", sa.Text(), nullable=False),
        sa.Column("data", JSON, nullable=False),
        sa.Column("prev_hash", sa.String(64), nullable=False),
        sa.Column("hash", sa.String(64), nullable=False),
        sa.UniqueConstraint("incident_number", "seq", name="uq_incident_log_seq"),
    )
    _append_only()


def _append_only() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(
            f"""
            CREATE FUNCTION incident_log_refuse_change() RETURNS trigger
            LANGUAGE plpgsql AS $$
            BEGIN
                RAISE EXCEPTION '{REFUSE}' USING ERRCODE = 'insufficient_privilege';
            END;
            $$
            """
        )
        op.execute(
            "CREATE TRIGGER incident_log_append_only BEFORE UPDATE OR DELETE ON incident_log "
            "FOR EACH ROW EXECUTE FUNCTION incident_log_refuse_change()"
        )
        op.execute(
            "CREATE TRIGGER incident_log_no_truncate BEFORE TRUNCATE ON incident_log "
            "FOR EACH STATEMENT EXECUTE FUNCTION incident_log_refuse_change()"
        )
    else:
        for event in ("UPDATE", "DELETE"):
            op.execute(
                f"CREATE TRIGGER incident_log_no_{event.lower()} BEFORE {event} ON incident_log "
                f"BEGIN SELECT RAISE(ABORT, '{REFUSE}'); END"
            )
        # INSERT OR REPLACE deletes the old row without firing DELETE triggers (SQLite's
        # recursive_triggers is off by default): refuse any insert that would replace one.
        op.execute(
            "CREATE TRIGGER incident_log_no_replace BEFORE INSERT ON incident_log "
            "WHEN EXISTS (SELECT 1 FROM incident_log WHERE id = NEW.id "
            "OR (incident_number = NEW.incident_number AND seq = NEW.seq)) "
            f"BEGIN SELECT RAISE(ABORT, '{REFUSE}'); END"
        )


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP TRIGGER incident_log_no_truncate ON incident_log")
        op.execute("DROP TRIGGER incident_log_append_only ON incident_log")
        op.execute("DROP FUNCTION incident_log_refuse_change()")
    op.drop_table("incident_log")
    op.drop_index("ix_alerts_incident_number", table_name="alerts")
    op.drop_table("alerts")
    op.drop_index("uq_incidents_active_group", table_name="incidents")
    op.drop_index("ix_incidents_status_severity", table_name="incidents")
    op.drop_index("ix_incidents_group_hash", table_name="incidents")
    op.drop_table("incidents")

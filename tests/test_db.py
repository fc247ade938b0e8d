"""The database wrapper: reads see one snapshot, writes one transaction."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import text

from bot.cli import common
from bot.config import load_settings
from bot.db import Database


def test_reads_on_postgres_see_one_snapshot_while_a_write_commits(pg_url: str) -> None:
    db = Database(pg_url)
    try:
        with db.session() as reader:
            isolation = reader.execute(text("SHOW transaction_isolation")).scalar()
            before = reader.execute(text("SELECT count(*) FROM incidents")).scalar()
            with db.transaction() as writer:  # another connection commits meanwhile
                writer.execute(
                    text(
                        "INSERT INTO incidents (title, severity, status, group_key, group_hash, "
                        "receiver, group_labels, common_labels, external_url, truncated_alerts, "
                        "reopen_count, opened_at, updated_at, log_seq, log_head) VALUES "
                        "('t', 'info', 'open', 'g', 'h', 'r', '{}', '{}', '', 0, 0, now(), "
                        "now(), 0, :head)"
                    ),
                    {"head": "0" * 64},
                )
            after = reader.execute(text("SELECT count(*) FROM incidents")).scalar()
        with db.session() as fresh:
            now = fresh.execute(text("SELECT count(*) FROM incidents")).scalar()
    finally:
        db.dispose()

    assert isolation == "repeatable read"
    assert (before, after, now) == (0, 0, 1)


def test_sqlite_syncs_every_commit_by_default_and_normal_only_when_asked(
    tmp_path: Path,
) -> None:
    shown = {}
    for name, settings in (
        ("default", load_settings(database_url=f"sqlite:///{tmp_path}/a.db")),
        (
            "normal",
            load_settings(database_url=f"sqlite:///{tmp_path}/b.db", sqlite_synchronous="normal"),
        ),
    ):
        with common.database(settings, migrated=False) as db, db.engine.connect() as conn:
            mode = conn.exec_driver_sql("PRAGMA journal_mode").scalar()
            shown[name] = (mode, conn.exec_driver_sql("PRAGMA synchronous").scalar())

    # PRAGMA synchronous: 1 is NORMAL, 2 is FULL.
    assert shown == {"default": ("wal", 2), "normal": ("wal", 1)}

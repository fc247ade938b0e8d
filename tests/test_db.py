"""The database wrapper: reads see one snapshot, writes one transaction."""

from __future__ import annotations

from sqlalchemy import text

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

"""The incident log: its hash chain verifies, tampering is caught, and triggers refuse edits.

Incidents are built through the real webhook (a live server on loopback) and the real
lifecycle service; tampering goes around the append-only triggers the way an attacker
with database access would, then edits with raw SQL.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import closing, contextmanager
from datetime import timedelta
from pathlib import Path

import httpx
import pytest
from sqlalchemy import Connection, text
from sqlalchemy.exc import DBAPIError

from bot.alerts import ingest
from bot.alerts.payload import WebhookPayload
from bot.cli import main
from bot.clock import FrozenClock
from bot.db import Database
from bot.incidents import log, service
from bot.incidents.log import Actor, Broken
from bot.incidents.models import GENESIS
from tests.support.databases import Templates, fresh_database
from tests.support.payloads import fixture
from tests.support.rows import log_types

WEBHOOK = "/webhooks/alertmanager"
DISPOSITION = "drained gpu-node-02, GPU 5 reset, back in service"
EXPECTED_TYPES = [
    "incident.opened",
    "alert.firing",
    "alert.resolved",
    "incident.alerts_cleared",
    "incident.acknowledged",
    "incident.resolved",
]
# Raw SQL an attacker with database access might try on the log.
UPSERT = "ON CONFLICT (id) DO UPDATE SET summary = 'edited'"
COLUMNS = (
    "id, incident_number, seq, at, actor_kind, actor_id, actor_name, type, summary, data, "
    "prev_hash, hash"
)
FORGED = COLUMNS.replace("summary", "'forged' AS summary")


def _build_incident(client: httpx.Client, db: Database, clock: FrozenClock) -> int:
    """INC-1 from the recorded XID 79 firing and resolved posts, acked and resolved by alice."""
    first = client.post(WEBHOOK, json=fixture("xid79-firing.json"))
    assert first.status_code == 200, first.text
    assert first.json()["incident"] == "INC-1"
    clock.advance(timedelta(minutes=5))
    second = client.post(WEBHOOK, json=fixture("xid79-resolved.json"))
    assert second.status_code == 200, second.text
    alice = Actor.human("alice", "Alice")
    clock.advance(timedelta(minutes=1))
    with db.transaction() as session:
        service.acknowledge(session, 1, actor=alice, at=clock.now(), note="on it")
    clock.advance(timedelta(minutes=10))
    with db.transaction() as session:
        service.resolve(session, 1, actor=alice, at=clock.now(), disposition=DISPOSITION)
    return 1


def _verify(db: Database, number: int) -> Broken | None:
    with db.session() as session:
        incident = service.get(session, number)
        return log.verify(incident, log.entries(session, number))


@contextmanager
def _tampering(db: Database) -> Iterator[Connection]:
    """A raw connection with the append-only triggers out of the way, committed at the end."""
    with db.engine.begin() as conn:
        if db.is_postgres:
            # Replica mode skips ordinary triggers; LOCAL keeps it to this transaction.
            conn.exec_driver_sql("SET LOCAL session_replication_role = replica")
        else:
            conn.exec_driver_sql("DROP TRIGGER incident_log_no_update")
            conn.exec_driver_sql("DROP TRIGGER incident_log_no_delete")
        yield conn


def test_chain_of_an_incident_built_through_the_webhook_and_lifecycle_verifies(
    client: httpx.Client, db: Database, clock: FrozenClock
) -> None:
    number = _build_incident(client, db, clock)

    assert log_types(db, number) == EXPECTED_TYPES
    with db.session() as session:
        incident = service.get(session, number)
        entries = log.entries(session, number)
        assert (incident.status, incident.owner, incident.disposition) == (
            "resolved",
            "alice",
            DISPOSITION,
        )
        assert [e.seq for e in entries] == list(range(1, len(EXPECTED_TYPES) + 1))
        assert entries[0].prev_hash == GENESIS
        assert all(e.prev_hash == p.hash for p, e in zip(entries, entries[1:], strict=False))
        assert (incident.log_seq, incident.log_head) == (len(entries), entries[-1].hash)
        assert log.verify(incident, entries) is None


def test_cli_log_verify_passes_an_intact_log_and_names_the_entry_after_tampering(
    client: httpx.Client,
    db: Database,
    db_url: str,
    clock: FrozenClock,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    _build_incident(client, db, clock)
    monkeypatch.setenv("RUNBOOK_BOT_DATABASE_URL", db_url)

    assert main(["log", "verify"]) == 0
    out = capsys.readouterr().out
    assert "log verified: 1 incident(s), every entry intact" in out

    with _tampering(db) as conn:
        conn.execute(
            text("UPDATE incident_log SET summary = :s WHERE incident_number = 1 AND seq = 2"),
            {"s": "nothing happened here"},
        )

    assert main(["log", "verify"]) == 1
    captured = capsys.readouterr()
    assert "INC-1 log entry #2" in captured.err
    assert "FAILED" in captured.err
    assert "log verified" not in captured.out

    assert main(["log", "verify", "INC-1"]) == 1
    assert "INC-1 log entry #2" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("sql", "first_bad", "reason"),
    [
        pytest.param(
            "UPDATE incident_log SET summary = 'GPU 5 looked fine' "
            "WHERE incident_number = 1 AND seq = 3",
            3,
            "content was changed",
            id="edit-summary",
        ),
        pytest.param(
            "DELETE FROM incident_log WHERE incident_number = 1 AND seq = 4",
            4,
            "missing",
            id="delete-middle",
        ),
        pytest.param(
            "DELETE FROM incident_log WHERE incident_number = 1 AND seq = 6",
            6,
            "missing",
            id="delete-last",
        ),
    ],
)
def test_tampering_with_the_log_is_detected_at_the_first_bad_entry(
    client: httpx.Client,
    db: Database,
    clock: FrozenClock,
    sql: str,
    first_bad: int,
    reason: str,
) -> None:
    number = _build_incident(client, db, clock)
    assert _verify(db, number) is None

    with _tampering(db) as conn:
        changed = conn.exec_driver_sql(sql).rowcount
    assert changed == 1

    broken = _verify(db, number)
    assert broken is not None
    assert (broken.incident, broken.seq) == (number, first_bad)
    assert reason in broken.reason
    assert f"INC-{number} log entry #{first_bad}:" in str(broken)


def _open_incident(db: Database, clock: FrozenClock) -> None:
    payload = WebhookPayload.model_validate(fixture("xid79-firing.json"))
    result = ingest.ingest(db, payload, clock=clock, reopen_window=timedelta(hours=24))
    assert result.opened and result.incident == 1


def _log_rows(conn: Connection) -> list[tuple[object, ...]]:
    rows = conn.exec_driver_sql(
        "SELECT incident_number, seq, summary, prev_hash, hash FROM incident_log ORDER BY id"
    )
    return [tuple(row) for row in rows]


@pytest.mark.postgres
@pytest.mark.parametrize(
    "sql",
    [
        "UPDATE incident_log SET summary = 'edited' WHERE seq = 1",
        "DELETE FROM incident_log WHERE seq = 2",
        "TRUNCATE incident_log",
        f"INSERT INTO incident_log SELECT * FROM incident_log WHERE seq = 1 {UPSERT}",
    ],
    ids=["update", "delete", "truncate", "upsert"],
)
def test_postgres_trigger_refuses_updating_deleting_or_truncating_the_log(
    pg_url: str, clock: FrozenClock, sql: str
) -> None:
    db = Database(pg_url)
    try:
        _open_incident(db, clock)
        with db.engine.connect() as conn:
            before = _log_rows(conn)
        assert len(before) == 2

        with pytest.raises(DBAPIError, match="append-only"), db.engine.begin() as conn:
            conn.exec_driver_sql(sql)

        with db.engine.connect() as conn:
            assert _log_rows(conn) == before
        assert _verify(db, 1) is None
    finally:
        db.dispose()


@pytest.fixture
def sqlite_path(templates: Templates, tmp_path: Path) -> Iterator[Path]:
    """A fresh migrated SQLite file, whatever backends the run selects."""
    with fresh_database(templates, "sqlite", tmp_path) as url:
        yield Path(url.removeprefix("sqlite:///"))


@pytest.mark.parametrize(
    "sql",
    [
        "UPDATE incident_log SET summary = 'edited' WHERE seq = 1",
        "DELETE FROM incident_log WHERE seq = 2",
        "DELETE FROM incident_log",
        f"INSERT INTO incident_log SELECT * FROM incident_log WHERE seq = 1 {UPSERT}",
        # REPLACE deletes the conflicting row without firing DELETE triggers unless
        # recursive_triggers is on, so a BEFORE DELETE trigger alone does not stop it.
        f"INSERT OR REPLACE INTO incident_log ({COLUMNS}) "
        f"SELECT {FORGED} FROM incident_log WHERE seq = 1",
    ],
    ids=["update", "delete-one", "delete-all", "upsert", "insert-or-replace"],
)
def test_sqlite_triggers_refuse_updating_or_deleting_log_entries(
    sqlite_path: Path, clock: FrozenClock, sql: str
) -> None:
    db = Database(f"sqlite:///{sqlite_path}")
    try:
        _open_incident(db, clock)
    finally:
        db.dispose()

    with closing(sqlite3.connect(sqlite_path)) as conn:
        before = conn.execute("SELECT seq, summary, hash FROM incident_log ORDER BY id").fetchall()
        assert len(before) == 2
        with pytest.raises(sqlite3.DatabaseError, match="append-only"):
            conn.execute(sql)
        conn.rollback()
        after = conn.execute("SELECT seq, summary, hash FROM incident_log ORDER BY id").fetchall()
        assert after == before

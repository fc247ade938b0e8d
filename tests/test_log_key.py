"""With the log key, someone holding only database access cannot rewrite the incident log
unseen: each entry is an HMAC under a key the database never holds, and so is the
incident's head. Each attack is run for real: on PostgreSQL as the owner role (which may
disable the append-only triggers), on SQLite by whoever can write the file (who may drop
them); `runbook-bot log verify` with the key then fails naming the entry. Logs written
before the key stay verifiable as the plain chain, and the output says where the HMAC
starts."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from contextlib import closing
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import text

from bot.cli import common
from bot.clock import FrozenClock
from bot.config import load_settings
from bot.db import Database
from bot.incidents import log, service
from bot.incidents.log import Actor
from bot.incidents.models import GENESIS, LogEntry
from tests.support import server
from tests.support.cli import Run
from tests.support.payloads import alert, fixture, notification
from tests.support.pg_roles import two_roles

HOOK = "/webhooks/alertmanager"
KEY = b"0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a6978"
COLUMNS = "incident_number, seq, at, actor_kind, actor_id, actor_name, type, summary, data"


@dataclass
class Site:
    """The bot's database (opened with the key) and a way in around the bot."""

    url: str
    db: Database
    tamper: Callable[[list[str]], None]
    """Run SQL statements with the append-only triggers out of the way, committed."""
    backend: str


@pytest.fixture(params=["sqlite", "postgresql"])
def site(
    request: pytest.FixtureRequest,
    templates: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[Site]:
    if request.param == "sqlite":
        url = templates.sqlite_copy(tmp_path / "bot.db")
        path = url.removeprefix("sqlite:///")

        def by_file(statements: list[str]) -> None:
            with closing(sqlite3.connect(path)) as conn:
                for trigger in ("no_update", "no_delete", "no_replace"):
                    conn.execute(f"DROP TRIGGER IF EXISTS incident_log_{trigger}")
                for statement in statements:
                    conn.execute(statement)
                conn.commit()

        db = Database(url, log_key=KEY)
        yield Site(url, db, by_file, "sqlite")
        db.dispose()
        return
    with two_roles(monkeypatch) as roles:

        def as_owner(statements: list[str]) -> None:
            with roles.connect(roles.owner_url) as owner:
                assert owner.execute("SELECT current_user").fetchone() == (roles.owner,)
                owner.execute("ALTER TABLE incident_log DISABLE TRIGGER USER")
                for statement in statements:
                    owner.execute(statement)  # type: ignore[arg-type]
                owner.execute("ALTER TABLE incident_log ENABLE TRIGGER USER")
                owner.commit()

        db = Database(roles.runtime_url, log_key=KEY)
        yield Site(roles.runtime_url, db, as_owner, "postgresql")
        db.dispose()


def _build(site: Site, clock: FrozenClock) -> int:
    """INC-1 through the real webhook (firing, resolved) and an acknowledgement: 5 entries."""
    settings = load_settings(database_url=site.url)
    with (
        server.running(settings, site.db, clock) as base,
        httpx.Client(base_url=base, timeout=30) as client,
    ):
        assert client.post(HOOK, json=fixture("xid79-firing.json")).status_code == 200
        clock.advance(timedelta(minutes=5))
        assert client.post(HOOK, json=fixture("xid79-resolved.json")).status_code == 200
    clock.advance(timedelta(minutes=1))
    with site.db.transaction() as session:
        service.acknowledge(session, 1, actor=Actor.human("alice"), at=clock.now())
    with site.db.session() as session:
        entries = log.entries(session, 1)
        assert all(e.keyed for e in entries)
        return len(entries)


def _rows(db: Database) -> list[LogEntry]:
    with db.session() as session:
        return log.entries(session, 1)


def _plain_entry(last: LogEntry, seq: int, summary: str, prev: str) -> LogEntry:
    """The entry an attacker who knows the algorithm but not the key computes."""
    forged = LogEntry(
        incident_number=last.incident_number,
        seq=seq,
        at=last.at + timedelta(seconds=1),
        actor_kind="human",
        actor_id="alice",
        actor_name="alice",
        type="incident.note",
        summary=summary,
        data={},
        prev_hash=prev,
        keyed=False,
    )
    forged.hash = log.entry_hash(forged)
    return forged


def _insert(entry: LogEntry, backend: str) -> str:
    at = entry.at.replace(tzinfo=None) if backend == "sqlite" else entry.at
    keyed = "0" if backend == "sqlite" else "false"
    return (
        f"INSERT INTO incident_log ({COLUMNS}, prev_hash, hash, keyed) VALUES "
        f"({entry.incident_number}, {entry.seq}, '{at.isoformat(sep=' ')}', 'human', 'alice', "
        f"'alice', 'incident.note', '{entry.summary}', '{{}}', '{entry.prev_hash}', "
        f"'{entry.hash}', {keyed})"
    )


def _truncate(site: Site, count: int) -> tuple[list[str], int, str]:
    kept = _rows(site.db)[count - 2]
    return (
        [
            f"DELETE FROM incident_log WHERE incident_number = 1 AND seq = {count}",
            f"UPDATE incidents SET log_seq = {count - 1}, log_head = '{kept.hash}' "
            "WHERE number = 1",
        ],
        count - 1,
        "does not match its MAC",
    )


def _edit(site: Site, count: int) -> tuple[list[str], int, str]:
    sql = (
        "UPDATE incident_log SET summary = 'GPU 5 looked fine' "
        "WHERE incident_number = 1 AND seq = 2"
    )
    return [sql], 2, "content was changed"


def _forge_append(site: Site, count: int) -> tuple[list[str], int, str]:
    last = _rows(site.db)[-1]
    forged = _plain_entry(last, count + 1, "alice power-cycled the node", last.hash)
    return (
        [
            _insert(forged, site.backend),
            f"UPDATE incidents SET log_seq = {count + 1}, log_head = '{forged.hash}' "
            "WHERE number = 1",
        ],
        count + 1,
        "a plain SHA-256 entry after HMAC entries",
    )


def _rewrite_plain(site: Site, count: int) -> tuple[list[str], int, str]:
    """Rewrite the whole log as a plain chain with an edited entry, and drop the head's MAC."""
    statements, prev = [], GENESIS
    keyed = "0" if site.backend == "sqlite" else "false"
    for entry in _rows(site.db):
        if entry.seq == 2:
            entry.summary = "nothing happened"
        entry.prev_hash, entry.keyed = prev, False
        entry.hash = log.entry_hash(entry)
        statements.append(
            f"UPDATE incident_log SET summary = '{entry.summary}', prev_hash = '{prev}', "
            f"hash = '{entry.hash}', keyed = {keyed} "
            f"WHERE incident_number = 1 AND seq = {entry.seq}"
        )
        prev = entry.hash
    statements.append(f"UPDATE incidents SET log_head = '{prev}', log_mac = NULL WHERE number = 1")
    return statements, count, "carries no MAC"


ATTACKS = {
    "truncate-newest-and-move-head": _truncate,
    "edit-an-entry": _edit,
    "forge-a-plain-append": _forge_append,
    "rewrite-as-a-plain-chain": _rewrite_plain,
}


@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_log_verify_with_the_key_names_the_entry_after_each_tampering(
    site: Site,
    clock: FrozenClock,
    run: Run,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    attack: str,
) -> None:
    count = _build(site, clock)
    key_file = tmp_path / "log-key"
    key_file.write_bytes(KEY + b"\n")
    monkeypatch.setenv("RUNBOOK_BOT_DATABASE_URL", site.url)
    monkeypatch.setenv("RUNBOOK_BOT_LOG_KEY_FILE", str(key_file))
    code, out, err = run("log", "verify")
    assert (code, err) == (0, ""), err
    assert "every entry intact (HMAC under the log key)" in out

    statements, first_bad, reason = ATTACKS[attack](site, count)
    site.tamper(statements)

    code, out, err = run("log", "verify")
    assert code == 1
    assert f"INC-1 log entry #{first_bad}: " in err
    assert reason in err
    assert "log verified" not in out
    assert KEY.decode() not in out + err


def test_logs_written_before_the_key_verify_as_the_plain_chain_and_say_where_the_hmac_starts(
    db_url: str,
    clock: FrozenClock,
    run: Run,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    before = Database(db_url)  # no key yet: plain SHA-256 entries
    settings = load_settings(database_url=db_url)
    try:
        with (
            server.running(settings, before, clock) as base,
            httpx.Client(base_url=base, timeout=30) as client,
        ):
            assert client.post(HOOK, json=fixture("xid79-firing.json")).status_code == 200
            second = notification([alert(gpu=2, host="gpu-node-03")])
            assert client.post(HOOK, json=second).json()["incident"] == "INC-2"
    finally:
        before.dispose()

    key_file = tmp_path / "log-key"
    key_file.write_bytes(KEY)
    monkeypatch.setenv("RUNBOOK_BOT_DATABASE_URL", db_url)
    monkeypatch.setenv("RUNBOOK_BOT_LOG_KEY_FILE", str(key_file))
    keyed_settings = load_settings()
    with caplog.at_level("DEBUG"), common.database(keyed_settings) as db:
        common.seal_log_heads(db)  # what the worker does when it starts with the key
        clock.advance(timedelta(minutes=1))
        with db.transaction() as session:
            service.acknowledge(session, 1, actor=Actor.human("alice"), at=clock.now())
    assert "sealed the heads of 2 incident logs" in caplog.text
    assert KEY.decode() not in caplog.text

    code, out, err = run("log", "verify")
    assert (code, err) == (0, "")
    assert "INC-1: plain SHA-256 chain #1-#2, HMAC from entry #3" in out
    assert "INC-2: entries #1-#2 are a plain SHA-256 chain (written before the key)" in out
    assert "every entry intact (HMAC under the log key)" in out

    # A plain entry appended to the sealed pre-key log, head moved: caught by the head MAC.
    raw = Database(db_url)
    try:
        with raw.session() as session:
            last = log.entries(session, 2)[-1]
        forged = _plain_entry(last, 3, "forged", last.hash)
        with raw.engine.begin() as conn:
            if raw.is_postgres:
                conn.exec_driver_sql("SET LOCAL session_replication_role = replica")
            conn.exec_driver_sql(_insert(forged, raw.engine.dialect.name))
            conn.execute(
                text("UPDATE incidents SET log_seq = 3, log_head = :h WHERE number = 2"),
                {"h": forged.hash},
            )
    finally:
        raw.dispose()
    code, out, err = run("log", "verify", "INC-2")
    assert code == 1
    assert "INC-2 log entry #3: the incident's head (entry #3) does not match its MAC" in err


def test_a_short_log_key_stops_the_start_without_showing_it(
    tmp_path: Path, run: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    key_file = tmp_path / "log-key"
    key_file.write_bytes(b"short-secret-key")
    monkeypatch.setenv("RUNBOOK_BOT_LOG_KEY_FILE", str(key_file))
    code, out, err = run("config")
    assert code == 2
    assert "holds 16 bytes; the log key needs at least 32" in err
    assert "short-secret-key" not in out + err

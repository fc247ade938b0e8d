"""A table locked by another session, or a statement stuck behind one, answers 503 with
Retry-After in seconds instead of hanging the request; `/readyz` sees the lock; once it is
released the retry is stored once. Every statement runs on the real PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta

import httpx
import psycopg
import pytest
from sqlalchemy import text
from sqlalchemy.engine import make_url

from bot.cli import common
from bot.clock import FrozenClock
from bot.config import load_settings
from bot.db import Database
from bot.errors import StorageUnavailable
from tests.support import server
from tests.support.payloads import fixture
from tests.support.rows import counts

HOOK = "/webhooks/alertmanager"
pytestmark = pytest.mark.postgres


def _libpq(url: str) -> str:
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


@contextmanager
def _locked(url: str, table: str) -> Iterator[psycopg.Connection[tuple[object, ...]]]:
    """Another session holding `table` in ACCESS EXCLUSIVE mode, in an open transaction,
    until the block ends (then rolled back)."""
    holder = psycopg.connect(_libpq(url), connect_timeout=5)
    try:
        holder.execute(f"LOCK TABLE {table} IN ACCESS EXCLUSIVE MODE")  # type: ignore[arg-type]
        yield holder
    finally:
        holder.rollback()
        holder.close()


def test_a_locked_alerts_table_answers_503_and_readyz_fails_until_it_is_released(
    pg_url: str, clock: FrozenClock
) -> None:
    settings = load_settings(database_url=pg_url, database_lock_timeout="1s")
    db = Database(pg_url, lock_timeout=settings.database_lock_timeout)
    try:
        with (
            server.running(settings, db, clock) as base,
            httpx.Client(base_url=base, timeout=30) as client,
        ):
            assert client.get("/readyz").status_code == 200
            with _locked(pg_url, "alerts"):
                refused = client.post(HOOK, json=fixture("xid79-firing.json"))
                not_ready = client.get("/readyz")
            retried = client.post(HOOK, json=fixture("xid79-firing.json"))
            ready = client.get("/readyz")

        assert refused.status_code == 503, refused.text
        assert refused.headers["retry-after"] == "10"
        assert "is locked by another session" in refused.json()["error"]
        assert not_ready.status_code == 503
        assert "lock" in not_ready.json()["reason"]
        assert retried.status_code == 200, retried.text
        assert retried.json()["opened"] is True
        assert ready.status_code == 200
        assert counts(db) == {"incidents": 1, "alerts": 1, "log": 2}
    finally:
        db.dispose()


def test_a_statement_past_statement_timeout_is_storage_unavailable(pg_url: str) -> None:
    db = Database(pg_url, statement_timeout=timedelta(milliseconds=200))
    try:
        with pytest.raises(StorageUnavailable, match="statement_timeout"), db.transaction() as s:
            s.execute(text("SELECT pg_sleep(5)"))
        with db.session() as session:  # the connection went back to the pool usable
            assert session.execute(text("SELECT 1")).scalar() == 1
    finally:
        db.dispose()


def test_request_and_worker_sessions_carry_their_own_timeouts(pg_url: str) -> None:
    settings = load_settings(
        database_url=pg_url,
        database_lock_timeout="2s",
        database_statement_timeout="4s",
        database_worker_lock_timeout="20s",
        database_worker_statement_timeout="40s",
    )
    shown: dict[bool, tuple[object, object]] = {}
    for worker in (False, True):
        with common.database(settings, worker=worker) as db, db.session() as session:
            shown[worker] = (
                session.execute(text("SHOW lock_timeout")).scalar(),
                session.execute(text("SHOW statement_timeout")).scalar(),
            )

    assert shown == {False: ("2s", "4s"), True: ("20s", "40s")}

"""Durable before acknowledged: with the database gone the webhook answers 503, which
Alertmanager retries, stores nothing half-way, and recovers when the database returns."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path

import httpx
import pytest
from sqlalchemy.engine import make_url

from bot.clock import FrozenClock
from bot.config import load_settings
from bot.db import Database
from tests.support import server
from tests.support.payloads import alert, fixture, notification
from tests.support.rows import counts
from tests.support.tcpproxy import TcpProxy

HOOK = "/webhooks/alertmanager"


@contextmanager
def _serve(url: str, clock: FrozenClock) -> Iterator[tuple[httpx.Client, Database]]:
    db = Database(url, connect_timeout=timedelta(seconds=1))
    with (
        server.running(load_settings(database_url=url), db, clock) as base,
        httpx.Client(base_url=base, timeout=15) as client,
    ):
        yield client, db
    db.dispose()


@pytest.mark.parametrize(
    "url",
    [
        "postgresql+psycopg://postgres@127.0.0.1:1/nowhere",
        "sqlite:////nonexistent-dir/runbook-bot.db",
    ],
    ids=["postgresql-refused", "sqlite-unopenable"],
)
def test_unreachable_database_gets_503_with_retry_after_and_readyz_fails(
    url: str, clock: FrozenClock
) -> None:
    with _serve(url, clock) as (client, _):
        response = client.post(HOOK, json=fixture("xid79-firing.json"))

        assert response.status_code == 503
        assert response.headers["retry-after"] == "10"
        assert "is unavailable" in response.json()["error"]
        assert "check that it is running" in response.json()["error"]
        assert client.get("/readyz").status_code == 503
        assert client.get("/healthz").status_code == 200


def test_locked_sqlite_gets_503_and_the_retry_is_stored_once(
    templates: object, tmp_path: Path, clock: FrozenClock
) -> None:
    from tests.support.databases import Templates

    assert isinstance(templates, Templates)
    url = templates.sqlite_copy(tmp_path / "locked.db")
    holder = sqlite3.connect(str(tmp_path / "locked.db"), isolation_level=None)
    with _serve(url, clock) as (client, db):
        holder.execute("BEGIN IMMEDIATE")  # another writer holds the lock past the timeout
        refused = client.post(HOOK, json=fixture("xid79-firing.json"))
        holder.execute("ROLLBACK")
        retried = client.post(HOOK, json=fixture("xid79-firing.json"))

        assert refused.status_code == 503
        assert "locked" in refused.json()["error"]
        assert retried.status_code == 200
        assert retried.json()["opened"] is True
        assert counts(db) == {"incidents": 1, "alerts": 1, "log": 2}
    holder.close()


def test_postgres_outage_gets_503_and_service_resumes_when_it_returns(
    pg_url: str, clock: FrozenClock
) -> None:
    real = make_url(pg_url)
    proxy = TcpProxy((real.host or "127.0.0.1", real.port or 5432))
    url = real.set(host="127.0.0.1", port=proxy.port).render_as_string(hide_password=False)
    try:
        with _serve(url, clock) as (client, db):
            assert client.post(HOOK, json=notification([alert(gpu=1)])).status_code == 200

            proxy.cut()
            during = client.post(HOOK, json=notification([alert(gpu=2, host="gpu-node-03")]))
            proxy.restore()
            after = client.post(HOOK, json=notification([alert(gpu=2, host="gpu-node-03")]))

            assert during.status_code == 503
            assert after.status_code == 200
            assert after.json()["incident"] == "INC-2"  # the refused post left no trace
            assert counts(db)["incidents"] == 2
    finally:
        proxy.close()

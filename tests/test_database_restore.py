"""A database dropped, recreated and migrated under the running app (a restore) serves new
incidents at once: nothing in the process remembers rows the database no longer holds.

Once, a per-process cache of stored runbook documents made every new incident fail on the
`runbook_digest` foreign key after a restore, with 500, until the bot was restarted, while
`/readyz` said 200.
"""

from __future__ import annotations

import time
from pathlib import Path

import httpx
from sqlalchemy import func, select
from sqlalchemy.engine import make_url

from bot import migrations
from bot.clock import FrozenClock
from bot.config import load_settings
from bot.db import Database
from bot.runbooks import catalog as catalogs
from bot.runbooks.models import IncidentRunbook, RunbookVersion
from tests.support import server
from tests.support.databases import _admin
from tests.support.payloads import fixture
from tests.support.rows import counts

HOOK = "/webhooks/alertmanager"
RUNBOOKS = Path(__file__).resolve().parents[1] / "runbooks"


def _restore(url: str) -> None:
    """Drop the database, create it empty and migrate it, from outside the app."""
    if url.startswith("postgresql"):
        name = make_url(url).database
        _admin(f"DROP DATABASE {name} WITH (FORCE)")  # the app's sessions are cut
        _admin(f"CREATE DATABASE {name}")
    else:  # SQLite: the file stays open in the app's pool; drop every table instead
        dropping = Database(url)
        migrations.downgrade(dropping, "base")
        dropping.dispose()
    fresh = Database(url)
    migrations.upgrade(fresh)
    fresh.dispose()


def _until_ready(client: httpx.Client) -> int:
    """/readyz, asked until it answers 200 (a pooled session the drop cut fails once, as
    it would for Alertmanager's first retry); the last status."""
    status = 0
    for _ in range(20):
        status = client.get("/readyz").status_code
        if status == 200:
            break
        time.sleep(0.1)
    return status


def _frozen(db: Database) -> tuple[int, int]:
    with db.session() as session:
        return (
            session.scalar(select(func.count()).select_from(IncidentRunbook)) or 0,
            session.scalar(select(func.count()).select_from(RunbookVersion)) or 0,
        )


def test_a_new_alert_opens_an_incident_with_its_runbook_after_a_restore_without_restart(
    db_url: str, clock: FrozenClock
) -> None:
    settings = load_settings(database_url=db_url, runbooks_dir=RUNBOOKS)
    db = Database(db_url)
    try:
        with (
            server.running(settings, db, clock, catalog=catalogs.load(settings)) as base,
            httpx.Client(base_url=base, timeout=30) as client,
        ):
            before = client.post(HOOK, json=fixture("xid79-firing.json"))
            assert before.status_code == 200, before.text
            assert _frozen(db) == (1, 1)

            _restore(db_url)
            ready = _until_ready(client)
            assert counts(db) == {"incidents": 0, "alerts": 0, "log": 0}
            after = client.post(HOOK, json=fixture("xid79-firing.json"))

        assert ready == 200
        assert after.status_code == 200, after.text
        assert after.json()["opened"] is True
        assert _frozen(db) == (1, 1)  # the runbook frozen onto it, its document stored again
        assert counts(db)["incidents"] == 1
    finally:
        db.dispose()

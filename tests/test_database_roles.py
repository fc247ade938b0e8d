"""The bot's own database role cannot rewrite the incident log: it owns no table, and may
only INSERT and SELECT the log. Set up as the chart does (owner migrates, `runbook-bot db
upgrade` grants the runtime role), on the real PostgreSQL; then, as the runtime role, every
way to edit or hide an entry is refused while ingest and log appends work."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import httpx
import pytest
from psycopg import errors
from sqlalchemy.engine import make_url

from bot import migrations
from bot.clock import FrozenClock
from bot.config import load_settings
from bot.db import Database
from bot.incidents import log, service
from bot.incidents.log import Actor
from tests.support import server
from tests.support.payloads import fixture
from tests.support.pg_roles import Roles, two_roles
from tests.support.rows import counts, verifies

pytestmark = pytest.mark.postgres
HOOK = "/webhooks/alertmanager"
KEY = b"k" * 32


@pytest.fixture
def roles(monkeypatch: pytest.MonkeyPatch) -> Iterator[Roles]:
    with two_roles(monkeypatch) as made:
        yield made


@pytest.mark.parametrize(
    "sql",
    [
        "UPDATE incident_log SET summary = 'nothing happened' WHERE seq = 1",
        "DELETE FROM incident_log WHERE seq = 2",
        "TRUNCATE incident_log",
        "ALTER TABLE incident_log DISABLE TRIGGER USER",
        "ALTER TABLE incident_log DISABLE TRIGGER incident_log_append_only",
        "DROP TRIGGER incident_log_append_only ON incident_log",
        "SET session_replication_role = replica",
        "UPDATE runbook_versions SET document = '{}'",
    ],
    ids=[
        "update",
        "delete",
        "truncate",
        "disable-triggers",
        "disable-one-trigger",
        "drop-trigger",
        "replica-mode",
        "update-runbook-document",
    ],
)
def test_the_runtime_role_ingests_and_appends_but_cannot_rewrite_the_log(
    roles: Roles, clock: FrozenClock, sql: str
) -> None:
    db = Database(roles.runtime_url, log_key=KEY)
    try:
        settings = load_settings(database_url=roles.runtime_url)
        with (
            server.running(settings, db, clock) as base,
            httpx.Client(base_url=base, timeout=30) as client,
        ):
            opened = client.post(HOOK, json=fixture("xid79-firing.json"))
            assert opened.status_code == 200, opened.text
            assert client.get("/readyz").status_code == 200
        clock.advance(timedelta(minutes=1))
        with db.transaction() as session:  # a log append through the normal path
            service.acknowledge(session, 1, actor=Actor.human("alice"), at=clock.now())
        with db.session() as session:
            before = [(e.seq, e.summary, e.hash) for e in log.entries(session, 1)]
        assert len(before) == 3

        with roles.connect(roles.runtime_url) as attacker:
            assert attacker.execute("SELECT current_user").fetchone() == (roles.runtime,)
            with pytest.raises(errors.InsufficientPrivilege):
                attacker.execute(sql)  # type: ignore[arg-type]

        with db.session() as session:
            assert [(e.seq, e.summary, e.hash) for e in log.entries(session, 1)] == before
        assert counts(db) == {"incidents": 1, "alerts": 1, "log": 3}
        assert verifies(db, 1)
    finally:
        db.dispose()


def test_the_runtime_role_owns_no_table_and_upgrade_refuses_one_that_does(
    roles: Roles, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from bot.cli import main

    for url, owns in ((roles.runtime_url, False), (roles.owner_url, True)):
        probe = Database(url)
        try:
            assert migrations.owns_log(probe) is owns  # serve warns when it runs as the owner
        finally:
            probe.dispose()
    with roles.connect(roles.owner_url) as dba:
        owners = dba.execute(
            "SELECT DISTINCT tableowner FROM pg_tables WHERE schemaname = 'public'"
        )
        assert owners.fetchall() == [(roles.owner,)]
        granted = dba.execute(
            "SELECT privilege_type FROM information_schema.role_table_grants "
            "WHERE grantee = %s AND table_name = 'incident_log' ORDER BY 1",
            (roles.runtime,),
        ).fetchall()
        assert granted == [("INSERT",), ("SELECT",)]
    superuser = make_url(roles.owner_url).set(username="postgres")
    with roles.connect(superuser.render_as_string(hide_password=False)) as dba:
        dba.execute(f"ALTER TABLE incident_log OWNER TO {roles.runtime}")  # type: ignore[arg-type]
        dba.commit()  # as a one-role install left it

    monkeypatch.setenv("RUNBOOK_BOT_DATABASE_URL", roles.runtime_url)
    monkeypatch.setenv("RUNBOOK_BOT_DATABASE_MIGRATION_URL", roles.owner_url)
    capsys.readouterr()
    assert main(["db", "upgrade"]) == 2
    err = capsys.readouterr().err
    assert f"database role {roles.runtime} (the user of database_url) owns the tables" in err
    assert "REASSIGN OWNED BY" in err

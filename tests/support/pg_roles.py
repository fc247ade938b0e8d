"""A PostgreSQL database set up as docs/security.md and the Helm chart set it up: an owner
role that owns the database and migrates it, and a runtime role the bot runs as, granted by
`runbook-bot db upgrade` (alembic/runtime_grants.sql) exactly as the chart's migrations Job
runs it. Role and database names carry a random part, so parallel workers never meet."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import psycopg
import pytest
from sqlalchemy.engine import make_url

from bot.cli import main
from tests.support.databases import _admin, _pg_url, require_postgres


@dataclass(frozen=True)
class Roles:
    owner: str
    runtime: str
    owner_url: str
    runtime_url: str

    def connect(self, url: str) -> psycopg.Connection[tuple[object, ...]]:
        """A plain libpq session as the role of `url` (an attacker's, or a DBA's)."""
        target = make_url(url).set(drivername="postgresql")
        return psycopg.connect(target.render_as_string(hide_password=False), connect_timeout=5)


def _as(url: str, user: str) -> str:
    return make_url(url).set(username=user).render_as_string(hide_password=False)


@contextmanager
def two_roles(monkeypatch: pytest.MonkeyPatch) -> Iterator[Roles]:
    """A fresh database owned by a new owner role, migrated and granted through the CLI
    (`RUNBOOK_BOT_DATABASE_MIGRATION_URL` as the owner, `RUNBOOK_BOT_DATABASE_URL` as
    the runtime role); both roles and the database dropped afterwards."""
    require_postgres()
    suffix = uuid.uuid4().hex[:10]
    owner, runtime, name = f"rbb_owner_{suffix}", f"rbb_bot_{suffix}", f"rbb_roles_{suffix}"
    _admin(f"CREATE ROLE {owner} LOGIN")
    _admin(f"CREATE ROLE {runtime} LOGIN")
    _admin(f"CREATE DATABASE {name} OWNER {owner}")
    url = _pg_url(name)
    roles = Roles(owner, runtime, _as(url, owner), _as(url, runtime))
    try:
        with monkeypatch.context() as env:
            env.setenv("RUNBOOK_BOT_DATABASE_URL", roles.runtime_url)
            env.setenv("RUNBOOK_BOT_DATABASE_MIGRATION_URL", roles.owner_url)
            assert main(["db", "upgrade"]) == 0
        yield roles
    finally:
        _admin(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        for role in (runtime, owner):
            _admin(f"DROP ROLE IF EXISTS {role}")

"""Fresh, migrated databases per test, on SQLite and on the real PostgreSQL.

Migrations run once per session into a template (a file for SQLite, a template database
for PostgreSQL); each test gets a copy, so tests that commit never see each other. Every
PostgreSQL name carries the process id or a random part, so parallel workers never meet.
`RUNBOOK_BOT_TEST_BACKENDS` (tests/support/ci.py) picks the backends, all by default.
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg

from bot import migrations
from bot.db import Database
from tests.support.ci import skip_or_fail

PG_ADMIN = os.environ.get("RUNBOOK_BOT_TEST_PG", "postgresql://postgres@127.0.0.1:5432/postgres")


def require_postgres() -> None:
    """Skip locally, fail in CI, when the PostgreSQL server is not reachable."""
    try:
        with psycopg.connect(PG_ADMIN, connect_timeout=3):
            return
    except psycopg.OperationalError as exc:
        skip_or_fail(
            f"PostgreSQL not reachable at {PG_ADMIN}: {str(exc).strip()}",
            install="apt-get install postgresql, or set RUNBOOK_BOT_TEST_PG to a server URL",
        )


def _admin(sql: str) -> None:
    with psycopg.connect(PG_ADMIN, autocommit=True, connect_timeout=5) as conn:
        conn.execute(sql)  # type: ignore[arg-type]


def _pg_url(name: str) -> str:
    base = PG_ADMIN.rsplit("/", 1)[0].replace("postgresql://", "postgresql+psycopg://", 1)
    return f"{base}/{name}"


class Templates:
    """Session-wide migrated templates, created on first use."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.sqlite: Path | None = None
        self.pg: str | None = None

    def sqlite_copy(self, target: Path) -> str:
        if self.sqlite is None:
            path = self.tmp / "template.db"
            db = Database(f"sqlite:///{path}")
            migrations.upgrade(db)
            db.dispose()  # the last connection to close checkpoints and removes the WAL
            self.sqlite = path
        shutil.copy(self.sqlite, target)
        return f"sqlite:///{target}"

    def pg_copy(self) -> str:
        require_postgres()
        if self.pg is None:
            name = f"rbb_template_{os.getpid()}"
            _admin(f"DROP DATABASE IF EXISTS {name}")
            _admin(f"CREATE DATABASE {name}")
            db = Database(_pg_url(name))
            migrations.upgrade(db)
            db.dispose()
            self.pg = name
        name = f"rbb_{uuid.uuid4().hex[:12]}"
        _admin(f"CREATE DATABASE {name} TEMPLATE {self.pg}")
        return name

    def drop_all(self) -> None:
        if self.pg is not None:
            _admin(f"DROP DATABASE IF EXISTS {self.pg} WITH (FORCE)")


@contextmanager
def fresh_database(templates: Templates, backend: str, tmp: Path) -> Iterator[str]:
    """Yield the URL of a migrated, empty database of `backend`; drop it afterwards."""
    if backend == "sqlite":
        yield templates.sqlite_copy(tmp / "bot.db")
        return
    name = templates.pg_copy()
    try:
        yield _pg_url(name)
    finally:
        _admin(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")

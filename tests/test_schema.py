"""The schema only through migrations: models match them, and serve guards the revision."""

from __future__ import annotations

import importlib
import os
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import httpx
import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext

import bot.chat.models  # noqa: F401  (registers the tables)
import bot.escalation.models  # noqa: F401
import bot.incidents.models  # noqa: F401
import bot.people.models  # noqa: F401
import bot.postmortem.models  # noqa: F401
import bot.runbooks.models  # noqa: F401
from bot import cli
from bot.db import Base, Database
from tests.support.databases import PG_ADMIN, _admin, _pg_url, require_postgres


def test_models_match_the_migrations(db: Database) -> None:
    with db.engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn), Base.metadata)

    assert diff == []


def test_serve_refuses_postgres_with_pending_migrations(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    require_postgres()
    name = f"rbb_empty_{uuid.uuid4().hex[:8]}"
    _admin(f"CREATE DATABASE {name}")
    try:
        monkeypatch.setenv("RUNBOOK_BOT_DATABASE_URL", _pg_url(name))
        code = cli.main(["serve", "--port", "1"])
    finally:
        _admin(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")

    assert code == 1
    err = capsys.readouterr().err
    assert "schema revision none (empty)" in err
    assert "run `runbook-bot db upgrade` first" in err
    assert PG_ADMIN  # the admin URL the fixtures use is the one this test created on


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


NO_ROLE = "nobody holds a role"
NO_LOGIN = "no console user exists"


@pytest.mark.parametrize(
    ("settings", "warned"),
    [
        ({}, [NO_ROLE, NO_LOGIN]),
        (
            {
                "RUNBOOK_BOT_PEOPLE": '{"alice": {"roles": ["responder"]}}',
                "RUNBOOK_BOT_CONSOLE": '{"admin_token": "0123456789abcdef-token"}',
            },
            [],
        ),
    ],
    ids=["defaults", "people-and-a-login"],
)
def test_serve_on_a_fresh_sqlite_file_migrates_and_becomes_ready(
    tmp_path: Path, settings: dict[str, str], warned: list[str]
) -> None:
    port = _free_port()
    env = {**os.environ, "RUNBOOK_BOT_LISTEN_PORT": str(port), **settings}
    proc = subprocess.Popen(
        [sys.executable, "-m", "bot.cli", "serve"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 30
        status = None
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                status = httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=2).status_code
                break
            except httpx.TransportError:
                time.sleep(0.1)
        assert status == 200, "serve did not become ready"
        assert (tmp_path / "runbook-bot.db").is_file()
    finally:
        proc.terminate()
        output = proc.communicate(timeout=15)[0].decode()
    assert f"listening on http://127.0.0.1:{port}" in output
    assert [
        line for line in (NO_ROLE, NO_LOGIN) if f"WARNING bot.cli.server: {line}" in output
    ] == warned


@pytest.mark.parametrize("package", ["bot", "bot.alerts", "bot.incidents", "bot.people"])
def test_packages_export_exactly_their_public_names(package: str) -> None:
    module = importlib.import_module(package)
    modules = {n for n, v in vars(module).items() if isinstance(v, type(module))}
    public = {n for n in vars(module) if not n.startswith("_") and n not in modules}

    assert {n for n in module.__all__ if n not in modules} - {"__version__"} == public
    assert all(hasattr(module, name) for name in module.__all__)

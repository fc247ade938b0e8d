"""Fixtures: every test that takes `db` runs on SQLite and on the real PostgreSQL."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from bot.cli import main
from bot.clock import FrozenClock
from bot.config import Settings, load_settings
from bot.db import Database
from tests.support import server
from tests.support.ci import backends, environment_problems
from tests.support.cli import Run
from tests.support.databases import Templates, fresh_database
from tests.support.payloads import fixture


@pytest.fixture(scope="session")
def templates(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Templates]:
    store = Templates(tmp_path_factory.mktemp("templates"))
    yield store
    store.drop_all()


@pytest.fixture(params=backends())
def backend(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    return name


@pytest.fixture
def db_url(templates: Templates, backend: str, tmp_path: Path) -> Iterator[str]:
    with fresh_database(templates, backend, tmp_path) as url:
        yield url


@pytest.fixture
def pg_url(templates: Templates, tmp_path: Path) -> Iterator[str]:
    """A fresh PostgreSQL database, for behaviour only PostgreSQL has."""
    with fresh_database(templates, "postgresql", tmp_path) as url:
        yield url


@pytest.fixture
def db(db_url: str) -> Iterator[Database]:
    database = Database(db_url)
    yield database
    database.dispose()


@pytest.fixture
def clock() -> FrozenClock:
    return FrozenClock(datetime(2026, 11, 29, 22, 5, 30, tzinfo=UTC))


@pytest.fixture
def settings(db_url: str) -> Settings:
    return load_settings(database_url=db_url)


@pytest.fixture
def serve(db: Database, clock: FrozenClock, db_url: str) -> Iterator[Callable[..., httpx.Client]]:
    """Start the real app on loopback with extra settings; return an httpx client for it."""
    stack: list[Any] = []

    def start(**overrides: Any) -> httpx.Client:
        settings = load_settings(database_url=db_url, **overrides)
        ctx = server.running(settings, db, clock)
        url = ctx.__enter__()
        stack.append(ctx)
        client = httpx.Client(base_url=url, timeout=10)
        stack.append(client)
        return client

    yield start
    for item in reversed(stack):
        if isinstance(item, httpx.Client):
            item.close()
        else:
            item.__exit__(None, None, None)


@pytest.fixture
def client(serve: Callable[..., httpx.Client]) -> httpx.Client:
    return serve()


@pytest.fixture
def run(capsys: pytest.CaptureFixture[str]) -> Run:
    """Run the CLI in-process with these arguments; return (exit code, stdout, stderr)."""

    def invoke(*argv: str) -> tuple[int, str, str]:
        capsys.readouterr()
        code = main(list(argv))
        out, err = capsys.readouterr()
        return code, out, err

    return invoke


@pytest.fixture
def on_db(db_url: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """Point the CLI at the test's database."""
    monkeypatch.setenv("RUNBOOK_BOT_DATABASE_URL", db_url)
    return db_url


@pytest.fixture
def inc1(client: httpx.Client, on_db: str) -> int:
    """INC-1 (critical), opened by the recorded XID 79 firing notification through the live
    server."""
    response = client.post("/webhooks/alertmanager", json=fixture("xid79-firing.json"))
    assert response.status_code == 200, response.text
    assert response.json()["incident"] == "INC-1"
    return 1


TESTS = Path(__file__).parent
ONE_WORKER_EACH = ("chaos", "browser")
"""Packages whose tests run one after another on one worker (pytest-xdist's loadgroup): the
chaos storms load the machine on purpose, and the browser tests share one Chromium and one
demo per worker. The rest are spread over the workers in any order."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if TESTS in item.path.parents:
            package = item.path.relative_to(TESTS).parts[0]
            if package in ONE_WORKER_EACH:
                item.add_marker(pytest.mark.xdist_group(package))


def pytest_configure(config: pytest.Config) -> None:
    # A run that would test less than it claims stops here, before collection.
    problems = environment_problems()
    if problems:
        raise pytest.UsageError("\n".join(problems))
    # Settings must not leak in from the developer's shell.
    import os

    for key in list(os.environ):
        if key.startswith("RUNBOOK_BOT_") and not key.startswith("RUNBOOK_BOT_TEST_"):
            del os.environ[key]
    # Nor the terminal's: the CLI's output a test reads is a pipe's, as wide as its lines
    # (pytest-xdist's workers have COLUMNS=80); tests of widths and colour set them.
    for key in TERMINAL_ENVIRONMENT:
        os.environ.pop(key, None)


TERMINAL_ENVIRONMENT = ("COLUMNS", "LINES", "FORCE_COLOR", "NO_COLOR", "TTY_COMPATIBLE")


__all__ = ["Settings"]

"""Fixtures of the console tests: the console rig on SQLite and PostgreSQL, and the
simulated cluster the runbooks' actions reach."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from bot.clock import FrozenClock
from bot.db import Database
from bot.sim import SimHandle, running, seed
from tests.console.rig import ConsoleRig, browser
from tests.sim.waiting import TIME_SCALE


@pytest.fixture
def sim() -> Iterator[SimHandle]:
    with running(seed(grace_seconds=5, startup_seconds=2), time_scale=TIME_SCALE) as handle:
        yield handle


@pytest.fixture
def rig(db: Database, clock: FrozenClock, tmp_path: Path) -> ConsoleRig:
    return ConsoleRig(db, clock, tmp_path)


@pytest.fixture
def url(rig: ConsoleRig) -> Iterator[str]:
    """The real app with the console, served on loopback."""
    with rig.serving() as base:
        yield base


@pytest.fixture
def browsers(url: str) -> Iterator[Callable[[], httpx.Client]]:
    """Open clients, each with its own cookie jar (a person's browser)."""
    opened: list[httpx.Client] = []

    def open_one() -> httpx.Client:
        opened.append(browser(url))
        return opened[-1]

    yield open_one
    for client in opened:
        client.close()

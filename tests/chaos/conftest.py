"""Fixtures of the chaos suite: the simulated cluster with BMCs, the fake Slack, real
`serve` processes (always killed at the end), and the figures each test records."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest

from bot.sim import SimHandle, seed
from tests.chaos import figures as figures_file
from tests.chaos.bots import Bot, Record
from tests.chaos.figures import figures_path
from tests.runbooks.drive import simulator
from tests.support import fake_slack
from tests.support.fake_slack import FakeSlack


@pytest.fixture
def sim_nodes() -> int:
    return 8


@pytest.fixture
def sim(sim_nodes: int) -> Iterator[SimHandle]:
    with simulator(seed(nodes=sim_nodes, grace_seconds=5, startup_seconds=2)) as handle:
        yield handle


@pytest.fixture
def slack() -> Iterator[FakeSlack]:
    with fake_slack.running() as handle:
        yield handle


@pytest.fixture
def bots(tmp_path: Path) -> Iterator[Callable[..., Bot]]:
    """Make `serve` processes; every one is killed when the test ends, whatever it did."""
    made: list[Bot] = []

    def make(name: str, settings: dict[str, Any]) -> Bot:
        bot = Bot(name, settings, tmp_path / name)
        made.append(bot)
        return bot

    with ExitStack() as stack:
        stack.callback(lambda: [bot.stop() for bot in made])
        yield make


@pytest.fixture
def record(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Record:
    """`record(rows)`: this test's rows for docs/reliability.md (see tests/chaos/figures.py)."""
    path = figures_path(tmp_path_factory.getbasetemp() / "chaos-figures.json")

    def write(rows: list[dict[str, Any]]) -> None:
        figures_file.record(path, request.node.nodeid, rows)

    return write

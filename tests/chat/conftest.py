"""Fixtures of the chat tests: the simulated cluster, the fake Slack, and the bot on both."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from bot.clock import FrozenClock
from bot.db import Database
from bot.sim import SimHandle, running, seed
from tests.chat.slack_rig import GROUPS, Chat
from tests.sim.waiting import TIME_SCALE
from tests.support import fake_slack, server
from tests.support.fake_slack import FakeSlack


@pytest.fixture
def sim() -> Iterator[SimHandle]:
    with running(seed(grace_seconds=5, startup_seconds=2), time_scale=TIME_SCALE) as handle:
        yield handle


@pytest.fixture
def slack() -> Iterator[FakeSlack]:
    with fake_slack.running(usergroups=GROUPS) as fake:
        yield fake


@pytest.fixture
def chat(
    db: Database, clock: FrozenClock, tmp_path: Path, slack: FakeSlack, sim: SimHandle
) -> Chat:
    return Chat(db, clock, tmp_path, slack, sim)


@pytest.fixture
def client(chat: Chat) -> Iterator[httpx.Client]:
    with (
        server.running(chat.settings, chat.rig.db, chat.rig.clock, slack=chat.app) as url,
        httpx.Client(base_url=url, timeout=10) as http,
    ):
        yield http

"""Fixtures for the simulator's tests: a running seed cluster with time sped up 50x and
a configured `kubernetes` ApiClient.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from bot.sim import SimHandle, running, seed
from tests.sim.waiting import TIME_SCALE


@pytest.fixture
def sim() -> Iterator[SimHandle]:
    with running(seed(grace_seconds=5, startup_seconds=2), time_scale=TIME_SCALE) as handle:
        yield handle


@pytest.fixture
def api(sim: SimHandle) -> Any:
    return sim.api_client()

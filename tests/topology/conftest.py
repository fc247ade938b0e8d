"""Fixtures for the topology room: a small fleet in the simulator (two rows, three leaf
switches) served on loopback, settings that read its topology labels, and a frozen clock
for the cache's staleness."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.config import Settings, load_settings
from bot.sim import Fleet, SimHandle, fleet, running
from bot.sim.fleet import LEVELS
from tests.sim.waiting import TIME_SCALE

NODES = 40
"""Two rows: row a holds 32 nodes (racks a1-a4), row b 8 (rack b1)."""


@pytest.fixture
def small_fleet() -> Fleet:
    return fleet(NODES)


@pytest.fixture
def fleet_sim(small_fleet: Fleet) -> Iterator[SimHandle]:
    with running(small_fleet.scenario, time_scale=TIME_SCALE) as handle:
        yield handle


@pytest.fixture
def fleet_settings(fleet_sim: SimHandle, tmp_path: Path) -> Settings:
    path = fleet_sim.write_kubeconfig(tmp_path / "kubeconfig")
    return load_settings(
        kubeconfig=path,
        kube_timeout="2s",
        topology={"levels": LEVELS, "max_staleness": "60s"},
    )

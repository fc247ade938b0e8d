"""Fixtures for the CLI's terminal output: the terminal's environment as a test sets it,
and the simulated cluster (with Redfish BMCs) the `action` command runs against."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from bot.sim import SimHandle, presets, running
from tests.bmc.conftest import redfish_sim, redfish_tls  # noqa: F401 (fixtures)
from tests.sim.waiting import TIME_SCALE

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
"""An escape sequence: colour, bold, a cursor move."""


def plain(text: str) -> str:
    """`text` without its escape sequences."""
    return ANSI.sub("", text)


@pytest.fixture
def crowded() -> Iterator[SimHandle]:
    """gpu-node-01 runs 12 pods, 3 of them under a budget that lets one go at a time."""
    scenario = presets.crowded_node(pods=12, under_pdb=3, max_unavailable=1)
    with running(scenario, time_scale=TIME_SCALE) as handle:
        yield handle


@pytest.fixture
def on_crowded(crowded: SimHandle, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> SimHandle:
    """The CLI pointed at `crowded` as an operator would, through the environment."""
    monkeypatch.setenv("RUNBOOK_BOT_KUBECONFIG", str(crowded.write_kubeconfig(tmp_path / "kc")))
    return crowded


@pytest.fixture
def on_bmcs(
    redfish_sim: SimHandle,  # noqa: F811 (the fixture imported above)
    redfish_tls: object,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> SimHandle:
    """The CLI pointed at a simulated cluster whose nodes have Redfish BMCs, through a
    settings file as an operator would write it."""
    bmc = redfish_sim.bmc_settings(tmp_path / "bmc-password", ca_file=redfish_tls.ca_file)  # type: ignore[attr-defined]
    bmc.update(timeout="2s", power_timeout="10s", attempts=3)
    kubeconfig = redfish_sim.write_kubeconfig(tmp_path / "kubeconfig")
    path = tmp_path / "settings.yaml"
    path.write_text(yaml.safe_dump({"kubeconfig": str(kubeconfig), "bmc": bmc}))
    monkeypatch.setenv("RUNBOOK_BOT_CONFIG", str(path))
    return redfish_sim

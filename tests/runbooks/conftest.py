"""Runbook files written into a temporary directory and what loading them reports; `rig`,
the bot's parts over one database (tests/runbooks/rig.py), and `sim`, a small simulated
cluster for it; and `drive`, the shipped runbooks end to end against the simulator
(tests/runbooks/drive.py)."""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from bot.clock import FrozenClock
from bot.db import Database
from bot.sim import SimHandle, running, seed
from tests.runbooks.drive import Drive, simulator
from tests.runbooks.rig import Rig
from tests.sim.waiting import TIME_SCALE

# A small valid runbook. Line numbers matter: tests point at its lines.
GOOD = """\
id: gpu-xid
title: {en: Single GPU fault, zh: 单卡故障}
version: 1
match:
  alerts: [GPUXIDError]
facts:
  node: "{{ labels.Hostname }}"
steps:
  - id: status
    title: Node status
    action: k8s.node_status
    with: {node: "{{ facts.node }}"}
  - id: cordon
    title: Cordon the node
    action: k8s.cordon
    with:
      node: "{{ facts.node }}"
"""

# Two steps, two facts, a `when`: the validator's tests point at its lines.
STEPS = """\
id: node-down
title: Node down
version: 1
match: {alerts: [NodeDown], labels: [{label: Hostname, regex: ".+"}]}
facts:
  node: "{{ labels.Hostname }}"
  bmc: "{{ facts.node }}-bmc"
steps:
  - id: status
    title: Power status
    action: bmc.power_status
    with: {node: "{{ facts.node }}"}
  - id: cycle
    title: Power cycle
    action: bmc.power_cycle
    with: {node: "{{ facts.node }}"}
    when: not steps.status.ok
"""

Write = Callable[..., Path]


def runbook(*, id: str = "gpu-xid", match: str = "alerts: [GPUXIDError]") -> str:
    """A minimal valid runbook with one read step, as one line per top-level key."""
    return (
        f"id: {id}\ntitle: t\nversion: 1\nmatch: {{{match}}}\n"
        "steps:\n  - {id: look, title: t, action: k8s.node_status, with: {node: n}}\n"
    )


@pytest.fixture
def write(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Write:
    """Write a runbook file (dedented) under the test's directory, which becomes the
    working directory so problems name files as `rb.yaml`, `dir/a.yaml`."""
    monkeypatch.chdir(tmp_path)

    def write_file(text: str | bytes, name: str = "rb.yaml") -> Path:
        path = Path(name)
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(text, bytes):
            path.write_bytes(text)
        else:
            path.write_text(textwrap.dedent(text), encoding="utf-8")
        return path

    return write_file


@pytest.fixture
def drive(db: Database, clock: FrozenClock, tmp_path: Path) -> Iterator[Drive]:
    """The shipped runbooks behind the served webhook, the seed cluster with Redfish
    BMCs, and a worker."""
    with (
        simulator(seed(grace_seconds=5, startup_seconds=2)) as sim,
        Drive(db, clock, tmp_path, sim).serving() as drive,
    ):
        yield drive


@pytest.fixture
def sim() -> Iterator[SimHandle]:
    """A small simulated cluster: pods leave within 5 s and start in 2, at TIME_SCALE."""
    with running(seed(grace_seconds=5, startup_seconds=2), time_scale=TIME_SCALE) as handle:
        yield handle


@pytest.fixture
def rig(db: Database, clock: FrozenClock, tmp_path: Path) -> Rig:
    """The bot's parts over `db` with no runbook written yet (a test module whose tests
    share one runbook overrides this with one that writes it)."""
    return Rig(db, clock, tmp_path)

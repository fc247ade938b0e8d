"""What a step's summary says as it goes (issue 21 item 7): waiting, who approved and how
many more are needed, approved by whom, and running (never the proposal's "needs one
person before ..." once it was approved). The real engine and the worker's claim."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.clock import FrozenClock
from bot.db import Database
from bot.runbooks import claims, service
from tests.runbooks.rig import Rig

RUNBOOK = """\
    id: gpu-xid
    title: Single GPU fault
    version: 1
    match: {alerts: [GPUXIDError]}
    facts:
      node: "{{ labels.Hostname }}"
    steps:
      - id: cycle
        title: Power cycle the node
        action: bmc.power_cycle
        with: {node: "{{ facts.node }}"}
"""


@pytest.fixture
def rig(db: Database, clock: FrozenClock, tmp_path: Path) -> Rig:
    rig = Rig(db, clock, tmp_path)
    rig.write(RUNBOOK)
    return rig


def summary(rig: Rig, number: int) -> str:
    _, rows = service.step_rows(rig.db, number)
    return rows[0].summary


def test_a_two_person_steps_summary_follows_its_approvals_and_its_run(rig: Rig) -> None:
    number = rig.fire(host="gpu-node-04")
    waiting = summary(rig, number)
    assert waiting.startswith("(node=gpu-node-04): needs 2 different people before ")

    rig.approve(number, "cycle", "alice")
    assert summary(rig, number).startswith(
        "(node=gpu-node-04): approved by alice; needs one more person before "
    )
    assert summary(rig, number).endswith(" UTC")

    rig.approve(number, "cycle", "bob")
    assert summary(rig, number) == "(node=gpu-node-04): approved by alice and bob"

    claimed = claims.claim(rig.db, owner="w1", settings=rig.settings, clock=rig.clock)
    assert claimed is not None and claimed.step == "cycle"
    running = summary(rig, number)
    assert running == "(node=gpu-node-04): running, approved by alice and bob"
    assert "needs" not in running and "before" not in running

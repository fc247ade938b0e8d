"""An admin's override of the circuit breaker's global cap, given with the approval of a
step over many nodes: it names how many of the step's nodes may pass the cap, only an
admin may give it, and the breaker logs each node it lets through. The simulated cluster
has 8 GPU nodes and the global cap is half of them (4)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from bot.clock import FrozenClock
from bot.db import Database
from bot.errors import ApprovalRefused
from bot.incidents import log
from bot.sim import SimHandle, running, seed
from tests.runbooks.rig import Rig
from tests.runbooks.test_for_each import NODES, WAIT, _cordoned, _open, _worker, runbook
from tests.sim.waiting import TIME_SCALE

FIVE = NODES[:5]


@pytest.fixture
def sim() -> Iterator[SimHandle]:
    with running(seed(nodes=8, grace_seconds=5, startup_seconds=2), time_scale=TIME_SCALE) as h:
        yield h


@pytest.fixture
def rig(db: Database, clock: FrozenClock, tmp_path: Path) -> Rig:
    # The per-action bound (3) does not apply to an approval that named its count; the
    # global cap does: min(64, 50 % of 8 GPU nodes) = 4.
    rig = Rig(
        db, clock, tmp_path, breaker_global_max_fraction=0.5, kube_timeout=timedelta(minutes=5)
    )
    rig.write(runbook(max_parallel=1))
    return rig


def _types(rig: Rig, number: int) -> list[str]:
    with rig.db.session() as session:
        return [e.type for e in log.entries(session, number)]


def test_without_an_override_the_global_cap_stops_the_fifth_node(rig: Rig, sim: SimHandle) -> None:
    number = _open(rig, FIVE)
    rig.approve(number, "cordon", "alice", count=5)

    worker = _worker(rig, sim)
    assert worker.run_once() is True
    assert worker.settle(WAIT) is True

    run = rig.runs(number)["cordon"]
    assert run.state == "failed"
    assert _cordoned(sim) == set(FIVE[:4])
    assert run.result is not None and run.result["failed"] == 1
    assert "breaker.override" not in _types(rig, number)


def test_an_admins_override_naming_the_count_lets_the_rest_through_and_is_logged(
    rig: Rig, sim: SimHandle
) -> None:
    number = _open(rig, FIVE)
    rig.approve(number, "cordon", "carol", count=5, override=1)  # carol is an admin

    assert rig.runs(number)["cordon"].override_count == 1
    worker = _worker(rig, sim)
    assert worker.run_once() is True
    assert worker.settle(WAIT) is True

    assert rig.runs(number)["cordon"].state == "succeeded"
    assert _cordoned(sim) == set(FIVE)
    types = _types(rig, number)
    assert "breaker.override_approved" in types
    assert types.count("breaker.override") == 1  # the one node past the cap


def test_only_an_admin_overrides_and_only_within_the_steps_nodes(rig: Rig) -> None:
    number = _open(rig, FIVE)

    with pytest.raises(ApprovalRefused, match="only an admin may override"):
        rig.approve(number, "cordon", "alice", count=5, override=1)
    with pytest.raises(ApprovalRefused, match="1 to 5, not 6"):
        rig.approve(number, "cordon", "carol", count=5, override=6)
    with pytest.raises(ApprovalRefused, match="count"):
        rig.approve(number, "cordon", "carol", override=1)
    assert rig.runs(number)["cordon"].override_count is None

"""The shipped gpu-xid runbook end to end: the recorded XID 79 alert on gpu-node-02 GPU 5,
the simulated cluster and its BMCs, the worker, and people approving what the risk asks.

A first drop is power-cycled, verified at level 3 and returned by two people; a second
drop of the same card within the week takes the RMA branch and the node stays cordoned.
An application XID only tells the job owner. A resettable XID is reset, verified at level
2 and returned by one person; a reset that fails falls through to the power cycle.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from bot.incidents import service as incidents
from bot.runbooks import engine
from tests.runbooks.drive import Drive
from tests.support.payloads import fixture, iso

NODE = "gpu-node-02"
UUID = "GPU-66486582-0000-0000-0000-000000000005"
OTHER_CARD = "GPU-11111111-2222-3333-4444-555555555555"
NODE_PATH = f"/api/v1/nodes/{NODE}"
RECOVERY = {
    "cordon": ("alice",),
    "drain": ("bob",),
    "power_cycle": ("alice", "bob"),
    "diag": ("carol",),
}
"""Who approves the steps from the cordon to the diagnostics: one person each, two
different people for the power cycle."""


def _drop(drive: Drive, *, again: bool = False) -> int:
    """GPU 5 falls off the bus and the recorded XID 79 alert fires; `again`: as a new
    firing episode of the same alert, starting now (the recording's startsAt is the
    test clock's start)."""
    drive.sim.cluster.lose_gpu(NODE, 5)
    body = fixture("xid79-firing.json")
    if again:
        (alert,) = body["alerts"]
        alert["startsAt"] = iso(drive.rig.clock.now() - timedelta(seconds=8))
    return drive.post(body)


def _resolve(drive: Drive, number: int) -> None:
    with drive.rig.db.transaction() as session:
        incidents.resolve(
            session,
            number,
            actor=engine.actor_of("carol"),
            at=drive.rig.clock.now(),
            disposition="GPU 5 power-cycled, diag -r 3 passed",
        )


@pytest.mark.timeout(120)
def test_an_xid_79_is_power_cycled_by_two_people_verified_at_level_3_and_returned(
    drive: Drive,
) -> None:
    number = _drop(drive)

    rows = drive.rows(number)
    for step in ("classify", "history", "snapshot"):  # facts first, without people
        assert (rows[step].state, rows[step].actor, rows[step].approvals_required) == (
            "succeeded",
            "runbook-bot",
            0,
        )
    results = drive.results(number)
    assert results["classify"]["fault_class"] == "fallen_off_bus"
    assert (results["history"]["drops"], results["history"]["rma"]) == (1, False)
    for step in ("notify_owner", "app_history", "record_trend"):
        assert rows[step].state == "skipped"
    assert drive.waiting(number) == ("cordon", 1)
    assert drive.sim.cluster.requests_made(method="PATCH", path=NODE_PATH) == []

    drive.approve(number, "cordon", "alice")
    assert drive.node(NODE).unschedulable
    assert drive.waiting(number) == ("drain", 1)
    drive.approve(number, "drain", "bob")
    assert drive.states(number)["reset"] == "skipped"  # XID 79 is not reset: it is cycled
    assert drive.waiting(number) == ("power_cycle", 2)

    drive.approve(number, "power_cycle", "alice")
    assert "1 more approval from someone else" in drive.refused(number, "power_cycle", "alice")
    row = drive.rows(number)["power_cycle"]
    assert (row.state, row.approvers) == ("awaiting_approval", ["alice"])
    assert drive.cycles(NODE) == 0  # one person is not enough

    drive.approve(number, "power_cycle", "bob")
    assert drive.cycles(NODE) == 1
    rows = drive.rows(number)
    assert rows["power_cycle"].state == rows["wait_ready"].state == "succeeded"
    assert drive.results(number)["wait_ready"]["ready"] is True
    assert drive.waiting(number) == ("diag", 1)
    assert rows["diag"].params["level"] == "3"

    drive.approve(number, "diag", "carol")
    assert drive.results(number)["diag"]["passed"] is True
    states = drive.states(number)
    assert states["rma"] == states["diag_failed"] == states["uncordon"] == "skipped"
    assert drive.waiting(number) == ("uncordon_after_power_cycle", 2)
    assert drive.node(NODE).unschedulable

    drive.approve(number, "uncordon_after_power_cycle", "alice", "carol")
    node = drive.node(NODE)
    assert node.ready and not node.unschedulable
    assert drive.types(number)[-1] == "runbook.finished"
    assert drive.demanded(number) == {
        "classify": 0,
        "history": 0,
        "snapshot": 0,
        "cordon": 1,
        "drain": 1,
        "power_cycle": 2,
        "wait_ready": 0,
        "diag": 1,
        "uncordon_after_power_cycle": 2,
    }
    assert drive.verified(number)


@pytest.mark.timeout(180)
def test_a_second_drop_of_the_card_within_a_week_keeps_the_node_cordoned_for_rma(
    drive: Drive,
) -> None:
    first = _drop(drive)
    drive.follow(first, {**RECOVERY, "uncordon_after_power_cycle": ("alice", "carol")})
    assert not drive.node(NODE).unschedulable
    _resolve(drive, first)
    drive.rig.clock.advance(timedelta(days=3))  # past the reopen window, inside the week

    second = _drop(drive, again=True)

    assert second != first
    history = drive.results(second)["history"]
    assert (history["drops"], history["rma"]) == (2, True)
    assert drive.follow(second, RECOVERY) == list(RECOVERY)
    assert drive.cycles(NODE) == 2
    rows = drive.rows(second)
    assert rows["diag"].params["level"] == "3" and rows["diag"].state == "succeeded"
    assert rows["vendor"].state == "skipped"  # only the RMA rule holds
    assert drive.waiting(second) == ("rma", 0)
    assert rows["rma"].kind == "manual" and "RMA GPU" in rows["rma"].summary
    assert drive.node(NODE).unschedulable

    drive.done(second, "rma", "carol", f"RMA GPU {UUID}: vendor case 4411, owner carol")

    states = drive.states(second)
    assert states["rma"] == "succeeded"
    assert states["uncordon"] == states["uncordon_after_power_cycle"] == "skipped"
    node = drive.node(NODE)
    assert node.ready and node.unschedulable
    assert node.annotations["runbook-bot/incident"] == f"INC-{second}"
    assert drive.types(second)[-1] == "runbook.finished"
    assert drive.demanded(second) == {
        "classify": 0,
        "history": 0,
        "snapshot": 0,
        "cordon": 1,
        "drain": 1,
        "power_cycle": 2,
        "wait_ready": 0,
        "diag": 1,
    }
    assert drive.verified(first) and drive.verified(second)


@pytest.mark.timeout(60)
def test_an_application_xid_tells_the_job_owner_and_never_cordons(drive: Drive) -> None:
    number = drive.fire(host="gpu-node-03", gpu=2, UUID=OTHER_CARD, xid="13")

    assert drive.results(number)["classify"]["fault_class"] == "application"
    assert drive.waiting(number) == ("notify_owner", 0)
    assert drive.rows(number)["notify_owner"].kind == "manual"

    drive.done(number, "notify_owner", "alice", "told the owner of ml/trainer-2")

    states = drive.states(number)
    assert states["app_history"] == "succeeded"
    assert states["app_repeat"] == "skipped"  # the first on this GPU in 24 h
    for step in ("cordon", "drain", "reset", "power_cycle", "diag", "rma", "uncordon"):
        assert states[step] == "skipped", step
    assert drive.types(number)[-1] == "runbook.finished"
    assert not drive.node("gpu-node-03").unschedulable
    assert drive.sim.cluster.requests_made(method="PATCH", path="/api/v1/nodes/*") == []
    assert drive.demanded(number) == {
        "classify": 0,
        "history": 0,
        "snapshot": 0,
        "app_history": 0,
    }
    assert drive.verified(number)


@pytest.mark.timeout(90)
@pytest.mark.parametrize("backend", ["sqlite"])
def test_a_resettable_xid_resets_the_gpu_verifies_at_level_2_and_one_person_returns_it(
    drive: Drive,
) -> None:
    node = "gpu-node-04"
    number = drive.fire(host=node, gpu=1, UUID=OTHER_CARD, xid="48")

    assert drive.results(number)["classify"]["fault_class"] == "reset_gpu"
    decisions = {
        "cordon": ("alice",),
        "drain": ("bob",),
        "reset": ("alice", "bob"),
        "diag": ("carol",),
        "uncordon": ("alice",),
    }
    assert drive.follow(number, decisions) == list(decisions)

    rows = drive.rows(number)
    assert rows["diag"].params["level"] == "2" and drive.results(number)["diag"]["passed"]
    for step in ("power_cycle", "wait_ready", "rma", "uncordon_after_power_cycle"):
        assert rows[step].state == "skipped", step
    assert not drive.node(node).unschedulable and drive.cycles(node) == 0
    assert drive.types(number)[-1] == "runbook.finished"
    assert drive.verified(number)


@pytest.mark.timeout(90)
@pytest.mark.parametrize("backend", ["sqlite"])
def test_a_reset_that_fails_falls_through_to_a_power_cycle_for_two_people(
    drive: Drive,
) -> None:
    node = "gpu-node-03"  # the seed's node whose nvidia-smi exits 255
    number = drive.fire(host=node, gpu=1, UUID=OTHER_CARD, xid="48")

    drive.follow(number, {"cordon": ("alice",), "drain": ("bob",), "reset": ("alice", "bob")})

    assert drive.states(number)["reset"] == "failed"
    assert "runbook.stopped" not in drive.types(number)
    assert drive.waiting(number) == ("power_cycle", 2)
    assert drive.node(node).unschedulable and drive.cycles(node) == 0

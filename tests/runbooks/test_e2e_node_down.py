"""The shipped node-down runbook end to end: a NotReady node, looked at through its BMC
first, cordoned, brought back (power cycle by two people when hung, power on when off),
diagnosed at level 3 and returned only after the burn-in is marked done."""

from __future__ import annotations

import pytest

from tests.runbooks.drive import Drive
from tests.sim.waiting import eventually

NODE = "gpu-node-02"
OUT_OF_SERVICE = "node.kubernetes.io/out-of-service"

pytestmark = [pytest.mark.timeout(120), pytest.mark.parametrize("backend", ["sqlite"])]


def _fire(drive: Drive) -> int:
    return drive.fire(alertname="KubeNodeNotReady", host=NODE, node=NODE)


def _bmc_first(drive: Drive, number: int, power: str) -> None:
    """The node's status, the BMC's power state and its SEL ran without people, before
    anything changed the node."""
    rows = drive.rows(number)
    for step in ("node_status", "power", "sel"):
        assert (rows[step].state, rows[step].actor, rows[step].approvals_required) == (
            "succeeded",
            "runbook-bot",
            0,
        ), step
    results = drive.results(number)
    assert results["node_status"]["ready"] != "True"
    assert results["power"]["power"] == power
    assert rows["bmc_unreachable"].state == "skipped"
    assert drive.waiting(number) == ("cordon", 1)
    assert not drive.node(NODE).unschedulable


def _recover_and_return(drive: Drive, number: int, demanded: dict[str, int]) -> None:
    """From the node Ready again: drain, diag level 3, burn-in, uncordon by two people."""
    assert drive.waiting(number) == ("vendor", 0)
    drive.skip(number, "vendor", "alice", "first crash of this machine")
    assert drive.follow(number, {"drain": ("bob",), "diag": ("carol",)}) == ["drain", "diag"]
    rows = drive.rows(number)
    assert rows["diag"].params["level"] == 3 and drive.results(number)["diag"]["passed"]
    assert rows["diag_failed"].state == "skipped"
    assert drive.waiting(number) == ("burn_in", 0)
    assert rows["uncordon"].state == "not_reached"  # not before the burn-in
    assert drive.node(NODE).unschedulable

    drive.done(number, "burn_in", "carol", "2 h of gpu-burn, no XID, temperatures flat")
    assert drive.waiting(number) == ("uncordon", 2)
    drive.approve(number, "uncordon", "alice")
    assert drive.node(NODE).unschedulable  # one person is not enough
    drive.approve(number, "uncordon", "bob")

    node = drive.node(NODE)
    assert node.ready and not node.unschedulable
    assert drive.types(number)[-1] == "runbook.finished"
    assert drive.demanded(number) == demanded
    assert drive.verified(number)


def test_a_hung_node_is_power_cycled_by_two_people_diagnosed_and_burnt_in_before_return(
    drive: Drive,
) -> None:
    drive.sim.cluster.set_node_ready(NODE, False)  # the kubelet stopped; the power is on
    number = _fire(drive)
    _bmc_first(drive, number, power="on")

    drive.approve(number, "cordon", "alice")
    assert drive.node(NODE).unschedulable
    states = drive.states(number)
    assert states["pods"] == "succeeded" and states["out_of_service"] == "skipped"
    assert drive.waiting(number) == ("checkpoints", 0)
    drive.done(number, "checkpoints", "bob", "trainer resumed on gpu-node-04 from step 41000")
    assert drive.states(number)["power_on"] == "skipped"
    assert drive.waiting(number) == ("power_cycle", 2)

    drive.approve(number, "power_cycle", "alice")
    assert drive.cycles(NODE) == 0 and not drive.node(NODE).ready
    drive.approve(number, "power_cycle", "bob")

    assert drive.cycles(NODE) == 1
    assert drive.states(number)["wait_ready"] == "succeeded" and drive.node(NODE).ready
    _recover_and_return(
        drive,
        number,
        {
            "node_status": 0,
            "power": 0,
            "sel": 0,
            "cordon": 1,
            "pods": 0,
            "power_cycle": 2,
            "wait_ready": 0,
            "drain": 1,
            "diag": 1,
            "uncordon": 2,
        },
    )


def test_a_powered_off_node_is_marked_out_of_service_by_two_people_and_powered_on(
    drive: Drive,
) -> None:
    drive.sim.cluster.power(NODE, "ForceOff")
    eventually(lambda: not drive.node(NODE).ready, what=f"{NODE} to go NotReady")
    number = _fire(drive)
    _bmc_first(drive, number, power="off")

    drive.approve(number, "cordon", "alice")
    assert drive.waiting(number) == ("out_of_service", 2)
    drive.approve(number, "out_of_service", "alice", "carol")
    assert any(t["key"] == OUT_OF_SERVICE for t in drive.node(NODE).taints)
    drive.done(number, "checkpoints", "bob", "trainer resumed from step 41000")
    assert drive.waiting(number) == ("remove_out_of_service", 1)
    drive.approve(number, "remove_out_of_service", "bob")
    assert not any(t["key"] == OUT_OF_SERVICE for t in drive.node(NODE).taints)

    assert drive.states(number)["power_cycle"] == "not_reached"
    assert drive.waiting(number) == ("power_on", 1)
    drive.approve(number, "power_on", "carol")

    states = drive.states(number)
    assert states["power_cycle"] == "skipped" and states["wait_ready"] == "succeeded"
    assert drive.node(NODE).ready and drive.cycles(NODE) == 1
    _recover_and_return(
        drive,
        number,
        {
            "node_status": 0,
            "power": 0,
            "sel": 0,
            "cordon": 1,
            "pods": 0,
            "out_of_service": 2,
            "remove_out_of_service": 1,
            "power_on": 1,
            "wait_ready": 0,
            "drain": 1,
            "diag": 1,
            "uncordon": 2,
        },
    )

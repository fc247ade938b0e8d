"""The shipped ib-partition runbook end to end: one node with an InfiniBand port down is
found by ib.port_status, cordoned and drained, repaired by hand, and returned only when
the ports verify Active at full rate and the bandwidth check is marked done. (A leaf
switch's nodes, the domain branch: tests/runbooks/test_domain_runbooks.py.)"""

from __future__ import annotations

import pytest

from tests.runbooks.drive import Drive

NODE = "gpu-node-03"
HCA = "mlx5_1"

pytestmark = [pytest.mark.timeout(90), pytest.mark.parametrize("backend", ["sqlite"])]


def _take_out(drive: Drive) -> int:
    """The port goes down, the alert fires; scope, cordon, drain, the cable replaced."""
    drive.sim.cluster.set_ib_port(NODE, HCA, False)
    number = drive.fire(alertname="InfiniBandPortDown", host=NODE, node=NODE, device=HCA)

    ports = drive.results(number)["ports"]
    assert ports["healthy"] is False
    assert [p["port"] for p in ports["ports"] if not p["healthy"]] == [f"{HCA}/1"]
    row = drive.rows(number)["ports"]
    assert (row.state, row.actor, row.approvals_required) == ("succeeded", "runbook-bot", 0)
    assert drive.waiting(number) == ("check_node", 0)  # one node alerting: its own cable

    drive.done(number, "check_node", "alice", f"{HCA} cable: no light, module hot")
    states = drive.states(number)
    assert states["check_fabric"] == states["leaf_ports"] == "skipped"
    assert drive.follow(number, {"cordon": ("alice",), "drain": ("bob",)}) == ["cordon", "drain"]
    assert drive.node(NODE).unschedulable
    assert drive.waiting(number) == ("replace_cable", 0)
    return number


def test_a_node_with_a_port_down_is_repaired_by_hand_verified_and_returned(
    drive: Drive,
) -> None:
    number = _take_out(drive)

    drive.sim.cluster.set_ib_port(NODE, HCA, True)  # the IDC swapped the cable
    drive.done(number, "replace_cable", "carol", "IDC replaced the AOC cable on mlx5_1")
    assert drive.states(number)["restart_opensm"] == "skipped"  # not fabric-wide
    drive.done(number, "error_counters", "carol", "perfquery: no symbol errors in 10 min")

    rows = drive.rows(number)
    assert rows["verify_ports"].state == "succeeded"
    assert drive.results(number)["verify_ports"]["healthy"] is True
    assert rows["ports_still_bad"].state == "skipped"
    assert drive.waiting(number) == ("bandwidth", 0)
    assert rows["uncordon"].state == "not_reached"

    drive.done(number, "bandwidth", "bob", "ib_write_bw 196 Gb/s; nccl-tests busbw 188 GB/s")
    assert drive.waiting(number) == ("uncordon", 1)
    drive.approve(number, "uncordon", "alice")

    assert not drive.node(NODE).unschedulable
    assert drive.types(number)[-1] == "runbook.finished"
    assert drive.demanded(number) == {
        "ports": 0,
        "cordon": 1,
        "drain": 1,
        "verify_ports": 0,
        "uncordon": 1,
    }
    assert drive.verified(number)


def test_a_port_still_down_after_the_repair_keeps_the_node_cordoned(drive: Drive) -> None:
    number = _take_out(drive)

    drive.done(number, "replace_cable", "carol", "reseated the module")
    drive.done(number, "error_counters", "carol", "counters cleared")

    states = drive.states(number)
    assert states["verify_ports"] == "succeeded"
    assert drive.results(number)["verify_ports"]["healthy"] is False
    assert drive.waiting(number) == ("ports_still_bad", 0)
    drive.done(number, "ports_still_bad", "carol", "vendor case opened for the HCA")
    states = drive.states(number)
    assert states["bandwidth"] == states["uncordon"] == "skipped"
    assert drive.node(NODE).unschedulable
    assert drive.types(number)[-1] == "runbook.finished"

"""The shipped overheating runbook end to end. One hot machine: temperatures and fans read
through its BMC, the fan replaced by hand, the node never taken out. A hot row (the alert
says how many machines of the row are hot): low-priority jobs stopped, then an orderly
drain and soft power-off by two people, power on after the cooling is back, and return."""

from __future__ import annotations

import pytest

from tests.runbooks.drive import Drive
from tests.support.payloads import alert, notification

NODE = "gpu-node-04"

pytestmark = [pytest.mark.timeout(90), pytest.mark.parametrize("backend", ["sqlite"])]


def _fans(drive: Drive, rpm: int) -> None:
    with drive.sim.cluster.lock:  # every fan of the machine turns at this speed
        drive.sim.cluster.machines[NODE].fan_rpm = rpm


def _alarms(drive: Drive, number: int, step: str) -> list[str]:
    readings = drive.results(number)[step]["readings"]
    return sorted(r["name"] for r in readings if r["status"] != "ok")


def test_one_hot_machine_reads_its_fans_through_the_bmc_and_stays_in_service(
    drive: Drive,
) -> None:
    _fans(drive, 400)
    drive.sim.cluster.heat_gpu(NODE, 3, 93)
    number = drive.fire(alertname="GPUTemperatureHigh", host=NODE, gpu=3)

    rows = drive.rows(number)
    for step in ("temperatures", "gpus", "fans"):
        assert (rows[step].state, rows[step].approvals_required) == ("succeeded", 0), step
    assert rows["fans"].params == {"node": NODE, "kind": "fan"}
    assert _alarms(drive, number, "fans") == [f"FAN{i}" for i in range(1, 7)]
    assert "GPU3 Temp" in _alarms(drive, number, "temperatures")
    for step in ("facility", "jobs", "stop_low_priority", "drain", "soft_off"):
        assert rows[step].state == "skipped", step
    assert drive.waiting(number) == ("replace_fan", 0)

    _fans(drive, 9800)
    drive.sim.cluster.heat_gpu(NODE, 3, 45)
    drive.done(number, "replace_fan", "alice", "fan tray swapped from spares")

    states = drive.states(number)
    assert states["temperatures_after"] == states["gpus_after"] == "succeeded"
    assert _alarms(drive, number, "temperatures_after") == []
    for step in ("power_on", "wait_ready", "watch_cooling", "uncordon"):
        assert states[step] == "skipped", step
    assert drive.types(number)[-1] == "runbook.finished"
    assert not drive.node(NODE).unschedulable and drive.cycles(NODE) == 0
    assert drive.demanded(number) == {
        "temperatures": 0,
        "gpus": 0,
        "fans": 0,
        "temperatures_after": 0,
        "gpus_after": 0,
    }
    assert drive.verified(number)


def test_a_hot_row_drains_and_powers_off_in_order_and_powers_on_after_the_cooling(
    drive: Drive,
) -> None:
    drive.sim.cluster.heat_gpu(NODE, 0, 91)
    hot = alert(alertname="GPUTemperatureHigh", host=NODE, gpu=0, row="row-b")
    hot["annotations"]["hot_nodes_in_row"] = "3"
    number = drive.post(notification([hot]))

    assert drive.states(number)["fans"] == "not_reached"
    assert drive.waiting(number) == ("facility", 0)
    drive.done(number, "facility", "alice", "CRAC-2 of row B tripped; facilities on it")
    jobs = drive.results(number)["jobs"]
    assert "trainer-3" in {p["name"] for p in jobs["pods"][NODE]}
    drive.done(number, "stop_low_priority", "alice", "suspended the batch queue's jobs")

    assert drive.waiting(number) == ("drain", 1)
    drive.approve(number, "drain", "bob")
    assert drive.node(NODE).unschedulable
    assert drive.waiting(number) == ("soft_off", 2)
    drive.approve(number, "soft_off", "alice")
    assert drive.node(NODE).ready  # one person is not enough
    drive.approve(number, "soft_off", "bob")
    assert not drive.node(NODE).ready
    with drive.sim.cluster.lock:
        assert drive.sim.cluster.machines[NODE].power == "Off"

    states = drive.states(number)
    assert states["fans"] == states["replace_fan"] == "skipped"
    drive.sim.cluster.heat_gpu(NODE, 0, 40)
    drive.done(number, "power_on_batch", "carol", "row B batch 1 of 3")
    assert drive.waiting(number) == ("power_on", 1)
    drive.approve(number, "power_on", "carol")

    states = drive.states(number)
    assert states["wait_ready"] == states["temperatures_after"] == "succeeded"
    assert drive.node(NODE).ready and drive.cycles(NODE) == 1
    assert drive.waiting(number) == ("watch_cooling", 0)
    assert drive.node(NODE).unschedulable
    drive.done(number, "watch_cooling", "carol", "GPUs at 40 C after 30 min")
    assert drive.waiting(number) == ("uncordon", 1)
    drive.approve(number, "uncordon", "alice")

    assert not drive.node(NODE).unschedulable
    assert drive.types(number)[-1] == "runbook.finished"
    assert drive.demanded(number) == {
        "temperatures": 0,
        "gpus": 0,
        "jobs": 0,
        "drain": 1,
        "soft_off": 2,
        "power_on": 1,
        "wait_ready": 0,
        "temperatures_after": 0,
        "gpus_after": 0,
        "uncordon": 1,
    }
    assert drive.verified(number)

"""The shipped overheating runbook end to end for one hot machine (a node incident):
temperatures and fans read through its BMC, the fan replaced by hand, the node never taken
out. A hot row, the domain branch: tests/runbooks/test_domain_runbooks.py."""

from __future__ import annotations

import pytest

from tests.runbooks.drive import Drive

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
    for step in ("row_temperatures", "facility", "row_cordon", "stop_low_priority", "row_drain"):
        assert rows[step].state == "skipped", step
    assert drive.waiting(number) == ("replace_fan", 0)

    _fans(drive, 9800)
    drive.sim.cluster.heat_gpu(NODE, 3, 45)
    drive.done(number, "replace_fan", "alice", "fan tray swapped from spares")

    states = drive.states(number)
    assert states["temperatures_after"] == states["gpus_after"] == "succeeded"
    assert _alarms(drive, number, "temperatures_after") == []
    for step in ("cooling_back", "row_power_on", "watch_cooling", "row_uncordon"):
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

"""The BMC actions through the registry, against the simulated cluster's Redfish BMCs:
state and SEL recorded before, the new state confirmed by the BMC, the Kubernetes node
following the power, idempotence, dry run, and failures that say what to do."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import pytest

from bot.actions.executing import Failure
from bot.config import Settings, load_settings
from bot.sim import SimHandle
from tests.bmc.conftest import RunBmcAction, Seen, cordon
from tests.sim.waiting import eventually

NODE = "gpu-node-02"


@pytest.fixture(autouse=True)
def cordoned(redfish_sim: SimHandle) -> None:
    """NODE is cordoned, as the runbooks do before any power action."""
    cordon(redfish_sim, NODE)


def test_a_ready_schedulable_node_is_not_powered_off_without_force(
    run_bmc: RunBmcAction, redfish_sim: SimHandle
) -> None:
    for name in ("bmc.power_off", "bmc.power_soft_off", "bmc.power_cycle"):
        result: Any = run_bmc(name, node="gpu-node-03").result
        assert result.ok is False
        assert "Ready and schedulable" in result.summary and "force=true" in result.summary
    assert _posts(redfish_sim) == []

    forced: Any = run_bmc("bmc.power_off", node="gpu-node-03", force=True).result
    assert forced.ok and forced.after == "off"


def _posts(sim: SimHandle) -> list[str]:
    return [r.path for r in sim.bmc_requests("POST")]


def test_power_status_reads_the_bmc(run_bmc: RunBmcAction) -> None:
    result: Any = run_bmc("bmc.power_status", node=NODE).result
    assert result.ok and result.power == "on"
    assert result.summary == f"{NODE} is powered on"
    assert result.bmc.startswith("redfish BMC 127.0.0.1:")


def test_power_off_records_before_confirms_off_and_the_node_goes_not_ready(
    run_bmc: RunBmcAction, redfish_sim: SimHandle, seen: Seen
) -> None:
    result: Any = run_bmc("bmc.power_off", node=NODE, reason="XID 79 on GPU 5").result

    assert result.ok, result.summary
    assert (result.before, result.after, result.changed) == ("on", "off", True)
    assert "confirmed by the BMC" in result.summary
    assert redfish_sim.cluster.machine(NODE).power == "Off"
    # The log has the state and the SEL before the request, then after, around the action.
    types = [kind for kind, _, _ in seen.records]
    assert types == ["action.started", "bmc.before", "bmc.after", "action.finished"]
    before = seen.records[1][2]
    assert before["power"] == "on" and before["sel"], "the SEL tail is recorded before"
    assert "(XID 79 on GPU 5)" in seen.records[1][1]
    assert any("Power off" in e.event for e in result.sel_after)
    assert _posts(redfish_sim) == [f"/redfish/v1/Systems/{NODE}/Actions/ComputerSystem.Reset"]
    eventually(lambda: not redfish_sim.cluster.snapshot().nodes[NODE].ready, what="NotReady")


def test_power_on_brings_the_node_back(run_bmc: RunBmcAction, redfish_sim: SimHandle) -> None:
    redfish_sim.cluster.power(NODE, "ForceOff")
    eventually(lambda: redfish_sim.cluster.machine(NODE).power == "Off", what="off")

    result: Any = run_bmc("bmc.power_on", node=NODE).result

    assert result.ok and (result.before, result.after) == ("off", "on")
    eventually(lambda: redfish_sim.cluster.snapshot().nodes[NODE].ready, what="Ready again")


def test_power_cycle_is_confirmed_by_seeing_off_then_on(
    run_bmc: RunBmcAction, redfish_sim: SimHandle
) -> None:
    result: Any = run_bmc("bmc.power_cycle", node=NODE).result

    assert result.ok, result.summary
    assert (result.before, result.after) == ("on", "on")
    assert result.notes == []  # the off phase was seen, no caveat
    assert redfish_sim.cluster.machine(NODE).resets == 1
    assert len(_posts(redfish_sim)) == 1


def test_asking_for_the_state_a_node_is_in_changes_nothing(
    run_bmc: RunBmcAction, redfish_sim: SimHandle
) -> None:
    result: Any = run_bmc("bmc.power_on", node=NODE).result
    assert result.ok and result.changed is False
    assert "already powered on" in result.summary
    assert _posts(redfish_sim) == []


def test_a_node_that_is_off_is_not_cycled(run_bmc: RunBmcAction, redfish_sim: SimHandle) -> None:
    redfish_sim.cluster.power(NODE, "ForceOff")
    eventually(lambda: redfish_sim.cluster.machine(NODE).power == "Off", what="off")

    result: Any = run_bmc("bmc.power_cycle", node=NODE).result

    assert not result.ok and "use bmc.power_on" in result.summary
    assert _posts(redfish_sim) == []


def test_dry_run_reads_the_state_and_sends_nothing(
    run_bmc: RunBmcAction, redfish_sim: SimHandle
) -> None:
    result: Any = run_bmc("bmc.power_off", node=NODE, dry_run_=True).result
    assert result.ok and result.dry_run
    assert result.summary.startswith(f"would power off {NODE} (now on)")
    assert _posts(redfish_sim) == []
    assert redfish_sim.cluster.machine(NODE).power == "On"


def test_a_soft_off_the_os_ignores_fails_and_names_the_hard_off(
    run_bmc: RunBmcAction, redfish_sim: SimHandle, bmc_settings: Settings
) -> None:
    # The simulated OS takes 3 x power_off_seconds (9 s) to shut down at full time scale;
    # the action waits 1 s.
    redfish_sim.cluster.time_scale = 1.0
    impatient = load_settings(bmc={**bmc_settings.bmc.model_dump(), "power_timeout": "1s"})

    result: Any = run_bmc("bmc.power_soft_off", node=NODE, settings_=impatient).result

    assert result.ok is False
    assert "use bmc.power_off (hard)" in result.summary
    assert result.after == "powering off"


def test_a_bmc_that_fails_once_is_retried(run_bmc: RunBmcAction, redfish_sim: SimHandle) -> None:
    redfish_sim.fail_bmc(NODE, times=1, status=503)
    result: Any = run_bmc("bmc.power_status", node=NODE).result
    assert result.ok and result.power == "on"


def test_a_bmc_that_keeps_failing_says_so_after_its_attempts(
    run_bmc: RunBmcAction, redfish_sim: SimHandle
) -> None:
    redfish_sim.fail_bmc(NODE, times=100, status=500)
    result: Any = run_bmc("bmc.power_off", node=NODE).result
    assert result.ok is False
    assert "tried 3 times" in result.summary
    assert _posts(redfish_sim) == []  # nothing was sent while the state was unknown
    assert redfish_sim.cluster.machine(NODE).power == "On"


def test_reads_sel_sensors_and_info(run_bmc: RunBmcAction, redfish_sim: SimHandle) -> None:
    redfish_sim.cluster.heat_gpu(NODE, 3, 92.0)

    sel: Any = run_bmc("bmc.sel_list", node=NODE, limit=5).result
    temps: Any = run_bmc("bmc.sensors", node=NODE, kind="temperature").result
    info: Any = run_bmc("bmc.info", node=NODE).result

    assert sel.ok and 1 <= len(sel.entries) <= 5
    assert sel.entries[-1].event.endswith("Upper critical going high")
    assert temps.ok and temps.readings and {r.kind for r in temps.readings} == {"temperature"}
    assert any("GPU" in a and "92" in a for a in temps.alarms), temps.alarms
    assert "in alarm" in temps.summary
    assert info.ok and info.info.firmware == "1.10.2"
    assert "Supermicro" in info.summary


def test_a_refused_login_fails_the_read_as_credentials_and_a_silent_bmc_as_unavailable(
    run_bmc: RunBmcAction, bmc_settings: Settings, tmp_path: Path
) -> None:
    wrong = tmp_path / "wrong-password"
    wrong.write_text("Not-The-Pw-3e1\n", encoding="utf-8")
    bmc = bmc_settings.bmc.model_dump()
    bmc["credentials"]["default"]["password_file"] = str(wrong)
    refused = run_bmc("bmc.power_status", node=NODE, settings_=load_settings(bmc=bmc))
    bmc["nodes"][NODE]["port"] = _closed_port()
    silent = run_bmc("bmc.power_status", node=NODE, settings_=load_settings(bmc=bmc))

    assert isinstance(refused.result, Failure) and refused.result.error == "credentials"
    assert "credentials profile 'default'" in refused.result.summary
    assert refused.retry_after is None  # a refused login is not tried again on its own
    assert isinstance(silent.result, Failure) and silent.result.error == "unavailable"
    assert silent.retry_after is not None


def _closed_port() -> int:
    """A loopback TCP port nothing listens on (bound, then closed)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])

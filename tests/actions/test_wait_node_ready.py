"""k8s.wait_node_ready on the simulated cluster: it returns once the node has been Ready
for `ready_for`, not at the stale Ready a power cycle leaves behind, and fails with the
last condition when the node does not come back."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from bot.actions import registry
from bot.actions.kubernetes import waits
from bot.errors import ParamsInvalid
from bot.sim import SimHandle
from tests.actions.conftest import Recorder, RunAction


@pytest.fixture(autouse=True)
def fast_polls(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(waits, "POLL_SECONDS", 0.02)


@pytest.fixture
def later() -> Iterator[Any]:
    """later(seconds, fn): run fn on a timer thread, joined when the test ends."""
    timers: list[threading.Timer] = []

    def schedule(seconds: float, fn: Any) -> None:
        timer = threading.Timer(seconds, fn)
        timers.append(timer)
        timer.start()

    yield schedule
    for timer in timers:
        timer.cancel()
        timer.join()


def test_a_ready_node_passes_at_once_without_a_hold(run_action: RunAction, sim: SimHandle) -> None:
    result: Any = run_action("k8s.wait_node_ready", node="gpu-node-02", ready_for="0s").result

    assert (result.ok, result.ready, result.condition) == (True, True, "True")
    assert result.saw_not_ready is False
    assert result.summary == "gpu-node-02 is Ready (held 0s)"
    assert sim.cluster.requests_made("PATCH") == []


def test_a_node_that_comes_back_is_waited_for_and_the_progress_names_its_condition(
    run_action: RunAction, sim: SimHandle, recorder: Recorder, later: Any
) -> None:
    sim.cluster.set_node_ready("gpu-node-02", False)
    later(0.3, lambda: sim.cluster.set_node_ready("gpu-node-02", True))

    result: Any = run_action(
        "k8s.wait_node_ready", node="gpu-node-02", ready_for="100ms", timeout="10s"
    ).result

    assert (result.ok, result.ready, result.saw_not_ready) == (True, True, True)
    assert result.waited_seconds >= 0.3
    assert result.summary.startswith("gpu-node-02 is Ready (held 0s) after ")
    assert "gpu-node-02: Ready=False (KubeletNotReady), waited 0s of 10s" in recorder.progress


def test_the_stale_ready_left_by_a_power_cycle_does_not_pass_the_hold(
    run_action: RunAction, sim: SimHandle
) -> None:
    # The node still says Ready when the cycle starts; it goes NotReady once the power is
    # gone and Ready again after booting. A wait that took the first Ready would return
    # before the machine was even off.
    sim.cluster.power("gpu-node-02", "PowerCycle")

    result: Any = run_action(
        "k8s.wait_node_ready", node="gpu-node-02", ready_for="1s", timeout="20s"
    ).result

    assert (result.ok, result.ready, result.saw_not_ready) == (True, True, True)
    machine = sim.cluster.machine("gpu-node-02")
    assert machine.power == "On"
    assert machine.resets == 1


def test_a_node_that_stays_down_fails_after_the_timeout_with_its_last_condition(
    run_action: RunAction, sim: SimHandle
) -> None:
    sim.cluster.set_node_ready("gpu-node-03", False)
    started = time.monotonic()

    outcome = run_action("k8s.wait_node_ready", node="gpu-node-03", timeout="1s", ready_for="0s")

    result: Any = outcome.result
    assert 1 <= time.monotonic() - started < 5
    assert (result.ok, result.ready, result.condition, result.reason) == (
        False,
        False,
        "False",
        "KubeletNotReady",
    )
    assert result.summary == (
        "gpu-node-03 is not Ready after 1s: Ready=False (KubeletNotReady); check its "
        "console through the BMC (bmc.sel_list, bmc.power_status)"
    )
    assert outcome.retry_after is None


def test_a_dry_run_reads_the_condition_once_and_does_not_wait(
    run_action: RunAction, sim: SimHandle
) -> None:
    sim.cluster.set_node_ready("gpu-node-02", False)
    started = time.monotonic()

    result: Any = run_action(
        "k8s.wait_node_ready", ctx_={"dry_run": True}, node="gpu-node-02", timeout="10m"
    ).result

    assert time.monotonic() - started < 2
    assert (result.ok, result.dry_run, result.ready, result.condition) == (
        True,
        True,
        False,
        "False",
    )
    assert result.summary == (
        "gpu-node-02 is Ready=False now; would wait up to 10m for Ready held 1m"
    )


def test_a_node_that_does_not_exist_fails_at_once_naming_it(run_action: RunAction) -> None:
    result: Any = run_action("k8s.wait_node_ready", node="gpu-node-09", timeout="10s").result

    assert result.ok is False
    assert result.summary == (
        "node gpu-node-09 does not exist in the cluster; check the node name (kubectl get nodes)"
    )


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        ({"node": "gpu-node-02; reboot"}, "node"),
        ({"node": "gpu-node-02", "timeout": "500ms"}, "timeout"),
        ({"node": "gpu-node-02", "timeout": "3h"}, "timeout"),
        ({"node": "gpu-node-02", "ready_for": "1h"}, "ready_for"),
        ({"node": "gpu-node-02", "poll": "1s"}, "poll"),
    ],
)
def test_bad_parameters_are_refused_naming_the_field(raw: dict[str, Any], field: str) -> None:
    with pytest.raises(ParamsInvalid) as refused:
        registry.get("k8s.wait_node_ready").parse(raw)

    assert str(refused.value).startswith(f"k8s.wait_node_ready: invalid parameters: {field}=")


def test_it_is_a_read_that_supports_dry_run() -> None:
    found = registry.get("k8s.wait_node_ready")

    assert (found.risk.value, found.dry_run) == ("read", True)

"""k8s.wait_node_ready on the simulated cluster: it returns once the node has been Ready
for `ready_for`, not at the stale Ready a power cycle leaves behind, and fails with the
last condition when the node does not come back.

Most tests run the wait on a `FrozenClock`: its polls cost no time, and what the test
arranges (`call_later`) happens at an exact moment of the wait, so the reads, the progress
and the seconds waited are exact. The power cycle follows the simulator's own pace.
"""

from __future__ import annotations

from typing import Any

import pytest

from bot.actions import registry
from bot.actions.kubernetes import waits
from bot.clock import FrozenClock
from bot.errors import ParamsInvalid
from bot.sim import SimHandle
from tests.actions.conftest import START, Recorder, RunAction


@pytest.fixture
def clock() -> FrozenClock:
    return FrozenClock(START)


def _reads(sim: SimHandle, node: str) -> list[int]:
    return [r.status for r in sim.cluster.requests_made("GET", f"/api/v1/nodes/{node}")]


def test_a_ready_node_passes_at_once_without_a_hold(
    run_action: RunAction, sim: SimHandle, clock: FrozenClock
) -> None:
    result: Any = run_action(
        "k8s.wait_node_ready", ctx_={"clock": clock}, node="gpu-node-02", ready_for="0s"
    ).result

    assert (result.ok, result.ready, result.condition) == (True, True, "True")
    assert result.saw_not_ready is False
    assert result.summary == "gpu-node-02 is Ready (held 0s)"
    assert (result.waited_seconds, clock.slept) == (0.0, [])
    assert _reads(sim, "gpu-node-02") == [200]
    assert sim.cluster.requests_made("PATCH") == []


def test_a_node_that_comes_back_is_polled_until_ready_holds_and_the_progress_names_its_condition(
    run_action: RunAction, sim: SimHandle, recorder: Recorder, clock: FrozenClock
) -> None:
    sim.cluster.set_node_ready("gpu-node-02", False)
    clock.call_later(12, lambda: sim.cluster.set_node_ready("gpu-node-02", True))

    result: Any = run_action(
        "k8s.wait_node_ready",
        ctx_={"clock": clock},
        node="gpu-node-02",
        ready_for="10s",
        timeout="1m",
    ).result

    assert (result.ok, result.ready, result.saw_not_ready) == (True, True, True)
    # Read every POLL_SECONDS: NotReady at 0, 5 and 10 s; Ready from 15 s, held 10 s at 25 s.
    assert clock.slept == [waits.POLL_SECONDS] * 5
    assert result.waited_seconds == 25.0
    assert result.summary == "gpu-node-02 is Ready (held 10s) after 25s"
    assert recorder.progress == [
        "gpu-node-02: Ready=False (KubeletNotReady), waited 0s of 1m",
        "gpu-node-02: Ready=False (KubeletNotReady), waited 5s of 1m",
        "gpu-node-02: Ready=False (KubeletNotReady), waited 10s of 1m",
        "gpu-node-02: Ready=True, waited 15s of 1m",
        "gpu-node-02: Ready=True, waited 20s of 1m",
    ]
    assert _reads(sim, "gpu-node-02") == [200] * 6


def test_a_ready_that_breaks_during_the_hold_starts_the_hold_again(
    run_action: RunAction, sim: SimHandle, clock: FrozenClock
) -> None:
    # Ready at 0 and 5 s, NotReady at 10 s (a kubelet that flaps), Ready again from 15 s.
    clock.call_later(7, lambda: sim.cluster.set_node_ready("gpu-node-02", False))
    clock.call_later(12, lambda: sim.cluster.set_node_ready("gpu-node-02", True))

    result: Any = run_action(
        "k8s.wait_node_ready",
        ctx_={"clock": clock},
        node="gpu-node-02",
        ready_for="10s",
        timeout="1m",
    ).result

    assert (result.ok, result.ready, result.saw_not_ready) == (True, True, True)
    assert result.waited_seconds == 25.0
    assert len(_reads(sim, "gpu-node-02")) == 6


def test_the_stale_ready_left_by_a_power_cycle_does_not_pass_the_hold(
    run_action: RunAction, sim: SimHandle
) -> None:
    # The node still says Ready when the cycle starts; it goes NotReady once the power is
    # gone and Ready again after booting. A wait that took the first Ready would return
    # before the machine was even off. The machine's power and boot are the simulator's
    # (off after 3 s, Ready 15 s later), so the wait keeps its pace (the default clock),
    # with the default hold of a minute.
    sim.cluster.power("gpu-node-02", "PowerCycle")

    result: Any = run_action("k8s.wait_node_ready", node="gpu-node-02", timeout="20m").result

    assert (result.ok, result.ready, result.saw_not_ready) == (True, True, True)
    machine = sim.cluster.machine("gpu-node-02")
    assert machine.power == "On"
    assert machine.resets == 1


def test_a_node_that_stays_down_fails_after_the_timeout_with_its_last_condition(
    run_action: RunAction, sim: SimHandle, recorder: Recorder, clock: FrozenClock
) -> None:
    sim.cluster.set_node_ready("gpu-node-03", False)

    outcome = run_action(
        "k8s.wait_node_ready",
        ctx_={"clock": clock},
        node="gpu-node-03",
        timeout="12s",
        ready_for="0s",
    )

    result: Any = outcome.result
    assert (result.ok, result.ready, result.condition, result.reason) == (
        False,
        False,
        "False",
        "KubeletNotReady",
    )
    assert result.summary == (
        "gpu-node-03 is not Ready after 12s: Ready=False (KubeletNotReady); check its "
        "console through the BMC (bmc.sel_list, bmc.power_status)"
    )
    # Reads at 0, 5 and 10 s, and a last one at the deadline, not past it.
    assert clock.slept == [5.0, 5.0, 2.0]
    assert result.waited_seconds == 12.0
    assert _reads(sim, "gpu-node-03") == [200] * 4
    assert recorder.progress[-1] == "gpu-node-03: Ready=False (KubeletNotReady), waited 12s of 12s"
    assert outcome.retry_after is None


def test_an_api_outage_during_the_wait_is_retried_with_backoff_and_the_wait_goes_on(
    run_action: RunAction, sim: SimHandle, clock: FrozenClock
) -> None:
    sim.cluster.set_node_ready("gpu-node-02", False)
    clock.call_later(1, lambda: sim.cluster.fail_requests("/api/v1/nodes/gpu-node-02", 503, 4))
    clock.call_later(6, lambda: sim.cluster.set_node_ready("gpu-node-02", True))

    result: Any = run_action(
        "k8s.wait_node_ready",
        ctx_={"clock": clock},
        node="gpu-node-02",
        ready_for="0s",
        timeout="1m",
    ).result

    # The read at 5 s meets four 503s (backoff 0.5, 1 and 2 s, on the action's clock) and
    # counts as no answer; the next poll finds the node Ready.
    assert (result.ok, result.ready, result.condition) == (True, True, "True")
    assert clock.slept == [5.0, 0.5, 1.0, 2.0, 5.0]
    assert result.waited_seconds == 13.5
    assert _reads(sim, "gpu-node-02") == [200, 503, 503, 503, 503, 200]


def test_a_dry_run_reads_the_condition_once_and_does_not_wait(
    run_action: RunAction, sim: SimHandle, clock: FrozenClock
) -> None:
    sim.cluster.set_node_ready("gpu-node-02", False)

    result: Any = run_action(
        "k8s.wait_node_ready",
        ctx_={"dry_run": True, "clock": clock},
        node="gpu-node-02",
        timeout="10m",
    ).result

    assert (result.ok, result.dry_run, result.ready, result.condition) == (
        True,
        True,
        False,
        "False",
    )
    assert result.summary == (
        "gpu-node-02 is Ready=False now; would wait up to 10m for Ready held 1m"
    )
    assert (clock.slept, _reads(sim, "gpu-node-02")) == ([], [200])


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

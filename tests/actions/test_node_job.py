"""k8s.node_job on the simulated cluster: Jobs pinned to a node run the scenario's command
table; the exit code, the end of the log, the Job deleted afterwards, timeouts, dry run.

The Job's pod runs in the simulator's time, which the default clock keeps pace with; the
timeout test runs the wait on a `FrozenClock`, so its polls and deadline are exact."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from bot.actions import registry
from bot.actions.kubernetes import node_job
from bot.clock import FrozenClock
from bot.config import load_settings
from bot.errors import ParamsInvalid
from bot.sim import SimHandle
from bot.sim.scenario import Command
from tests.actions.conftest import START, Recorder, RunAction
from tests.sim.waiting import eventually

JOBS = "/apis/batch/v1/namespaces/runbook-bot/jobs*"


@pytest.fixture
def sim_with_namespace(sim: SimHandle) -> Iterator[SimHandle]:
    """The seed cluster with the bot's namespace, as the deploy manifests create it."""
    client.CoreV1Api(sim.api_client()).create_namespace({"metadata": {"name": "runbook-bot"}})
    yield sim


def _scenario_output(sim: SimHandle, node: str | None) -> str:
    entry = next(
        c for c in sim.cluster.scenario.commands if c.command == ["nvidia-smi"] and c.node == node
    )
    return entry.output


def _left(sim: SimHandle) -> tuple[list[Any], list[Any]]:
    return sim.cluster.objects("Job", "runbook-bot"), sim.cluster.objects("Pod", "runbook-bot")


def test_a_job_on_a_cordoned_node_returns_the_scenarios_exit_code_and_output_and_is_deleted(
    run_action: RunAction, sim_with_namespace: SimHandle, recorder: Recorder
) -> None:
    sim = sim_with_namespace
    run_action("k8s.cordon", node="gpu-node-03")

    result: Any = run_action("k8s.node_job", node="gpu-node-03", command=["nvidia-smi"]).result

    assert (result.ok, result.exit_code, result.succeeded) == (True, 255, False)
    assert result.log_tail == _scenario_output(sim, "gpu-node-03")
    assert result.log_truncated is False
    assert result.summary == (
        f"`nvidia-smi` on gpu-node-03 exited 255 after {result.duration_seconds:.1f}s: "
        "Unable to determine the device handle for GPU0000:3B:00.0: Unknown Error"
    )
    assert result.job.startswith("runbook-bot/runbook-bot-gpu-node-03-")
    eventually(lambda: _left(sim) == ([], []), what="the Job and its pod to go")
    assert len(sim.cluster.requests_made("POST", JOBS)) == 1
    [delete] = sim.cluster.requests_made("DELETE", JOBS)
    assert (delete.query.get("propagationPolicy"), delete.status) == ("Background", 200)
    assert recorder.progress[-1] == result.summary


def test_a_job_on_a_healthy_node_succeeds_with_the_whole_output(
    run_action: RunAction, sim_with_namespace: SimHandle
) -> None:
    result: Any = run_action("k8s.node_job", node="gpu-node-02", command=["nvidia-smi"]).result

    assert (result.ok, result.exit_code, result.succeeded) == (True, 0, True)
    assert result.log_tail == _scenario_output(sim_with_namespace, None)
    assert "exited 0" in result.summary and "NVIDIA" not in result.summary


def test_the_job_is_pinned_to_the_node_tolerates_everything_and_never_retries(
    run_action: RunAction, sim_with_namespace: SimHandle
) -> None:
    sim = sim_with_namespace
    # A refused delete leaves the Job in place to look at (and says so).
    sim.cluster.fail_requests(JOBS, 403, method="DELETE")

    result: Any = run_action(
        "k8s.node_job",
        node="gpu-node-02",
        command=["dcgmi", "diag", "-r", "1"],
        timeout="3m",
        host_pid=True,
    ).result

    [job] = sim.cluster.objects("Job", "runbook-bot")
    spec, pod = job["spec"], job["spec"]["template"]["spec"]
    assert (spec["backoffLimit"], spec["activeDeadlineSeconds"]) == (0, 180)
    assert spec["ttlSecondsAfterFinished"] == 600
    assert (pod["nodeName"], pod["restartPolicy"], pod["hostPID"]) == ("gpu-node-02", "Never", True)
    assert pod["tolerations"] == [{"operator": "Exists"}]
    [container] = pod["containers"]
    assert container["command"] == ["dcgmi", "diag", "-r", "1"]
    assert container["image"] == load_settings().node_job_image
    assert container["securityContext"] == {"privileged": False}
    assert job["metadata"]["labels"] == {"runbook-bot/job": "true", "runbook-bot/incident": "INC-7"}
    assert job["metadata"]["annotations"]["runbook-bot/by"] == "alice"
    assert (result.ok, result.exit_code) == (True, 0)
    assert "could not be deleted" in result.summary and "600s after it ends" in result.summary


def test_a_long_log_keeps_exactly_its_last_bytes(
    run_action: RunAction, sim_with_namespace: SimHandle
) -> None:
    output = "".join(
        f"[{i:04d}] NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off\n" for i in range(300)
    )
    sim_with_namespace.cluster.commands.append(Command(command=["dmesg"], output=output))

    result: Any = run_action(
        "k8s.node_job", node="gpu-node-02", command=["dmesg"], log_bytes=1000
    ).result

    assert result.log_tail == output[-1000:]
    assert result.log_truncated is True


def _running(sim: SimHandle) -> bool:
    return any(p["status"].get("phase") == "Running" for p in _left(sim)[1])


def test_a_command_that_hangs_times_out_saying_what_it_waited_on_and_is_deleted(
    run_action: RunAction, sim_with_namespace: SimHandle
) -> None:
    sim = sim_with_namespace
    sim.cluster.commands.append(Command(command=["dcgmi", "diag", "-r", "3"], seconds=3600))
    clock = FrozenClock(START)
    # A second into the wait the pod has started (in the simulator's time) and runs on.
    clock.call_later(1, lambda: eventually(lambda: _running(sim), what="the Job's pod to run"))

    result: Any = run_action(
        "k8s.node_job",
        ctx_={"clock": clock},
        node="gpu-node-02",
        command=["dcgmi", "diag", "-r", "3"],
        timeout="5s",
    ).result

    assert (result.ok, result.exit_code, result.succeeded) == (False, None, False)
    assert result.summary.startswith(
        "timed out after 5s waiting for pod runbook-bot/runbook-bot-gpu-node-02-"
    )
    assert result.summary.endswith("on gpu-node-02 (Running)")
    # Polls back off from POLL_FIRST to POLL_MAX and stop at the deadline, not past it.
    assert clock.slept[:4] == [node_job.POLL_FIRST, 0.2, 0.4, node_job.POLL_MAX]
    assert max(clock.slept) == node_job.POLL_MAX
    assert result.duration_seconds == 5.0
    eventually(lambda: sim.cluster.objects("Job", "runbook-bot") == [], what="the Job to go")
    assert len(sim.cluster.requests_made("DELETE", JOBS)) == 1


def test_dry_run_creates_nothing_and_does_not_wait(
    run_action: RunAction, sim_with_namespace: SimHandle
) -> None:
    sim = sim_with_namespace

    result: Any = run_action(
        "k8s.node_job", ctx_={"dry_run": True}, node="gpu-node-02", command=["nvidia-smi"]
    ).result

    assert (result.ok, result.dry_run, result.exit_code) == (True, True, None)
    assert result.summary.startswith("would run `nvidia-smi` on gpu-node-02 as Job runbook-bot/")
    assert _left(sim) == ([], [])
    [create] = sim.cluster.requests_made("POST", JOBS)
    assert create.query.get("dryRun") == "All"
    assert sim.cluster.requests_made("DELETE") == []
    assert sim.cluster.requests_made("GET", "/api/v1/namespaces/runbook-bot/pods") == []


def test_an_unknown_command_reports_the_shells_exit_code_127(
    run_action: RunAction, sim_with_namespace: SimHandle
) -> None:
    result: Any = run_action("k8s.node_job", node="gpu-node-01", command=["ibdiagnet"]).result

    assert (result.ok, result.exit_code) == (True, 127)
    assert result.summary.endswith(": /bin/sh: 1: ibdiagnet: command not found")


def test_a_missing_namespace_or_node_is_named_and_nothing_is_created(
    run_action: RunAction, sim: SimHandle
) -> None:
    no_namespace: Any = run_action(
        "k8s.node_job", node="gpu-node-02", command=["nvidia-smi"]
    ).result
    no_node: Any = run_action("k8s.node_job", node="gpu-node-99", command=["nvidia-smi"]).result

    assert no_namespace.ok is False
    assert no_namespace.summary == (
        "cannot run `nvidia-smi` on gpu-node-02: namespace runbook-bot does not exist; create "
        "it (deploy/rbac.yaml expects it) or set node_job_namespace"
    )
    assert no_node.ok is False
    assert no_node.summary.startswith("node gpu-node-99 does not exist in the cluster")
    assert sim.cluster.objects("Job") == []


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        ({"command": ["sh", "-c", "nvidia-smi; reboot"]}, "command"),
        ({"command": ["env", "/bin/bash", "-c", "id"]}, "command"),
        ({"command": ["nvidia-smi", "-q\nreboot"]}, "command.1"),
        ({"command": ["nvidia-smi\x00", "-q"]}, "command.0"),
        ({"command": "nvidia-smi -q"}, "command"),
        ({"command": []}, "command"),
        ({"command": ["x"] * 33}, "command"),
        ({"command": ["x" * 257]}, "command.0"),
        ({"command": ["nvidia-smi"], "timeout": "1s"}, "timeout"),
        ({"command": ["nvidia-smi"], "timeout": "31m"}, "timeout"),
        ({"command": ["nvidia-smi"], "log_bytes": 2 * 1024 * 1024}, "log_bytes"),
        ({"command": ["nvidia-smi"], "image": "busybox; reboot"}, "image"),
        ({"command": ["nvidia-smi"], "privileged": "sometimes"}, "privileged"),
    ],
)
def test_unsafe_or_unbounded_parameters_are_refused_before_any_request(
    run_action: RunAction, sim: SimHandle, raw: dict[str, Any], field: str
) -> None:
    with pytest.raises(ParamsInvalid) as refused:
        run_action("k8s.node_job", node="gpu-node-02", **raw)

    assert f"k8s.node_job: invalid parameters: {field}=" in str(refused.value)
    assert sim.cluster.requests_made() == []


def test_node_job_is_a_change_that_supports_dry_run() -> None:
    action = registry.get("k8s.node_job")

    assert (action.risk.value, action.dry_run) == ("change", True)

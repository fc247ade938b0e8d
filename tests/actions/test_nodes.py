"""k8s.node_status, k8s.cordon and k8s.uncordon on the simulated cluster, and the circuit
breaker in front of cordon: effects on the nodes, the requests made, the records written."""

from __future__ import annotations

from typing import Any

from kubernetes import client

from bot.config import load_settings
from bot.sim import SimHandle
from tests.actions.conftest import Recorder, RunAction
from tests.sim.waiting import eventually

MERGE = "application/merge-patch+json"
BOT_MARKS = {
    "runbook-bot/incident": "INC-7",
    "runbook-bot/by": "alice",
    "runbook-bot/reason": "XID 79 on GPU 5",
    "runbook-bot/at": "2026-11-29T22:10:00Z",
    "runbook-bot/cordoned": "true",
}


def _human(sim: SimHandle) -> client.CoreV1Api:
    """Someone with kubectl, writing through the same API."""
    return client.CoreV1Api(sim.api_client())


def _ours(annotations: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in annotations.items() if k.startswith("runbook-bot/")}


def test_node_status_reports_ready_gpus_allocated_and_pods_grouped_by_owner(
    run_action: RunAction, sim: SimHandle
) -> None:
    status: Any = run_action("k8s.node_status", node="gpu-node-02").result

    assert status.ok is True
    assert status.summary == "gpu-node-02: Ready=True, schedulable, 6/8 GPUs allocated, 5 pods"
    assert (status.ready, status.unschedulable, status.cordoned_by) == ("True", False, None)
    assert (status.gpus_allocatable, status.gpus_allocated) == (8, 6)
    assert status.pods_by_owner["StatefulSet ml/trainer"] == ["ml/trainer-1"]
    assert len(status.pods_by_owner["ReplicaSet serving/llm-inference-7d9f8c6b5"]) == 1
    assert len(status.pods_by_owner["DaemonSet gpu-operator/nvidia-dcgm-exporter"]) == 1
    assert sim.cluster.requests_made("PATCH") == []


def test_node_status_groups_the_static_kube_proxy_as_a_static_pod(
    run_action: RunAction,
) -> None:
    status: Any = run_action("k8s.node_status", node="gpu-node-02").result

    assert status.pods_by_owner.get("static pod") == ["kube-system/kube-proxy-gpu-node-02"]


def test_node_status_names_the_incident_and_person_after_the_bot_cordons(
    run_action: RunAction, sim: SimHandle
) -> None:
    run_action("k8s.cordon", node="gpu-node-02", reason="XID 79 on GPU 5")
    # The node lifecycle controller adds the unschedulable taint a moment later.
    eventually(lambda: sim.cluster.snapshot().nodes["gpu-node-02"].taints, what="the taint")

    status: Any = run_action("k8s.node_status", node="gpu-node-02").result

    assert status.unschedulable is True
    assert status.cordoned_by == "INC-7 (alice)"
    assert "cordoned by INC-7 (alice)" in status.summary
    assert "node.kubernetes.io/unschedulable:NoSchedule" in status.taints


def test_cordon_marks_incident_actor_reason_and_time_and_a_second_run_changes_nothing(
    run_action: RunAction, sim: SimHandle, recorder: Recorder
) -> None:
    first: Any = run_action("k8s.cordon", node="gpu-node-02", reason="XID 79 on GPU 5").result
    second: Any = run_action("k8s.cordon", node="gpu-node-02", reason="XID 79 on GPU 5").result

    node = sim.cluster.snapshot().nodes["gpu-node-02"]
    assert node.unschedulable is True
    assert _ours(node.annotations) == BOT_MARKS
    assert (first.ok, first.changed, first.summary) == (True, True, "gpu-node-02 cordoned")
    assert (second.ok, second.changed) == (True, False)
    assert second.summary == "gpu-node-02 is already cordoned (by INC-7 (alice)); nothing to do"
    assert len(sim.cluster.requests_made("PATCH", "/api/v1/nodes/gpu-node-02")) == 1
    assert recorder.types() == ["action.started", "action.finished"] * 2
    assert recorder.progress == ["gpu-node-02 cordoned"]


def test_dry_run_cordon_is_sent_with_dry_run_all_and_changes_nothing(
    run_action: RunAction, sim: SimHandle
) -> None:
    before = sim.cluster.snapshot()

    result: Any = run_action("k8s.cordon", ctx_={"dry_run": True}, node="gpu-node-02").result

    assert sim.cluster.snapshot() == before
    assert (result.ok, result.dry_run, result.changed) == (True, True, True)
    assert result.summary == "gpu-node-02 cordoned (dry run)"
    [patch] = sim.cluster.requests_made("PATCH", "/api/v1/nodes/gpu-node-02")
    assert (patch.query.get("dryRun"), patch.status) == ("All", 200)


def test_uncordon_leaves_a_node_a_human_cordoned_unless_forced(
    run_action: RunAction, sim: SimHandle
) -> None:
    _human(sim).patch_node("gpu-node-03", {"spec": {"unschedulable": True}}, _content_type=MERGE)

    refused: Any = run_action("k8s.uncordon", node="gpu-node-03").result
    still = sim.cluster.snapshot().nodes["gpu-node-03"].unschedulable
    forced: Any = run_action("k8s.uncordon", node="gpu-node-03", force=True).result

    assert (refused.ok, refused.changed, still) == (False, False, True)
    assert "cordoned by someone other than the bot" in refused.summary
    assert "force=true" in refused.summary
    assert (forced.ok, forced.changed) == (True, True)
    assert forced.summary == "gpu-node-03 uncordoned (forced: the bot had not cordoned it)"
    assert sim.cluster.snapshot().nodes["gpu-node-03"].unschedulable is False


def test_a_human_uncordon_of_a_bot_cordon_is_respected_and_the_marks_removed(
    run_action: RunAction, sim: SimHandle, recorder: Recorder
) -> None:
    run_action("k8s.cordon", node="gpu-node-02", reason="XID 79 on GPU 5")
    _human(sim).patch_node("gpu-node-02", {"spec": {"unschedulable": None}}, _content_type=MERGE)

    result: Any = run_action("k8s.uncordon", node="gpu-node-02").result

    node = sim.cluster.snapshot().nodes["gpu-node-02"]
    assert (result.ok, result.changed) == (True, False)
    assert result.summary == "gpu-node-02 is already schedulable; nothing to do"
    assert node.unschedulable is False
    assert _ours(node.annotations) == {}
    assert "k8s.uncordoned_by_human" in recorder.types()


def test_breaker_refuses_a_second_gpu_node_naming_the_first_and_the_limit(
    run_action: RunAction, sim: SimHandle
) -> None:
    run_action("k8s.cordon", node="gpu-node-01")

    refused: Any = run_action("k8s.cordon", node="gpu-node-02").result

    assert refused.ok is False
    assert "refusing to take gpu-node-02 out of service" in refused.summary
    assert "1 of 4 GPU nodes out of service (gpu-node-01); the limit is 1" in refused.summary
    assert sim.cluster.snapshot().nodes["gpu-node-02"].unschedulable is False
    assert sim.cluster.requests_made("PATCH", "/api/v1/nodes/gpu-node-02") == []


def test_admin_override_lets_the_cordon_through_and_is_recorded(
    run_action: RunAction, sim: SimHandle, recorder: Recorder
) -> None:
    run_action("k8s.cordon", node="gpu-node-01")

    result: Any = run_action(
        "k8s.cordon", ctx_={"admin_override": True, "actor": "bob"}, node="gpu-node-02"
    ).result

    assert (result.ok, result.changed) == (True, True)
    assert sim.cluster.snapshot().nodes["gpu-node-02"].unschedulable is True
    [(_, summary, data)] = [r for r in recorder.records if r[0] == "breaker.override"]
    assert summary.startswith("circuit breaker overridden by bob for gpu-node-02")
    assert data == {"node": "gpu-node-02", "held": ["gpu-node-01"], "limit": 1, "gpu_nodes": 4}


def test_breaker_limit_follows_the_settings(run_action: RunAction, sim: SimHandle) -> None:
    half = {"settings": load_settings(breaker_max_fraction=0.5)}

    results: list[Any] = [
        run_action("k8s.cordon", ctx_=half, node=node).result
        for node in ("gpu-node-01", "gpu-node-02", "gpu-node-03")
    ]

    assert [r.ok for r in results] == [True, True, False]
    assert "(gpu-node-01, gpu-node-02); the limit is 2" in results[2].summary
    cordoned = {n for n, s in sim.cluster.snapshot().nodes.items() if s.unschedulable}
    assert cordoned == {"gpu-node-01", "gpu-node-02"}


def test_a_node_that_does_not_exist_is_named_in_a_clear_message(
    run_action: RunAction, sim: SimHandle
) -> None:
    for name in ("k8s.node_status", "k8s.cordon", "k8s.uncordon"):
        result = run_action(name, node="gpu-node-99").result

        assert result.ok is False
        assert result.summary == (
            "node gpu-node-99 does not exist in the cluster; check the node name "
            "(kubectl get nodes)"
        )
    assert sim.cluster.requests_made("PATCH") == []


def test_a_dry_run_uncordon_after_a_human_uncordon_records_no_removal(
    run_action: RunAction, sim: SimHandle, recorder: Recorder
) -> None:
    run_action("k8s.cordon", node="gpu-node-02")
    _human(sim).patch_node("gpu-node-02", {"spec": {"unschedulable": None}}, _content_type=MERGE)

    run_action("k8s.uncordon", ctx_={"dry_run": True}, node="gpu-node-02")

    assert _ours(sim.cluster.snapshot().nodes["gpu-node-02"].annotations) != {}
    assert "k8s.uncordoned_by_human" not in recorder.types()

"""k8s.pods_by_priority and k8s.stop_low_priority on the simulated cluster through the real
client: which pods are low, the order they are listed in, and what stopping them evicts
(budgets respected) and leaves running."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client

from bot.errors import ParamsInvalid
from bot.sim import SimHandle
from tests.actions.conftest import RunAction

pytestmark = pytest.mark.timeout(60)
NODES = ["gpu-node-01", "gpu-node-02"]


def _bare(sim: SimHandle, namespace: str, name: str, node: str, priority: int, cls: str) -> None:
    pod = {
        "metadata": {"name": name},
        "spec": {
            "nodeName": node,
            "priority": priority,
            "priorityClassName": cls,
            "containers": [{"name": "main", "image": "busybox:1.36"}],
        },
    }
    client.CoreV1Api(sim.api_client()).create_namespaced_pod(namespace, pod)


@pytest.fixture
def classes(sim: SimHandle) -> None:
    """A core service above the threshold and a bare scratch pod below it on gpu-node-02."""
    _bare(sim, "serving", "core-api", "gpu-node-02", 100000, "core")
    _bare(sim, "default", "scratch", "gpu-node-02", 10, "low")


def _uid(sim: SimHandle, namespace: str, name: str) -> str | None:
    pod = sim.cluster.get("Pod", namespace, name)
    return pod["metadata"]["uid"] if pod else None


def test_pods_are_listed_lowest_priority_first_and_only_stoppable_ones_are_low(
    run_action: RunAction, sim: SimHandle, classes: None
) -> None:
    result: Any = run_action("k8s.pods_by_priority", nodes=NODES, below=1000).result

    by_name = {p.name: p for p in result.pods}
    assert result.ok is True
    assert [p.priority for p in result.pods] == sorted(p.priority for p in result.pods)
    assert [p.name for p in result.pods][-3:] == [
        "core-api",
        "kube-proxy-gpu-node-01",  # static pods: system-node-critical
        "kube-proxy-gpu-node-02",
    ]
    assert (by_name["core-api"].low, by_name["core-api"].priority_class) == (False, "core")
    low = sorted(p.name for p in result.pods if p.low)
    assert {"trainer-0", "trainer-1"} <= set(low)
    assert not {"debug-shell", "scratch", "core-api"} & set(low)
    assert "no controller" in by_name["scratch"].kept
    assert "DaemonSet" in next(p for p in result.pods if p.name.startswith("nvidia-dcgm")).kept
    assert result.low == len(low) and result.low_gpus == sum(by_name[n].gpus for n in low)
    assert result.summary.startswith(f"{len(low)} pods below priority 1000")
    assert sim.cluster.requests_made("POST", "*/eviction") == []


def test_stopping_low_priority_evicts_them_through_their_budgets_and_keeps_the_core(
    run_action: RunAction, sim: SimHandle, classes: None
) -> None:
    listed: Any = run_action("k8s.pods_by_priority", nodes=NODES, below=1000).result
    low = {(p.namespace, p.name): _uid(sim, p.namespace, p.name) for p in listed.pods if p.low}
    core = _uid(sim, "serving", "core-api")

    outcome = run_action(
        "k8s.stop_low_priority", nodes=NODES, below=1000, reason="row r7 overheating"
    )

    result: Any = outcome.result
    assert result.ok is True, result.summary
    assert {s.pod for s in result.stopped} == {f"{ns}/{name}" for ns, name in low}
    for (namespace, name), uid in low.items():
        assert _uid(sim, namespace, name) != uid, f"{namespace}/{name} still runs"
    assert _uid(sim, "serving", "core-api") == core
    assert _uid(sim, "default", "debug-shell") is not None
    assert _uid(sim, "default", "scratch") is not None
    evicted = {r.path.split("/")[-2] for r in sim.cluster.requests_made("POST", "*/eviction")}
    assert evicted == {name for _, name in low}
    assert not sim.cluster.snapshot().nodes["gpu-node-01"].unschedulable
    assert result.gpus_freed == sum(p.gpus for p in listed.pods if p.low)


def test_a_dry_run_names_what_it_would_stop_and_stops_nothing(
    run_action: RunAction, sim: SimHandle, classes: None
) -> None:
    result: Any = run_action(
        "k8s.stop_low_priority", {"dry_run": True}, nodes=["gpu-node-02"], below=1000
    ).result

    assert result.summary.startswith("would stop")
    assert result.changed is False
    assert _uid(sim, "ml", "trainer-1") is not None


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"nodes": ["gpu-node-01"]}, "below"),
        ({"nodes": [], "below": 1000}, "nodes"),
        ({"nodes": ["gpu-node-01;reboot"], "below": 1000}, "not a valid Kubernetes name"),
        ({"nodes": ["gpu-node-01"], "below": 2000000000}, "below"),
    ],
)
def test_bad_parameters_are_refused_before_any_request(
    run_action: RunAction, sim: SimHandle, raw: dict[str, Any], message: str
) -> None:
    with pytest.raises(ParamsInvalid) as refused:
        run_action("k8s.stop_low_priority", **raw)

    assert message in str(refused.value)
    assert sim.cluster.requests_made() == []


def test_a_name_that_is_not_a_node_is_named(run_action: RunAction, sim: SimHandle) -> None:
    result: Any = run_action(
        "k8s.pods_by_priority", nodes=["gpu-node-03", "gpu-node-99"], below=1000
    ).result

    assert result.ok is False
    assert result.missing == ["gpu-node-99"]
    assert result.summary.endswith("not nodes: gpu-node-99 (kubectl get nodes)")


def test_a_runbook_may_give_the_nodes_as_one_comma_separated_string(
    run_action: RunAction, sim: SimHandle
) -> None:
    result: Any = run_action(
        "k8s.pods_by_priority", nodes="gpu-node-01, gpu-node-02", below="1000"
    ).result

    assert {p.node for p in result.pods} == set(NODES)
    assert result.threshold == 1000

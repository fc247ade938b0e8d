"""The cluster's test hooks: trouble arranged in Python, seen through the real client."""

from __future__ import annotations

import time
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client import ApiException

from bot.sim import SimHandle
from tests.sim.waiting import TIME_SCALE, eventually


def _evict(core: client.CoreV1Api, ns: str, name: str) -> Any:
    body = client.V1Eviction(metadata=client.V1ObjectMeta(name=name, namespace=ns))
    return core.create_namespaced_pod_eviction(name, ns, body)


def test_a_stuck_pod_stays_terminating_past_its_grace_period(sim: SimHandle, api: Any) -> None:
    core = client.CoreV1Api(api)
    sim.cluster.make_stuck("ml", "trainer-2")

    _evict(core, "ml", "trainer-2")
    time.sleep(5 * TIME_SCALE * 4)  # four times the scaled 5 s grace period

    pod = core.read_namespaced_pod("trainer-2", "ml")
    assert pod.metadata.deletion_timestamp is not None
    assert ("ml", "trainer-2") in sim.cluster.snapshot().terminating


def test_a_rebound_pod_keeps_its_name_with_a_new_uid_on_another_node(
    sim: SimHandle, api: Any
) -> None:
    core = client.CoreV1Api(api)
    before = core.read_namespaced_pod("trainer-3", "ml")

    sim.cluster.rebind("ml", "trainer-3", "gpu-node-01")

    after = core.read_namespaced_pod("trainer-3", "ml")
    assert after.metadata.uid != before.metadata.uid
    assert (before.spec.node_name, after.spec.node_name) == ("gpu-node-04", "gpu-node-01")
    assert after.status.phase == "Running"


def test_injected_eviction_failures_come_first_then_the_eviction_works(
    sim: SimHandle, api: Any
) -> None:
    core = client.CoreV1Api(api)
    sim.cluster.fail_evictions("ml", "trainer-2", 500, times=2)
    sim.cluster.fail_evictions("ml", "trainer-2", 429)

    statuses = []
    for _ in range(3):
        with pytest.raises(ApiException) as failed:
            _evict(core, "ml", "trainer-2")
        statuses.append(failed.value.status)
    bodies = failed.value.body
    _evict(core, "ml", "trainer-2")

    assert statuses == [500, 500, 429]
    assert "The disruption budget trainer-pdb needs" in bodies
    assert ("ml", "trainer-2") in sim.cluster.snapshot().terminating


def test_injected_request_faults_answer_the_next_n_matching_requests(
    sim: SimHandle, api: Any
) -> None:
    core = client.CoreV1Api(api)
    sim.cluster.fail_requests("/api/v1/nodes", 503, times=1)
    sim.cluster.fail_requests("/api/v1/namespaces/*/pods", 429, times=1)
    # With Retry-After, urllib3 itself retries idempotent GETs; a POST shows the header.
    sim.cluster.fail_requests("*/eviction", 429, method="POST", retry_after=7)

    with pytest.raises(ApiException) as unavailable:
        core.list_node()
    nodes = core.list_node()
    with pytest.raises(ApiException) as throttled:
        core.list_namespaced_pod("ml")
    pods = core.list_namespaced_pod("ml")
    with pytest.raises(ApiException) as later:
        _evict(core, "ml", "trainer-2")

    assert unavailable.value.status == 503
    assert '"reason":"ServiceUnavailable"' in unavailable.value.body
    assert throttled.value.status == 429 and '"reason":"TooManyRequests"' in throttled.value.body
    assert later.value.status == 429 and later.value.headers["Retry-After"] == "7"
    assert len(nodes.items) == 4 and len(pods.items) == 4
    log = [(r.method, r.path, r.status) for r in sim.cluster.requests_made(path="/api/v1/*")]
    assert log == [
        ("GET", "/api/v1/nodes", 503),
        ("GET", "/api/v1/nodes", 200),
        ("GET", "/api/v1/namespaces/ml/pods", 429),
        ("GET", "/api/v1/namespaces/ml/pods", 200),
        ("POST", "/api/v1/namespaces/ml/pods/trainer-2/eviction", 429),
    ]
    assert ("ml", "trainer-2") not in sim.cluster.snapshot().terminating


def test_request_log_keeps_method_path_and_query(sim: SimHandle, api: Any) -> None:
    core = client.CoreV1Api(api)

    core.list_pod_for_all_namespaces(field_selector="spec.nodeName=gpu-node-02")
    core.read_node("gpu-node-02")
    core.read_node("gpu-node-02")

    listed = sim.cluster.requests_made("GET", "/api/v1/pods")
    assert [r.query for r in listed] == [{"fieldSelector": "spec.nodeName=gpu-node-02"}]
    assert len(sim.cluster.requests_made("GET", "/api/v1/nodes/gpu-node-02")) == 2


def test_an_added_node_gets_daemonset_and_mirror_pods(sim: SimHandle, api: Any) -> None:
    core = client.CoreV1Api(api)

    sim.cluster.add_node("gpu-node-05")

    def settled() -> set[tuple[str, str]] | None:
        on_node = sim.cluster.snapshot().pods_on("gpu-node-05")
        return on_node if len(on_node) == 3 else None

    pods = eventually(settled, what="the new node's system pods")
    assert {ns for ns, _ in pods} == {"gpu-operator", "kube-system"}
    listed = core.list_pod_for_all_namespaces(field_selector="spec.nodeName=gpu-node-05")
    eventually(
        lambda: all(
            p.status.phase == "Running"
            for p in core.list_pod_for_all_namespaces(
                field_selector="spec.nodeName=gpu-node-05"
            ).items
        ),
        what="them to run",
    )
    assert len(listed.items) == 3


def test_a_removed_node_loses_its_pods_and_the_trainer_moves(sim: SimHandle) -> None:
    sim.cluster.remove_node("gpu-node-04")

    def moved() -> bool:
        trainer = sim.cluster.get("Pod", "ml", "trainer-3")
        return trainer is not None and trainer["spec"].get("nodeName", "") not in (
            "",
            "gpu-node-04",
        )

    eventually(moved, what="trainer-3 to be recreated elsewhere")
    snapshot = sim.cluster.snapshot()
    assert "gpu-node-04" not in snapshot.nodes
    assert snapshot.pods_on("gpu-node-04") == set()


def test_added_and_removed_pods_show_in_the_api(sim: SimHandle, api: Any) -> None:
    core = client.CoreV1Api(api)

    sim.cluster.add_pod("default", "scratch", "gpu-node-03", gpus=1, labels={"app": "scratch"})
    added = core.list_namespaced_pod("default", label_selector="app=scratch")
    sim.cluster.remove_pod("default", "scratch")

    assert [(p.metadata.name, p.spec.node_name) for p in added.items] == [
        ("scratch", "gpu-node-03")
    ]
    assert added.items[0].metadata.owner_references is None
    assert core.list_namespaced_pod("default", label_selector="app=scratch").items == []


def test_a_not_ready_node_is_reported_and_not_scheduled_to(sim: SimHandle, api: Any) -> None:
    core = client.CoreV1Api(api)
    for name in ("gpu-node-01", "gpu-node-03"):
        sim.cluster.set_node_ready(name, False)
    core.patch_node("gpu-node-02", {"spec": {"unschedulable": True}})

    core.delete_namespaced_pod("trainer-3", "ml", grace_period_seconds=0)

    def placed() -> str | None:
        pod = sim.cluster.get("Pod", "ml", "trainer-3")
        return pod["spec"].get("nodeName") if pod else None

    assert eventually(placed, what="trainer-3 to be placed") == "gpu-node-04"
    node = core.read_node("gpu-node-01")
    assert [c.status for c in node.status.conditions if c.type == "Ready"] == ["False"]
    assert sim.cluster.snapshot().nodes["gpu-node-01"].ready is False

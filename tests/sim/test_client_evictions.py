"""Evictions through the official client: PodDisruptionBudget accounting as the real API does it."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client
from kubernetes.client import ApiException

from bot.sim import SimHandle, crowded_node, running
from tests.sim.waiting import TIME_SCALE, eventually


def _evict(core: client.CoreV1Api, ns: str, name: str, **kwargs: Any) -> Any:
    body = client.V1Eviction(metadata=client.V1ObjectMeta(name=name, namespace=ns))
    return core.create_namespaced_pod_eviction(name, ns, body, **kwargs)


def test_eviction_blocked_by_budget_gets_429_naming_it_until_replacement_is_ready(
    sim: SimHandle, api: Any
) -> None:
    core = client.CoreV1Api(api)

    accepted = _evict(core, "ml", "trainer-0")
    terminating = core.read_namespaced_pod("trainer-0", "ml")
    with pytest.raises(ApiException) as blocked:
        _evict(core, "ml", "trainer-1")

    assert accepted.kind == "Status"
    assert terminating.metadata.deletion_timestamp is not None
    assert terminating.metadata.deletion_grace_period_seconds == 5
    assert blocked.value.status == 429
    assert blocked.value.headers.get("Retry-After") is None
    assert (
        '"causes":[{"reason":"DisruptionBudget","message":"The disruption budget trainer-pdb '
        'needs 3 healthy pods and has 3 currently"}]' in blocked.value.body
    )

    def replaced() -> bool:
        pod = core.read_namespaced_pod("trainer-0", "ml")
        fresh = pod.metadata.uid != terminating.metadata.uid
        return fresh and pod.status.phase == "Running" and pod.metadata.deletion_timestamp is None

    eventually(replaced, what="trainer-0 to be replaced and ready")
    moved = core.read_namespaced_pod("trainer-0", "ml")
    _evict(core, "ml", "trainer-1")

    assert moved.spec.node_name != "gpu-node-01"
    assert core.read_namespaced_pod("trainer-1", "ml").metadata.deletion_timestamp is not None


def test_eviction_of_a_gone_pod_is_404_status(api: Any) -> None:
    core = client.CoreV1Api(api)

    with pytest.raises(ApiException) as gone:
        _evict(core, "ml", "trainer-9")

    assert gone.value.status == 404
    assert '"reason":"NotFound"' in gone.value.body
    assert 'pods \\"trainer-9\\" not found' in gone.value.body


def test_crowded_node_budget_allows_exactly_max_unavailable_evictions() -> None:
    with running(crowded_node(pods=110, under_pdb=20), time_scale=TIME_SCALE) as sim:
        sim.cluster.make_stuck("ml", "shard-0")  # hold the budget spent once it is used
        core = client.CoreV1Api(sim.api_client())
        core.patch_node("gpu-node-01", {"spec": {"unschedulable": True}})
        on_node = core.list_pod_for_all_namespaces(field_selector="spec.nodeName=gpu-node-01")
        outcomes: dict[str, list[str]] = {"evicted": [], "refused": []}

        for pod in sorted(on_node.items, key=lambda p: p.metadata.name):
            try:
                _evict(core, pod.metadata.namespace, pod.metadata.name)
                outcomes["evicted"].append(pod.metadata.name)
            except ApiException as exc:
                assert exc.status == 429, exc.body
                outcomes["refused"].append(pod.metadata.name)

        assert len(on_node.items) == 110
        assert len(outcomes["evicted"]) == 91 and "shard-0" in outcomes["evicted"]
        assert sorted(outcomes["refused"]) == sorted(f"shard-{i}" for i in range(1, 20))
        budget = client.PolicyV1Api(sim.api_client()).read_namespaced_pod_disruption_budget(
            "shard-pdb", "ml"
        )
        assert budget.spec.max_unavailable == 1

        def workers_moved() -> bool:
            return len(sim.cluster.snapshot().pods_on("gpu-node-02")) == 90

        eventually(workers_moved, what="the 90 workers to be recreated on gpu-node-02")

"""The official `kubernetes` client writes: patches, dry runs, deletes, leases, events, queues."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client
from kubernetes.client import ApiException

from bot.sim import SimHandle


def test_cordon_patch_records_annotations_and_null_deletes_them(sim: SimHandle, api: Any) -> None:
    core = client.CoreV1Api(api)

    cordoned = core.patch_node(
        "gpu-node-03",
        {"spec": {"unschedulable": True}, "metadata": {"annotations": {"runbook-bot/by": "ana"}}},
    )
    uncordoned = core.patch_node(
        "gpu-node-03",
        {"spec": {"unschedulable": None}, "metadata": {"annotations": {"runbook-bot/by": None}}},
    )

    assert cordoned.spec.unschedulable is True
    assert cordoned.metadata.annotations["runbook-bot/by"] == "ana"
    assert not uncordoned.spec.unschedulable
    assert "runbook-bot/by" not in uncordoned.metadata.annotations
    assert int(uncordoned.metadata.resource_version) > int(cordoned.metadata.resource_version)
    state = sim.cluster.snapshot().nodes["gpu-node-03"]
    assert state.unschedulable is False and "runbook-bot/by" not in state.annotations


def test_json_patch_replaces_taints_and_a_failed_test_op_changes_nothing(
    sim: SimHandle, api: Any
) -> None:
    core = client.CoreV1Api(api)
    taint = {"key": "runbook-bot/xid", "value": "79", "effect": "NoSchedule"}

    patched = core.patch_node(
        "gpu-node-04", [{"op": "add", "path": "/spec/taints", "value": [taint]}]
    )
    with pytest.raises(ApiException) as failed:
        core.patch_node(
            "gpu-node-04",
            [
                {"op": "test", "path": "/spec/taints/0/value", "value": "48"},
                {"op": "remove", "path": "/spec/taints"},
            ],
        )

    assert [(t.key, t.value, t.effect) for t in patched.spec.taints] == [
        ("runbook-bot/xid", "79", "NoSchedule")
    ]
    assert failed.value.status == 422
    assert sim.cluster.snapshot().nodes["gpu-node-04"].taints == [taint]


def _evict(core: client.CoreV1Api, ns: str, name: str, **kwargs: Any) -> Any:
    body = client.V1Eviction(metadata=client.V1ObjectMeta(name=name, namespace=ns))
    return core.create_namespaced_pod_eviction(name, ns, body, **kwargs)


def test_dry_run_patch_and_delete_answer_but_change_nothing(sim: SimHandle, api: Any) -> None:
    core = client.CoreV1Api(api)
    before = sim.cluster.snapshot()

    preview = core.patch_node("gpu-node-01", {"spec": {"unschedulable": True}}, dry_run="All")
    deleted = core.delete_namespaced_pod("trainer-2", "ml", dry_run="All")
    _evict(core, "ml", "trainer-3", dry_run="All")

    assert preview.spec.unschedulable is True
    assert deleted.metadata.deletion_timestamp is not None
    after = sim.cluster.snapshot()
    assert after.nodes == before.nodes and after.pods == before.pods
    assert after.terminating == frozenset()
    assert after.resource_version == before.resource_version


def test_invalid_taint_effect_is_refused_with_422_and_not_stored(sim: SimHandle, api: Any) -> None:
    core = client.CoreV1Api(api)

    with pytest.raises(ApiException) as refused:
        core.patch_node("gpu-node-01", {"spec": {"taints": [{"key": "x", "effect": "Sometimes"}]}})

    assert refused.value.status == 422
    assert sim.cluster.snapshot().nodes["gpu-node-01"].taints == []


def test_delete_with_grace_zero_removes_the_pod_at_once(sim: SimHandle, api: Any) -> None:
    core = client.CoreV1Api(api)

    core.delete_namespaced_pod("debug-shell", "default", grace_period_seconds=0)

    assert ("default", "debug-shell", "gpu-node-01") not in sim.cluster.snapshot().pods
    with pytest.raises(ApiException) as gone:
        core.read_namespaced_pod("debug-shell", "default")
    assert gone.value.status == 404


def test_lease_create_update_conflict_and_delete(api: Any) -> None:
    leases = client.CoordinationV1Api(api)
    body = client.V1Lease(
        metadata=client.V1ObjectMeta(name="runbook-bot-worker"),
        spec=client.V1LeaseSpec(holder_identity="replica-a", lease_duration_seconds=15),
    )

    leases.create_namespaced_lease("default", body)
    created = leases.read_namespaced_lease("runbook-bot-worker", "default")
    created.spec.holder_identity = "replica-b"
    updated = leases.replace_namespaced_lease("runbook-bot-worker", "default", created)
    with pytest.raises(ApiException) as stale:
        leases.replace_namespaced_lease("runbook-bot-worker", "default", created)
    with pytest.raises(ApiException) as duplicate:
        leases.create_namespaced_lease("default", body)
    leases.delete_namespaced_lease("runbook-bot-worker", "default")

    assert updated.spec.holder_identity == "replica-b"
    assert stale.value.status == 409 and '"reason":"Conflict"' in stale.value.body
    assert duplicate.value.status == 409 and '"reason":"AlreadyExists"' in duplicate.value.body
    assert leases.list_namespaced_lease("default").items == []


def test_events_can_be_created_and_listed_by_involved_object(api: Any) -> None:
    core = client.CoreV1Api(api)
    event = client.CoreV1Event(
        metadata=client.V1ObjectMeta(generate_name="gpu-node-02."),
        involved_object=client.V1ObjectReference(kind="Node", name="gpu-node-02"),
        reason="RunbookBotCordon",
        message="cordoned by INC-7",
        type="Normal",
    )

    core.create_namespaced_event("default", event)
    found = core.list_event_for_all_namespaces(field_selector="involvedObject.name=gpu-node-02")

    assert [e.reason for e in found.items] == ["RunbookBotCordon"]
    assert found.items[0].metadata.name.startswith("gpu-node-02.")


def test_volcano_queue_can_be_closed_through_the_status_subresource(
    sim: SimHandle, api: Any
) -> None:
    custom = client.CustomObjectsApi(api)
    group, version, plural = "scheduling.volcano.sh", "v1beta1", "queues"

    weighted = custom.patch_cluster_custom_object(
        group, version, plural, "default", {"spec": {"weight": 4}}
    )
    closed = custom.patch_cluster_custom_object_status(
        group, version, plural, "default", {"status": {"state": "Closed"}}
    )
    listed = custom.list_cluster_custom_object(group, version, plural)

    assert weighted["spec"]["weight"] == 4 and weighted["status"]["state"] == "Open"
    assert closed["status"]["state"] == "Closed" and closed["spec"]["weight"] == 4
    assert [q["metadata"]["name"] for q in listed["items"]] == ["default"]
    stored = sim.cluster.get("Queue", None, "default")
    assert stored is not None and stored["status"]["state"] == "Closed"

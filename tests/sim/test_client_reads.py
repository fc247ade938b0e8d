"""The official `kubernetes` client reads the simulator: complete models, selectors, paging."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client
from kubernetes.client import ApiException

from bot.sim import SimHandle


def test_nodes_come_back_as_complete_gpu_models(api: Any) -> None:
    nodes = client.CoreV1Api(api).list_node(label_selector="nvidia.com/gpu.present=true")

    assert [n.metadata.name for n in nodes.items] == [f"gpu-node-0{i}" for i in range(1, 5)]
    node = nodes.items[0]
    assert node.status.capacity["nvidia.com/gpu"] == "8"
    assert node.status.allocatable["nvidia.com/gpu"] == "8"
    assert node.metadata.labels["kubernetes.io/hostname"] == "gpu-node-01"
    ready = [c for c in node.status.conditions if c.type == "Ready"]
    assert ready[0].status == "True" and ready[0].last_transition_time is not None
    assert node.status.node_info.kubelet_version == "v1.32.4"
    assert int(nodes.metadata.resource_version) > 0


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("kubernetes.io/hostname=gpu-node-02", ["gpu-node-02"]),
        ("kubernetes.io/hostname!=gpu-node-02", ["gpu-node-01", "gpu-node-03", "gpu-node-04"]),
        ("kubernetes.io/hostname in (gpu-node-01,gpu-node-04)", ["gpu-node-01", "gpu-node-04"]),
        ("nvidia.com/gpu.present", ["gpu-node-01", "gpu-node-02", "gpu-node-03", "gpu-node-04"]),
        ("!nvidia.com/gpu.present", []),
    ],
)
def test_node_label_selectors_filter_like_the_api(
    api: Any, selector: str, expected: list[str]
) -> None:
    nodes = client.CoreV1Api(api).list_node(label_selector=selector)

    assert [n.metadata.name for n in nodes.items] == expected


def test_pods_by_node_field_selector_are_exactly_that_nodes_pods(sim: SimHandle, api: Any) -> None:
    core = client.CoreV1Api(api)

    listed = core.list_pod_for_all_namespaces(field_selector="spec.nodeName=gpu-node-01")

    found = {(p.metadata.namespace, p.metadata.name) for p in listed.items}
    assert found == sim.cluster.snapshot().pods_on("gpu-node-01")
    assert ("default", "debug-shell") in found and ("ml", "trainer-0") in found
    assert all(p.spec.node_name == "gpu-node-01" and p.spec.containers for p in listed.items)
    mirror = core.read_namespaced_pod("kube-proxy-gpu-node-01", "kube-system")
    assert "kubernetes.io/config.mirror" in mirror.metadata.annotations


def test_field_selectors_combine_and_unknown_fields_are_refused(api: Any) -> None:
    core = client.CoreV1Api(api)

    running = core.list_namespaced_pod(
        "ml", field_selector="status.phase=Running,metadata.name!=trainer-0"
    )
    with pytest.raises(ApiException) as refused:
        core.list_pod_for_all_namespaces(field_selector="spec.bogus=1")

    assert [p.metadata.name for p in running.items] == ["trainer-1", "trainer-2", "trainer-3"]
    assert refused.value.status == 400


def test_lists_page_with_limit_and_continue(api: Any) -> None:
    core = client.CoreV1Api(api)

    first = core.list_pod_for_all_namespaces(limit=5)
    rest = core.list_pod_for_all_namespaces(_continue=first.metadata._continue)
    everything = core.list_pod_for_all_namespaces()

    assert len(first.items) == 5 and first.metadata.remaining_item_count == len(rest.items)
    names = [p.metadata.name for p in first.items + rest.items]
    assert names == [p.metadata.name for p in everything.items]


def test_workloads_budgets_and_storage_read_back_as_models(api: Any) -> None:
    apps, core = client.AppsV1Api(api), client.CoreV1Api(api)

    ds = apps.list_daemon_set_for_all_namespaces()
    sts = apps.read_namespaced_stateful_set("trainer", "ml")
    rs = apps.list_namespaced_replica_set("serving")
    pdbs = client.PolicyV1Api(api).list_pod_disruption_budget_for_all_namespaces()
    claim = core.read_namespaced_persistent_volume_claim("datasets", "ml")
    volume = core.read_persistent_volume(claim.spec.volume_name)
    classes = client.StorageV1Api(api).list_storage_class()
    namespaces = core.list_namespace()

    assert {d.metadata.name for d in ds.items} == {
        "nvidia-device-plugin-daemonset",
        "nvidia-dcgm-exporter",
    }
    assert all(d.status.number_ready == 4 for d in ds.items)
    assert sts.spec.replicas == 4 and sts.status.ready_replicas == 4
    assert rs.items[0].status.replicas == 2
    budgets = {b.metadata.name: b for b in pdbs.items}
    assert budgets["trainer-pdb"].spec.min_available == 3
    assert budgets["trainer-pdb"].status.disruptions_allowed == 1
    assert budgets["llm-inference-pdb"].status.desired_healthy == 1
    assert claim.status.phase == "Bound" and volume.spec.nfs.path == "/exports/datasets"
    assert [c.provisioner for c in classes.items] == ["nfs.csi.k8s.io"]
    assert {"ml", "serving", "gpu-operator", "default"} <= {
        n.metadata.name for n in namespaces.items
    }

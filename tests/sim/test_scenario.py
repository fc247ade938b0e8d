"""Scenarios: the shipped seed, strict validation, and the shapes built in code."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.sim import Cluster, ScenarioInvalid, crowded_node, load, seed
from bot.sim.presets import SEED


def _kinds_on(cluster: Cluster, node: str) -> dict[str, int]:
    counts: dict[str, int] = {}
    for pod in cluster.objects("Pod"):
        if pod["spec"].get("nodeName") != node:
            continue
        refs = pod["metadata"].get("ownerReferences") or [{"kind": "none"}]
        counts[refs[0]["kind"]] = counts.get(refs[0]["kind"], 0) + 1
    return counts


def test_seed_scenario_has_the_promised_shape() -> None:
    scenario = load(SEED)
    cluster = Cluster(scenario)

    assert scenario.node_names() == ["gpu-node-01", "gpu-node-02", "gpu-node-03", "gpu-node-04"]
    assert _kinds_on(cluster, "gpu-node-01") == {
        "DaemonSet": 2,
        "Node": 1,
        "StatefulSet": 1,
        "none": 1,
    }
    assert _kinds_on(cluster, "gpu-node-02") == {
        "DaemonSet": 2,
        "Node": 1,
        "StatefulSet": 1,
        "ReplicaSet": 1,
    }
    trainer = cluster.get("Pod", "ml", "trainer-0")
    inference = cluster.objects("Pod", "serving")[0]
    assert trainer is not None
    assert trainer["spec"]["volumes"] == [
        {"name": "datasets", "persistentVolumeClaim": {"claimName": "datasets"}}
    ]
    assert inference["spec"]["volumes"] == [{"name": "model-cache", "emptyDir": {}}]
    queue = cluster.get("Queue", None, "default")
    assert queue is not None and queue["status"]["state"] == "Open"
    assert scenario.commands[0].command == ["nvidia-smi"]


def test_seed_knobs_change_grace_startup_and_node_count() -> None:
    scenario = seed(nodes=6, grace_seconds=3, startup_seconds=0.5)
    cluster = Cluster(scenario)

    trainer = cluster.get("Pod", "ml", "trainer-1")
    assert trainer is not None and trainer["spec"]["terminationGracePeriodSeconds"] == 3
    assert scenario.startup_seconds == 0.5
    assert len(cluster.objects("Node")) == 6
    assert _kinds_on(cluster, "gpu-node-06") == {"DaemonSet": 2, "Node": 1}


def test_crowded_node_holds_exactly_the_pods_asked_for() -> None:
    cluster = Cluster(crowded_node(pods=110, under_pdb=20))

    on_node = [p for p in cluster.objects("Pod") if p["spec"].get("nodeName") == "gpu-node-01"]
    shards = [p for p in on_node if p["metadata"]["namespace"] == "ml"]
    budget = cluster.get("PodDisruptionBudget", "ml", "shard-pdb")

    assert len(on_node) == 110 and len(shards) == 20
    assert all(p["status"]["phase"] == "Running" for p in on_node)
    assert budget is not None and budget["spec"]["maxUnavailable"] == 1
    assert cluster.snapshot().pods_on("gpu-node-02") == set()


def test_unknown_keys_are_refused_naming_where(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("name: x\nnodes:\n  - count: 2\n    gpu: 8\n", encoding="utf-8")

    with pytest.raises(ScenarioInvalid) as refused:
        load(path)

    assert "nodes.0.gpu" in str(refused.value) and str(path) in str(refused.value)


@pytest.mark.parametrize(
    ("text", "complaint"),
    [
        ("name: x\nbare_pods: [{namespace: a, name: b, node: gpu-node-09}]\n", "gpu-node-09"),
        (
            "name: x\nworkloads: [{kind: ReplicaSet, namespace: a, name: b, replicas: 1,"
            " budget: {min_available: 1, max_unavailable: 1}}]\n",
            "exactly one",
        ),
        ("name: x\ncommands: [{command: [], output: hi}]\n", "commands.0.command"),
        ("name: x\nnodes: [{count: '4'}]\n", "nodes.0.count"),
        ("name: [unclosed\n", "not valid YAML"),
    ],
)
def test_invalid_scenarios_are_refused_with_the_reason(
    tmp_path: Path, text: str, complaint: str
) -> None:
    path = tmp_path / "scenario.yaml"
    path.write_text(text, encoding="utf-8")

    with pytest.raises(ScenarioInvalid) as refused:
        load(path)

    assert complaint in str(refused.value)


def test_a_missing_scenario_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ScenarioInvalid, match="cannot read scenario"):
        load(tmp_path / "absent.yaml")

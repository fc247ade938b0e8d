"""Scenarios built in code: the shipped seed with knobs turned, and shapes for tests and
benchmarks (one crowded node). Each returns a validated `Scenario`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from bot.sim.scenario import Scenario, parse

SCENARIOS = Path(__file__).parent / "scenarios"
SEED = SCENARIOS / "gpu-cluster.yaml"


def seed(
    *,
    nodes: int = 4,
    grace_seconds: int | None = None,
    startup_seconds: float | None = None,
) -> Scenario:
    """The shipped `gpu-cluster` scenario; `nodes` (at least 4) adds empty GPU nodes."""
    if nodes < 4:
        raise ValueError("the seed scenario places its trainers on four nodes; use nodes >= 4")
    data: dict[str, Any] = yaml.safe_load(SEED.read_text(encoding="utf-8"))
    data["nodes"][0]["count"] = nodes
    if grace_seconds is not None:
        data["termination_grace_seconds"] = grace_seconds
    if startup_seconds is not None:
        data["startup_seconds"] = startup_seconds
    return parse(data, source=str(SEED))


def crowded_node(
    *,
    pods: int = 110,
    under_pdb: int = 20,
    max_unavailable: int | str = 1,
    spare_nodes: int = 1,
    grace_seconds: int = 1,
    startup_seconds: float = 0.5,
) -> Scenario:
    """`gpu-node-01` running exactly `pods` pods, `under_pdb` of them (StatefulSet
    ml/shard) under a budget; the rest are ReplicaSet batch/workers. `spare_nodes` empty
    nodes take the replacements. No DaemonSets or static pods, so the count is exact.
    """
    if not 0 <= under_pdb <= pods:
        raise ValueError("under_pdb must be between 0 and pods")
    workloads: list[dict[str, Any]] = []
    if pods - under_pdb:
        workloads.append(
            {
                "kind": "ReplicaSet",
                "namespace": "batch",
                "name": "workers",
                "replicas": pods - under_pdb,
                "image": "busybox:1.36",
                "nodes": ["gpu-node-01"],
            }
        )
    if under_pdb:
        workloads.append(
            {
                "kind": "StatefulSet",
                "namespace": "ml",
                "name": "shard",
                "replicas": under_pdb,
                "image": "busybox:1.36",
                "nodes": ["gpu-node-01"],
                "budget": {"name": "shard-pdb", "max_unavailable": max_unavailable},
            }
        )
    data = {
        "name": f"crowded-node-{pods}",
        "termination_grace_seconds": grace_seconds,
        "startup_seconds": startup_seconds,
        "nodes": [{"count": 1 + spare_nodes, "max_pods": pods + 10}],
        "workloads": workloads,
    }
    return parse(data, source="crowded_node()")

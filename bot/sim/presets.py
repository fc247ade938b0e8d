"""Scenarios built in code: the shipped seed with knobs turned, and shapes for tests and
benchmarks (one crowded node). Each returns a validated `Scenario`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from bot.sim.fleet import LEAF, PDU, RACK, ROW, Fleet
from bot.sim.scenario import Scenario, parse

SCENARIOS = Path(__file__).parent / "scenarios"
SEED = SCENARIOS / "gpu-cluster.yaml"
DEMO_ROWS: dict[str, list[str]] = {
    "a": ["gpu-node-01", "gpu-node-02"],
    "b": ["gpu-node-03", "gpu-node-04"],
}
"""The demo's data hall: two rows of one rack each, two nodes a rack, one InfiniBand leaf
switch and one power feed per rack (row a: rack a1, ib-leaf-01, pdu-a1)."""
NFS_SERVER = "nfs.storage.svc.cluster.local"
"""The server of the seed's datasets claim (every node mounts it)."""


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


def demo_hall(*, grace_seconds: int | None = None, startup_seconds: float | None = None) -> Fleet:
    """The seed scenario laid out as `DEMO_ROWS`: each node carries the topology labels
    `bot.sim.fleet.LEVELS` reads (row, rack, leaf switch, power feed), so a hot row is one
    failure domain. The `Fleet` names each domain's nodes for `storms`."""
    data: dict[str, Any] = yaml.safe_load(SEED.read_text(encoding="utf-8"))
    (pool,) = data["nodes"]
    rows = {row: list(nodes) for row, nodes in DEMO_ROWS.items()}
    racks = {f"{row}1": nodes for row, nodes in rows.items()}
    leaves = {f"ib-leaf-{i:02d}": nodes for i, nodes in enumerate(rows.values(), 1)}
    pdus = {f"pdu-{rack}": nodes for rack, nodes in racks.items()}
    labels: dict[str, dict[str, str]] = {}
    for key, domains in ((ROW, rows), (RACK, racks), (LEAF, leaves), (PDU, pdus)):
        for value, nodes in domains.items():
            for node in nodes:
                labels.setdefault(node, {})[key] = value
    prefix = pool.get("prefix", "gpu-node-")
    data["nodes"] = [
        {
            **pool,
            "count": 1,
            "first": int(node.removeprefix(prefix)),
            "labels": {**pool.get("labels", {}), **labels[node]},
        }
        for node in sorted(labels)
    ]
    if grace_seconds is not None:
        data["termination_grace_seconds"] = grace_seconds
    if startup_seconds is not None:
        data["startup_seconds"] = startup_seconds
    scenario = parse(data, source=f"{SEED} (the demo's rows)")
    every = scenario.node_names()
    return Fleet(
        scenario,
        rows=rows,
        racks=racks,
        leaves=leaves,
        pdus=pdus,
        nfs={NFS_SERVER: every},
        gpus=int(pool.get("gpus", 8)),
    )


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

"""A GPU fleet at scale with its failure domains: rows, racks, InfiniBand leaf switches,
power feeds, and the NFS servers the nodes mount.

`fleet(nodes=1000)` lays the nodes out as a data hall would: racks of 8 nodes
(`topology.example.com/rack`: a1..a4), rows of 4 racks, 32 nodes
(`topology.example.com/row`: a, b, ..., z, aa, ab, ...), one InfiniBand leaf switch per 2
racks, 16 nodes (`topology.example.com/ib-leaf`: ib-leaf-01, ...), one power feed per rack
(`topology.example.com/pdu`: pdu-a1, ...), 8 GPUs on each (`nvidia.com/gpu.present=true`),
and 5 NFS servers, each mounted by a consecutive fifth of the fleet (200 nodes). The
`Fleet` it returns holds the `Scenario` and which nodes are in which domain, which the
scenario events of `storms` break. `LEVELS` is the `topology.levels` setting that reads
these labels.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from bot.sim.scenario import Scenario, parse

ROW = "topology.example.com/row"
RACK = "topology.example.com/rack"
LEAF = "topology.example.com/ib-leaf"
PDU = "topology.example.com/pdu"
LEVELS: list[dict[str, str]] = [
    {"name": "row", "label": ROW},
    {"name": "rack", "label": RACK},
    {"name": "leaf", "label": LEAF},
    {"name": "power", "label": PDU},
]
"""The `topology.levels` setting for a fleet, widest first."""
NFS_EXPORT = "/exports/datasets"
NFS_MOUNT = "/datasets"


def row_name(index: int) -> str:
    """Rows as a data hall letters them: a..z, then aa, ab, ... (0-based `index`)."""
    name = ""
    index += 1
    while index:
        index, rest = divmod(index - 1, 26)
        name = chr(ord("a") + rest) + name
    return name


def nfs_server(index: int) -> str:
    """The host name of NFS server `index` (1-based)."""
    return f"nfs-{index:02d}.storage.svc.cluster.local"


@dataclass(frozen=True)
class Fleet:
    """A fleet scenario and its failure domains: each domain's nodes, in name order."""

    scenario: Scenario
    rows: dict[str, list[str]] = field(default_factory=dict)
    racks: dict[str, list[str]] = field(default_factory=dict)
    leaves: dict[str, list[str]] = field(default_factory=dict)
    pdus: dict[str, list[str]] = field(default_factory=dict)
    nfs: dict[str, list[str]] = field(default_factory=dict)
    """NFS server host -> the nodes that mount its export."""
    gpus: int = 8

    @property
    def nodes(self) -> list[str]:
        return self.scenario.node_names()

    def nfs_of(self, node: str) -> str:
        """The NFS server `node` mounts its datasets from."""
        for server, nodes in self.nfs.items():
            if node in nodes:
                return server
        raise ValueError(f"{node} is not a node of this fleet")

    def node_labels(self) -> dict[str, dict[str, str]]:
        """node -> its topology labels (row, rack, leaf switch, power feed), as the nodes
        carry them: what `bot.topology.Topology.from_labels` reads."""
        labels: dict[str, dict[str, str]] = {node: {} for node in self.nodes}
        for key, domains in (
            (ROW, self.rows),
            (RACK, self.racks),
            (LEAF, self.leaves),
            (PDU, self.pdus),
        ):
            for name, nodes in domains.items():
                for node in nodes:
                    labels[node][key] = name
        return labels

    def members(self, kind: str, name: str) -> list[str]:
        """The nodes of domain `name` of `kind` (row, rack, leaf, power, nfs); a clear error
        naming the domains there are when there is no such domain."""
        domains = {
            "row": self.rows,
            "rack": self.racks,
            "leaf": self.leaves,
            "power": self.pdus,
            "nfs": self.nfs,
        }[kind]
        try:
            return domains[name]
        except KeyError:
            known = list(domains)
            shown = ", ".join(known[:5]) + (
                f", ... ({len(known)} in all)" if len(known) > 5 else ""
            )
            raise ValueError(f"this fleet has no {kind} {name!r}; it has {shown}") from None


def fleet(
    nodes: int = 1000,
    gpus: int = 8,
    *,
    rack_size: int = 8,
    racks_per_row: int = 4,
    racks_per_leaf: int = 2,
    nfs_servers: int = 5,
    prefix: str = "gpu-node-",
    grace_seconds: int = 30,
    startup_seconds: float = 2.0,
) -> Fleet:
    """`nodes` GPU nodes with `gpus` GPUs each, laid out in racks, rows, leaf switches and
    power feeds, named prefix + a 4-digit number (gpu-node-0001). A last rack, row or leaf
    may be short. No workloads: tests and benchmarks add what they need."""
    if nodes < 1 or nodes > 5000:
        raise ValueError("a fleet has 1 to 5000 nodes")
    if min(rack_size, racks_per_row, racks_per_leaf, nfs_servers) < 1:
        raise ValueError("rack_size, racks_per_row, racks_per_leaf and nfs_servers are >= 1")
    names = [f"{prefix}{i:04d}" for i in range(1, nodes + 1)]
    per_server = -(-nodes // nfs_servers)
    rows: dict[str, list[str]] = {}
    racks: dict[str, list[str]] = {}
    leaves: dict[str, list[str]] = {}
    pdus: dict[str, list[str]] = {}
    pools: list[dict[str, Any]] = []
    for start in range(0, nodes, rack_size):
        rack_index = start // rack_size
        row = row_name(rack_index // racks_per_row)
        rack = f"{row}{rack_index % racks_per_row + 1}"
        leaf = f"ib-leaf-{rack_index // racks_per_leaf + 1:02d}"
        pdu = f"pdu-{rack}"
        members = names[start : start + rack_size]
        for domains, key in ((rows, row), (racks, rack), (leaves, leaf), (pdus, pdu)):
            domains.setdefault(key, []).extend(members)
        pools.append(
            {
                "prefix": prefix,
                "first": start + 1,
                "count": len(members),
                "digits": 4,
                "gpus": gpus,
                "labels": {ROW: row, RACK: rack, LEAF: leaf, PDU: pdu},
            }
        )
    nfs = {
        nfs_server(index): names[start : start + per_server]
        for index, start in enumerate(range(0, nodes, per_server), start=1)
    }
    data = {
        "name": f"fleet-{nodes}",
        "description": f"{nodes} GPU nodes in {len(rows)} rows, {len(racks)} racks, "
        f"{len(leaves)} leaf switches; {len(nfs)} NFS servers",
        "termination_grace_seconds": grace_seconds,
        "startup_seconds": startup_seconds,
        "nodes": pools,
        "namespaces": ["datasets"],
        "storage_classes": [{"name": "nfs", "default": True}],
        "claims": [
            {
                "namespace": "datasets",
                "name": f"datasets-{server.split('.')[0]}",
                "storage_class": "nfs",
                "server": server,
                "path": NFS_EXPORT,
            }
            for server in nfs
        ],
    }
    scenario = parse(data, source=f"fleet(nodes={nodes})")
    return Fleet(scenario, rows=rows, racks=racks, leaves=leaves, pdus=pdus, nfs=nfs, gpus=gpus)

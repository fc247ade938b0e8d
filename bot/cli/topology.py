"""`runbook-bot topology`: the failure-domain tree as the cluster's node labels draw it,
with node counts, and the active incidents in each domain.

The nodes are listed once, as `serve` reads the cluster (kubeconfig, context or in-cluster
settings); the incidents and their alerts come from the database. An incident shows on
the domain it is about (a domain incident's own); else, when its alerts name storage (the
`topology.storage_labels`), on that storage domain (`storage/...`); else on the narrowest
domains holding all the nodes its alerts name. Incidents whose nodes no one domain holds
are listed last.

    DOMAIN               NODES  INCIDENTS
    row/a                   32  INC-12 (overheating, domain)
      rack/a1                8
        power/pdu-a1         8  INC-20 (gpu-xid, gpu-node-0003)
      leaf/ib-leaf-01       16  INC-14 (ib-partition, 16 nodes)
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from bot.cli import common
from bot.errors import ConfigInvalid

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

    from bot.config import Settings
    from bot.topology import Domain, Topology
    from bot.topology.forest import Branch

WIDTH = 80
"""The width the incidents column wraps to where the output has none (a pipe)."""
NAME_MAX = 40
NO_LEVELS = (
    "no topology levels are configured, so every node is its own domain; set "
    "`topology.levels` in the settings file, widest first, e.g.\n"
    "  topology:\n"
    "    levels:\n"
    "      - {name: row,  label: topology.example.com/row}\n"
    "      - {name: rack, label: topology.example.com/rack}\n"
    "(docs/topology.md)"
)
NO_CLUSTER = (
    "no Kubernetes cluster is configured: set `kubeconfig` (and `kube_context`) in the "
    "settings, or KUBECONFIG, or `kube_in_cluster: true` when running in a pod"
)


def add_commands(commands: Any) -> None:
    cmd = commands.add_parser(
        "topology",
        help="the failure-domain tree: node counts and incidents per domain",
        description="Print the failure-domain tree the nodes' labels draw (the `topology` "
        "setting names the levels), widest level first, with each domain's node count and "
        "the active incidents in it. Reads the cluster as `serve` does.",
    )
    cmd.add_argument("-o", "--output", choices=["text", "json"], default="text")
    cmd.add_argument(
        "--json", dest="output", action="store_const", const="json", help="same as -o json"
    )
    cmd.add_argument(
        "--active",
        action="store_true",
        help="only the domains with active incidents, and the domains above them",
    )
    cmd.set_defaults(handler=show)


@dataclass
class Placed:
    """An active incident and what the topology makes of it."""

    number: int
    runbook: str | None
    severity: str
    scope: str
    nodes: list[str]
    storage: list[str]
    domain: str | None = None
    """The domain it is about (a domain incident's, from the incident itself)."""

    @property
    def ref(self) -> str:
        return f"INC-{self.number}"

    def label(self) -> str:
        """`INC-12 (overheating, domain)`, `INC-14 (ib-partition, 16 nodes)`,
        `INC-20 (gpu-xid, gpu-node-0003)`."""
        if self.scope == "domain":
            what = "domain"
        elif len(self.nodes) == 1:
            what = self.nodes[0]
        else:
            what = f"{len(self.nodes)} nodes" if self.nodes else "no node"
        return f"{self.ref} ({self.runbook or 'no runbook'}, {what})"

    def as_data(self) -> dict[str, Any]:
        return {
            "incident": self.ref,
            "number": self.number,
            "runbook": self.runbook,
            "severity": self.severity,
            "scope": self.scope,
            "domain": self.domain,
            "nodes": len(self.nodes),
        }


def show(args: argparse.Namespace, settings: Settings) -> int:
    from bot.topology import NodeCache, cluster_configured
    from bot.topology.forest import nest

    if not settings.topology.levels:
        raise ConfigInvalid(NO_LEVELS)
    if not cluster_configured(settings):
        raise ConfigInvalid(NO_CLUSTER)
    topology = NodeCache(settings).read()
    branches = nest(topology)
    with common.database(settings) as db, db.session() as session:
        incidents = active_incidents(session, settings)
    view = place(topology, branches, incidents)
    if args.active:
        view = view.active_only()
    if args.output == "json":
        return common.say(json.dumps(view.as_data(topology), indent=2))
    from bot.cli import terminal

    return common.say(view.text(topology, terminal.width_of(terminal.out()) or WIDTH))


def active_incidents(session: Session, settings: Settings) -> list[Placed]:
    """The active incidents, with their runbooks and the nodes and storage their alerts
    name (two reads, however many incidents)."""
    from sqlalchemy import select

    from bot.incidents.models import ACTIVE_STATUSES, Alert, Incident
    from bot.runbooks.models import IncidentRunbook
    from bot.topology import node_of, storage_of

    rows = session.execute(
        select(Incident, IncidentRunbook.runbook_id)
        .outerjoin(IncidentRunbook, IncidentRunbook.incident_number == Incident.number)
        .where(Incident.status.in_(ACTIVE_STATUSES))
        .order_by(Incident.number)
    ).all()
    if not rows:
        return []
    nodes: dict[int, set[str]] = {}
    storage: dict[int, set[str]] = {}
    labels = session.execute(
        select(Alert.incident_number, Alert.labels).where(
            Alert.incident_number.in_([incident.number for incident, _ in rows])
        )
    )
    for number, alert_labels in labels:
        if (node := node_of(settings.topology, alert_labels)) is not None:
            nodes.setdefault(number, set()).add(node)
        if (found := storage_of(settings.topology, alert_labels)) is not None:
            storage.setdefault(number, set()).add(found.name)
    return [
        Placed(
            number=incident.number,
            runbook=runbook,
            severity=str(incident.severity),
            scope=str(incident.scope),
            domain=incident.domain,
            nodes=sorted(nodes.get(incident.number, ())),
            storage=sorted(storage.get(incident.number, ())),
        )
        for incident, runbook in rows
    ]


@dataclass
class View:
    """The forest with each domain's incidents; storage domains; the incidents no domain
    holds."""

    branches: list[Branch]
    on: dict[str, list[Placed]]
    storage: dict[str, set[str]]
    """storage domain -> the nodes its incidents' alerts name."""
    elsewhere: list[Placed]
    total: int | None = None
    """How many domains the topology has (more than `branches` shows, when filtered)."""

    def text(self, topology: Topology, width: int = WIDTH) -> str:
        rows: list[tuple[str, str, list[str]]] = [
            ("  " * b.depth + b.domain.name, str(len(b.nodes)), self._labels(b.domain.name))
            for b in self.branches
        ]
        rows += [
            (name, str(len(nodes)), self._labels(name)) for name, nodes in self.storage.items()
        ]
        if not rows:
            return (
                f"No node has a label of the topology levels ({_levels(topology)}); "
                f"{len(topology.nodes)} nodes, each its own domain."
            )
        # A name too long for the column (a storage export) gets a line of its own.
        name_width = max([len("DOMAIN")] + [len(r[0]) for r in rows if len(r[0]) <= NAME_MAX])
        count_width = max(5, *(len(r[1]) for r in rows))
        lines = [f"{'DOMAIN'.ljust(name_width)}  {'NODES'.rjust(count_width)}  INCIDENTS"]
        indent = name_width + count_width + 4
        for name, count, labels in rows:
            if len(name) > name_width:
                lines.append(name)
                name = ""
            head = f"{name.ljust(name_width)}  {count.rjust(count_width)}"
            if not labels:
                lines.append(head.rstrip())
                continue
            wrapped = _pack(labels, max(width - indent, 30))
            lines.append(f"{head}  {wrapped[0]}")
            lines += [" " * indent + rest for rest in wrapped[1:]]
        if self.elsewhere:
            lines.append("")
            lines.append("Active incidents no one domain holds:")
            lines += [f"  {p.label()}" for p in self.elsewhere]
        unplaced = sum(1 for levels in topology.nodes.values() if not levels)
        total = self.total if self.total is not None else len(self.branches)
        summary = f"{len(topology.nodes)} nodes in {total} domains"
        if total != len(self.branches):
            summary += f" ({len(self.branches)} shown: those with incidents and above them)"
        if unplaced:
            summary += f"; {unplaced} nodes without any level's label (each its own domain)"
        lines += ["", summary + "."]
        return "\n".join(lines)

    def as_data(self, topology: Topology) -> dict[str, Any]:
        return {
            "read_at": topology.read_at.isoformat() if topology.read_at else None,
            "levels": topology.level_names(),
            "nodes": len(topology.nodes),
            "domains": [
                {
                    "domain": b.domain.name,
                    "level": b.domain.level,
                    "value": b.domain.value,
                    "nodes": len(b.nodes),
                    "depth": b.depth,
                    "parent": b.parent.name if b.parent else None,
                    "incidents": [p.as_data() for p in self.on.get(b.domain.name, [])],
                }
                for b in self.branches
            ],
            "storage": [
                {
                    "domain": name,
                    "level": "storage",
                    "value": name.partition("/")[2],
                    "nodes": len(nodes),
                    "incidents": [p.as_data() for p in self.on.get(name, [])],
                }
                for name, nodes in self.storage.items()
            ],
            "elsewhere": [p.as_data() for p in self.elsewhere],
        }

    def active_only(self) -> View:
        """The domains with incidents and their ancestors; storage domains with incidents."""
        parents = {b.domain: b.parent for b in self.branches}
        keep = set()
        for branch in self.branches:
            if branch.domain.name in self.on:
                found: Domain | None = branch.domain
                while found is not None and found not in keep:
                    keep.add(found)
                    found = parents[found]
        return View(
            [b for b in self.branches if b.domain in keep],
            self.on,
            {name: nodes for name, nodes in self.storage.items() if name in self.on},
            self.elsewhere,
            total=self.total,
        )

    def _labels(self, name: str) -> list[str]:
        return [p.label() for p in self.on.get(name, [])]


def place(topology: Topology, branches: list[Branch], incidents: Iterable[Placed]) -> View:
    """Put each incident on its domains (see the module docstring)."""
    from bot.topology.forest import enclosing

    known = {b.domain.name for b in branches}
    on: dict[str, list[Placed]] = {}
    storage: dict[str, set[str]] = {}
    elsewhere: list[Placed] = []
    for incident in incidents:
        names: list[str] = []
        if incident.domain and (incident.domain in known or incident.domain.startswith("storage/")):
            names = [incident.domain]
        elif incident.storage:  # about the storage, wherever its nodes are
            names = list(incident.storage)
        else:
            names = [d.name for d in enclosing(branches, incident.nodes)]
        for name in incident.storage:
            storage.setdefault(name, set()).update(incident.nodes)
        if incident.domain and incident.domain.startswith("storage/"):
            storage.setdefault(incident.domain, set()).update(incident.nodes)
        if not names:
            elsewhere.append(incident)
        for name in dict.fromkeys(names):
            on.setdefault(name, []).append(incident)
    return View(branches, on, dict(sorted(storage.items())), elsewhere, total=len(branches))


def _pack(labels: list[str], width: int) -> list[str]:
    """The labels, comma-separated, in lines of at most `width` (a label is never split)."""
    lines: list[str] = []
    for label in labels:
        if lines and len(lines[-1]) + len(label) + 2 <= width:
            lines[-1] += f", {label}"
        else:
            if lines:
                lines[-1] += ","
            lines.append(label)
    return lines


def _levels(topology: Topology) -> str:
    return ", ".join(f"{level.name}: {level.label}" for level in topology.levels)

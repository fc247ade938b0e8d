"""A small fleet for correlation tests: rows of nodes in a topology snapshot, runbooks that
correlate by row and by storage, and alerts for them, posted through the real ingest."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import select

from bot.alerts import ingest
from bot.alerts.payload import WebhookPayload
from bot.alerts.results import IngestResult
from bot.clock import FrozenClock
from bot.db import Database
from bot.escalation import frozen_policy
from bot.incidents import service as incidents
from bot.incidents.models import Alert, Incident
from bot.topology import Topology
from bot.topology_settings import TopologySettings
from bot.worker import Worker
from tests.runbooks.rig import Rig
from tests.support.payloads import alert, iso, notification

ROW = "topology.example.com/row"
RACK = "topology.example.com/rack"
TOPOLOGY = {
    "levels": [{"name": "row", "label": ROW}, {"name": "rack", "label": RACK}],
}

OVERHEATING = """\
    id: overheating
    title: Overheating
    version: 1
    match: {alerts: [GPUTemperatureHigh]}
    group_by: [domain.row]
    correlate: {window: 2m, min_nodes: 2}
    facts:
      node: "{{ labels.Hostname }}"
    steps:
      - id: facility
        title: Call the facility about the row's cooling
        manual: Call the facility about the row's cooling
        when: "incident.scope == 'domain'"
      - id: status
        title: Node status
        action: k8s.node_status
        with: {node: "{{ facts.node }}"}
      - id: cordon
        title: Cordon
        action: k8s.cordon
        with:
          node: "{{ facts.node }}"
          reason: >-
            hot {{ incident.domain.name ~ ' of ' ~ incident.domain.size
            if incident.domain else 'node' }}
"""

NODE_DOWN = """\
    id: node-down
    title: Nodes down
    version: 1
    match: {alerts: [KubeNodeNotReady]}
    group_by: [domain.rack]
    correlate: {window: 2m, min_nodes: 2}
    steps:
      - id: look
        title: Look at the rack
        manual: Look at the rack's power
"""

IB_PARTITION = """\
    id: ib-partition
    title: InfiniBand port down
    version: 1
    match: {alerts: [InfiniBandPortDown]}
    group_by: [Hostname]
    steps:
      - id: look
        title: Look at the port
        manual: Look at the port
"""

STORAGE = """\
    id: storage-failure
    title: Storage down
    version: 1
    match: {alerts: [StorageMountFailed]}
    group_by: [storage]
    correlate: {window: 2m, min_nodes: 2}
    steps:
      - id: look
        title: Look at the server
        manual: Look at the server
"""

GPU_XID = """\
    id: gpu-xid
    title: Single GPU fault
    version: 1
    match: {alerts: [GPUXIDError]}
    group_by: [Hostname]
    steps:
      - id: look
        title: Look
        manual: Look at the GPU
"""


def node(row: str, index: int) -> str:
    return f"gpu-{row}-{index:02d}"


def topology(rows: dict[str, int], racks_of: int = 8) -> Topology:
    """`rows` row -> node count; racks of `racks_of` nodes each (rack `a1`, `a2`, ...)."""
    labels = {
        node(row, i): {ROW: row, RACK: f"{row}{i // racks_of + 1}"}
        for row, count in rows.items()
        for i in range(count)
    }
    return Topology.from_labels(TopologySettings.model_validate(TOPOLOGY), labels)


class Fleet(Rig):
    """The rig with the fleet's runbooks and topology; `post` sends alerts as Alertmanager."""

    def __init__(self, db: Database, clock: FrozenClock, tmp: Path, **overrides: Any) -> None:
        super().__init__(db, clock, tmp, topology=TOPOLOGY, **overrides)
        for name, text in (
            ("overheating", OVERHEATING),
            ("node-down", NODE_DOWN),
            ("ib-partition", IB_PARTITION),
            ("storage", STORAGE),
            ("gpu-xid", GPU_XID),
        ):
            self.write(text, f"{name}.yaml")
        self.snapshot: Topology | None = topology({"a": 32, "b": 32})

    def hot(self, nodes: list[str], **extra: str) -> list[dict[str, Any]]:
        extra.setdefault("severity", "warning")
        return [self.alert(n, "GPUTemperatureHigh", **extra) for n in nodes]

    def alert(self, host: str, alertname: str, **labels: str) -> dict[str, Any]:
        labels.setdefault("severity", "critical")
        return alert(host=host, alertname=alertname, starts_at=iso(self.clock.now()), **labels)

    def post(self, alerts: list[dict[str, Any]], **group: str) -> IngestResult:
        """One notification, grouped as Alertmanager would by `group` (default: the first
        alert's alertname and Hostname), through the real ingest as the webhook calls it."""
        body = notification(alerts, group=group or None)
        result = ingest.ingest(
            self.db,
            WebhookPayload.model_validate(body),
            clock=self.clock,
            reopen_window=self.settings.reopen_window,
            catalog=self.catalog(),
            escalation=frozen_policy(self.settings),
            topology=self.snapshot,
            settings=self.settings,
        )
        return result

    def propose(self) -> None:
        Worker(self.db, self.settings, self.clock).propose()

    def incident(self, number: int) -> Incident:
        with self.db.session() as session:
            return incidents.get(session, number)

    def incidents(self) -> list[Incident]:
        with self.db.session() as session:
            return list(session.scalars(select(Incident).order_by(Incident.number)))

    def active(self) -> list[Incident]:
        return [i for i in self.incidents() if i.status in ("open", "acknowledged")]

    def alerts_of(self, number: int) -> list[Alert]:
        with self.db.session() as session:
            return incidents.alerts_of(session, number)

    def hosts(self, number: int) -> list[str]:
        return sorted({a.labels["Hostname"] for a in self.alerts_of(number)})

    def entries(self, number: int, kind: str) -> list[dict[str, Any]]:
        return [e.data for e in self.log(number) if e.type == kind]

    def summaries(self, number: int, kind: str) -> list[str]:
        return [e.summary for e in self.log(number) if e.type == kind]

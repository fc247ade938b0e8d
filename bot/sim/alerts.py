"""The seed's five emergencies (34.3) as Alertmanager 0.25 webhook bodies: pure data, no I/O.

Each scenario names the alert its exporter would raise (dcgm-exporter, kube-state-metrics,
node_exporter) with the labels the shipped runbook matches, grouped as an Alertmanager
route would group it. `firing` builds the notification, `resolved` the one Alertmanager
sends when the alert clears. A drill's alerts carry the `runbook_bot_drill` label, so the
bot keeps them apart from real ones and runs their steps as dry runs.

The demo's scenario player (`play`) and `runbook-bot drill` both build their alerts here.
`DOMAIN_SCENARIOS` are the demo's failure domains failing (a hot row): their alerts, one per
GPU and machine of the domain, are `storms`' (the player builds them with the demo's hall).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import quote_plus

DRILL_LABEL = "runbook_bot_drill"
"""The label a drill's alerts carry (bot.incidents.models.DRILL_LABEL: the bot reads it)."""
FIRING_ENDS_AT = "0001-01-01T00:00:00Z"
GPU_MODEL = "NVIDIA H100 80GB HBM3"


@dataclass(frozen=True)
class Emergency:
    """One of the seed's five plans: the alert that starts it and whom it is about."""

    name: str
    runbook: str
    alertname: str
    severity: str
    group_by: tuple[str, ...]
    node: str | None
    """The node the demo breaks (None: the alert is about shared storage, not a node)."""
    gpu: int | None = None
    what: str = ""
    """What the demo does to the simulator, for people reading its output."""


SCENARIOS: dict[str, Emergency] = {
    e.name: e
    for e in (
        Emergency(
            "xid79",
            "gpu-xid",
            "GPUXIDError",
            "critical",
            ("alertname", "Hostname"),
            "gpu-node-02",
            gpu=5,
            what="GPU 5 of gpu-node-02 falls off the bus (XID 79)",
        ),
        Emergency(
            "node-down",
            "node-down",
            "KubeNodeNotReady",
            "critical",
            ("alertname", "node"),
            "gpu-node-04",
            what="gpu-node-04 loses power and goes NotReady",
        ),
        Emergency(
            "ib-partition",
            "ib-partition",
            "InfiniBandPortDown",
            "critical",
            ("alertname", "node"),
            "gpu-node-03",
            what="InfiniBand port mlx5_1/1 of gpu-node-03 goes down",
        ),
        Emergency(
            "storage",
            "storage-failure",
            "SharedFilesystemUnreachable",
            "critical",
            ("alertname", "storage"),
            "gpu-node-01",
            what="the NFS export nfs.storage.svc.cluster.local:/exports/datasets stops "
            "answering on gpu-node-01",
        ),
        Emergency(
            "overheating",
            "overheating",
            "GPUTemperatureHigh",
            "warning",
            ("alertname", "Hostname"),
            "gpu-node-01",
            gpu=3,
            what="GPU 3 of gpu-node-01 heats up to 93 °C",
        ),
    )
}


@dataclass(frozen=True)
class DomainEmergency:
    """A failure domain failing in the demo: every node of `domain` (a `level/value` of the
    demo's topology) raises the runbook's alerts at once; the bot makes them one incident."""

    name: str
    runbook: str
    alertnames: tuple[str, ...]
    """The alerts, in the order their rules fire (each rule's `for:`), one notification each."""
    severity: str
    level: str
    domain: str
    what: str = ""

    @property
    def alertname(self) -> str:
        return " and ".join(self.alertnames)


DOMAIN_SCENARIOS: dict[str, DomainEmergency] = {
    e.name: e
    for e in (
        DomainEmergency(
            "row-cooling",
            "overheating",
            # ipmi_exporter's rule holds for 2m, DCGM's for 5m: the BMCs' alarm comes first.
            ("BMCTemperatureHigh", "GPUTemperatureHigh"),
            "critical",
            "row",
            "a",
            what="the air conditioning of row a fails: every GPU of gpu-node-01 and "
            "gpu-node-02 heats up to 93 °C, their inlets to 41 °C",
        ),
    )
}
HCA = "mlx5_1"
NFS_SERVER = "nfs.storage.svc.cluster.local"
STORAGE = f"{NFS_SERVER}:/exports/datasets"
HOT = 93


def names() -> list[str]:
    """The five emergencies (one node each): what `all` plays and drills offer."""
    return list(SCENARIOS)


def domain_names() -> list[str]:
    """The demo's failure-domain scenarios (a hot row)."""
    return list(DOMAIN_SCENARIOS)


def scenario(name: str) -> Emergency | DomainEmergency:
    """Any scenario the demo plays, by name: one of the five or a domain's."""
    if name in DOMAIN_SCENARIOS:
        return DOMAIN_SCENARIOS[name]
    try:
        return SCENARIOS[name]
    except KeyError:
        known = ", ".join([*SCENARIOS, *DOMAIN_SCENARIOS])
        raise ValueError(f"no scenario {name!r}; choose one of {known}") from None


def get(name: str) -> Emergency:
    try:
        return SCENARIOS[name]
    except KeyError:
        raise ValueError(f"no scenario {name!r}; choose one of {', '.join(SCENARIOS)}") from None


def iso(value: datetime) -> str:
    """Alertmanager's timestamps: RFC 3339 in UTC with milliseconds and a Z."""
    return value.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def fingerprint(labels: dict[str, str]) -> str:
    """16 hex digits that depend only on the label set, as Alertmanager's do."""
    text = json.dumps(sorted(labels.items()))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def gpu_uuid(node: str, gpu: int) -> str:
    """A stand-in UUID (a drill without --uuid): recognisably made up."""
    digits = hashlib.sha256(f"{node}/{gpu}".encode()).hexdigest()
    return f"GPU-{digits[:8]}-0000-0000-0000-{gpu:012d}"


def _labels(
    e: Emergency, node: str, gpu: int | None, uuid: str | None
) -> tuple[dict[str, str], dict[str, str], str]:
    """Labels, annotations and the expression of the rule that fires."""
    if e.name in ("xid79", "overheating"):
        assert gpu is not None
        labels = {
            "alertname": e.alertname,
            "Hostname": node,
            "UUID": uuid or gpu_uuid(node, gpu),
            "device": f"nvidia{gpu}",
            "gpu": str(gpu),
            "instance": f"{node}:9400",
            "job": "dcgm",
            "modelName": GPU_MODEL,
            "pci_bus_id": f"00000000:{(0x18 + 0x10 * gpu) % 256:02X}:00.0",
            "severity": e.severity,
        }
        if e.name == "xid79":
            labels["xid"] = "79"
            return labels, {"summary": f"{node} GPU {gpu} XID 79"}, "DCGM_FI_DEV_XID_ERRORS > 0"
        notes = {"summary": f"{node} GPU {gpu} at {HOT} °C"}
        return labels, notes, "DCGM_FI_DEV_GPU_TEMP > 85"
    if e.name == "node-down":
        labels = {
            "alertname": e.alertname,
            "condition": "Ready",
            "container": "kube-state-metrics",
            "instance": "kube-state-metrics:8080",
            "job": "kube-state-metrics",
            "node": node,
            "severity": e.severity,
            "status": "true",
        }
        expr = 'kube_node_status_condition{condition="Ready",status="true"} == 0'
        return labels, {"summary": f"{node} is NotReady"}, expr
    if e.name == "ib-partition":
        labels = {
            "alertname": e.alertname,
            "device": HCA,
            "instance": f"{node}:9100",
            "job": "node-exporter",
            "node": node,
            "port": "1",
            "severity": e.severity,
        }
        notes = {"summary": f"{node} {HCA}/1 is not Active"}
        return labels, notes, 'node_infiniband_state_id{device=~"mlx5_.*"} != 4'
    labels = {
        "alertname": e.alertname,
        "device": STORAGE,
        "fstype": "nfs4",
        "instance": f"{node}:9100",
        "job": "node-exporter",
        "mountpoint": "/datasets",
        "node": node,
        "severity": e.severity,
        "storage": STORAGE,
        "storage_kind": "nfs",
    }
    notes = {"summary": f"{STORAGE} is unreachable from {node}"}
    return labels, notes, 'node_filesystem_device_error{fstype=~"nfs4?"} == 1'


def firing(
    name: str,
    *,
    now: datetime,
    node: str | None = None,
    gpu: int | None = None,
    uuid: str | None = None,
    drill: str | None = None,
    external_url: str = "http://alertmanager:9093",
) -> dict[str, Any]:
    """The notification Alertmanager sends when scenario `name`'s alert starts firing
    `now`; `node`/`gpu` retarget it (a drill on another machine), `drill` marks it."""
    e = get(name)
    node = node or e.node or "gpu-node-01"
    labels, annotations, expr = _labels(e, node, gpu if gpu is not None else e.gpu, uuid)
    if drill is not None:
        labels[DRILL_LABEL] = drill
        annotations["drill"] = f"a drill (runbook-bot drill {drill}): nothing is broken"
    alert = {
        "status": "firing",
        "labels": labels,
        "annotations": annotations,
        "startsAt": iso(now),
        "endsAt": FIRING_ENDS_AT,
        "generatorURL": f"http://prometheus:9090/graph?g0.expr={quote_plus(expr)}&g0.tab=1",
        "fingerprint": fingerprint(labels),
    }
    group = {key: labels[key] for key in e.group_by if key in labels}
    if drill is not None:
        group[DRILL_LABEL] = drill
    key = "{}:{" + ", ".join(f'{k}="{v}"' for k, v in sorted(group.items())) + "}"
    return {
        "receiver": "runbook-bot",
        "status": "firing",
        "alerts": [alert],
        "groupLabels": group,
        "commonLabels": dict(labels),
        "commonAnnotations": dict(annotations),
        "externalURL": external_url,
        "version": "4",
        "groupKey": key,
        "truncatedAlerts": 0,
    }


def resolved(body: dict[str, Any], *, now: datetime) -> dict[str, Any]:
    """The notification Alertmanager sends once the alerts of `body` cleared at `now`."""
    alerts = [{**a, "status": "resolved", "endsAt": iso(now)} for a in body["alerts"]]
    return {**body, "status": "resolved", "alerts": alerts}

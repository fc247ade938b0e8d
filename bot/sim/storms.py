"""A fleet's failure domains failing: the alerts each failure raises, as Prometheus sends
them to Alertmanager, and (given a running simulator) the failure itself in the sim.

Each event returns the alerts Prometheus would POST to Alertmanager's `/api/v2/alerts`
once the rules in the shipped runbooks' comments fire, with the labels those runbooks
match (the label conventions of `alerts`, which builds webhook bodies for the demo):

    [{"labels": {...}, "annotations": {...}, "startsAt": "...Z", "generatorURL": "..."}]

No `endsAt`: Alertmanager then holds each alert firing for its `resolve_timeout`, as it
does for a rule Prometheus keeps sending. The events (`fleet` is a `bot.sim.fleet.Fleet`;
`sim`, when given, is the running simulator whose machines and nodes the event breaks;
`now` defaults to the system clock):

    row_cooling(fleet, row, *, sim=None, now=None, temperature=93.0) -> list[dict]
        GPUTemperatureHigh (dcgm-exporter, every GPU of each node of the row) and
        BMCTemperatureHigh (ipmi_exporter, one per node): runbook overheating. In the sim
        every GPU and the inlet of those machines heat up.
    leaf_down(fleet, leaf, *, sim=None, now=None) -> list[dict]
        InfiniBandPortDown (node_exporter) for each HCA port of the leaf's 16 nodes:
        runbook ib-partition. In the sim those ports go Down.
    rack_power(fleet, rack, *, sim=None, now=None) -> list[dict]
        KubeNodeNotReady and BMCUnreachable (runbook node-down) and InfiniBandPortDown
        (ib-partition) on each node of the rack. In the sim the machines lose power, their
        nodes turn NotReady at once and their ports go Down.
    nfs_down(fleet, server, *, sim=None, now=None) -> list[dict]
        SharedFilesystemUnreachable (node_exporter) on each node mounting the server's
        export, with `storage` (server:/export) and `server` labels: runbook
        storage-failure. In the sim the pods there that mount it get the kubelet's Warning.
    xid(fleet, node, code, *, gpu=0, sim=None, now=None) -> list[dict]
        GPUXIDError (dcgm-exporter) for one GPU: runbook gpu-xid. In the sim an XID 79's
        GPU falls off the bus.
    push(alertmanager_url, alerts, timeout) -> None
        POST the alerts to Alertmanager's `/api/v2/alerts` (httpx; raises for a non-2xx).
    notifications(alerts, group_by, *, receiver="runbook-bot") -> list[dict]
        The webhook bodies an Alertmanager route grouping by `group_by` would send for
        them (one per group, in first-seen order), for a test or a benchmark that posts to
        the bot without running Alertmanager.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import quote_plus

import httpx

from bot.clock import SystemClock
from bot.sim import alerts as demo
from bot.sim import hardware
from bot.sim.fleet import NFS_EXPORT, NFS_MOUNT, Fleet

if TYPE_CHECKING:
    from bot.sim.server import SimHandle

Alert = dict[str, Any]
PROMETHEUS = "http://prometheus:9090"
HOT = 93.0
GPU_HOT = "DCGM_FI_DEV_GPU_TEMP * on (Hostname) group_left (row) hostname_row:node_labels > 85"
INLET_HOT = 41.0
"""A row whose air conditioning failed: the inlet air of its machines."""


def _alert(labels: dict[str, str], annotations: dict[str, str], expr: str, now: datetime) -> Alert:
    return {
        "labels": labels,
        "annotations": annotations,
        "startsAt": demo.iso(now),
        "generatorURL": f"{PROMETHEUS}/graph?g0.expr={quote_plus(expr)}&g0.tab=1",
    }


def _now(now: datetime | None) -> datetime:
    return now if now is not None else SystemClock().now()


def _gpu_labels(node: str, gpu: int, alertname: str, severity: str) -> dict[str, str]:
    return {
        "alertname": alertname,
        "Hostname": node,
        "UUID": hardware.gpu_uuid(node, gpu),
        "device": f"nvidia{gpu}",
        "gpu": str(gpu),
        "instance": f"{node}:9400",
        "job": "dcgm",
        "modelName": demo.GPU_MODEL,
        "pci_bus_id": f"00000000:{(0x18 + 0x10 * gpu) % 256:02X}:00.0",
        "severity": severity,
    }


def _port_down(node: str, hca: str, now: datetime) -> Alert:
    labels = {
        "alertname": "InfiniBandPortDown",
        "device": hca,
        "instance": f"{node}:9100",
        "job": "node-exporter",
        "node": node,
        "port": "1",
        "severity": "critical",
    }
    notes = {"summary": f"{node} {hca}/1 is not Active"}
    return _alert(labels, notes, 'node_infiniband_state_id{device=~"mlx5_.*"} != 4', now)


def _hcas(sim: SimHandle | None, fleet: Fleet) -> list[str]:
    count = sim.cluster.scenario.hardware.ib_hcas if sim else fleet.scenario.hardware.ib_hcas
    return [f"mlx5_{i}" for i in range(count)]


def row_cooling(
    fleet: Fleet,
    row: str,
    *,
    sim: SimHandle | None = None,
    now: datetime | None = None,
    temperature: float = HOT,
) -> list[Alert]:
    """A row's air conditioning fails: every GPU and BMC of the row reads hot."""
    nodes, at = fleet.members("row", row), _now(now)
    out: list[Alert] = []
    for node in nodes:
        for gpu in range(fleet.gpus):
            labels = _gpu_labels(node, gpu, "GPUTemperatureHigh", "warning")
            labels["row"] = row
            notes = {"summary": f"{node} GPU {gpu} at {temperature:.0f} C"}
            out.append(_alert(labels, notes, GPU_HOT, at))
        labels = {
            "alertname": "BMCTemperatureHigh",
            "Hostname": node,
            "instance": f"{node}-bmc",
            "job": "ipmi",
            "name": "Inlet Temp",
            "row": row,
            "severity": "critical",
            "type": "Temperature",
        }
        notes = {"summary": f"the BMC of {node} reads its inlet at {INLET_HOT:.0f} C"}
        out.append(_alert(labels, notes, "ipmi_temperature_state > 0", at))
    if sim is not None:
        cluster = sim.cluster
        with cluster.lock:
            for node in nodes:
                for gpu in range(fleet.gpus):
                    cluster.heat_gpu(node, gpu, temperature)
                cluster.machines[node].inlet_temperature = INLET_HOT
    return out


def leaf_down(
    fleet: Fleet, leaf: str, *, sim: SimHandle | None = None, now: datetime | None = None
) -> list[Alert]:
    """An InfiniBand leaf switch dies: every HCA port cabled to it goes Down."""
    nodes, at, hcas = fleet.members("leaf", leaf), _now(now), _hcas(sim, fleet)
    out = [_port_down(node, hca, at) for node in nodes for hca in hcas]
    if sim is not None:
        with sim.cluster.lock:
            for node in nodes:
                for hca in hcas:
                    sim.cluster.set_ib_port(node, hca, False)
    return out


def rack_power(
    fleet: Fleet, rack: str, *, sim: SimHandle | None = None, now: datetime | None = None
) -> list[Alert]:
    """A rack's power feed fails: its machines and their BMCs go dark at once."""
    nodes, at, hcas = fleet.members("rack", rack), _now(now), _hcas(sim, fleet)
    out: list[Alert] = []
    for node in nodes:
        labels = {
            "alertname": "KubeNodeNotReady",
            "condition": "Ready",
            "container": "kube-state-metrics",
            "instance": "kube-state-metrics:8080",
            "job": "kube-state-metrics",
            "node": node,
            "severity": "critical",
            "status": "true",
        }
        expr = (
            'kube_node_status_condition{job="kube-state-metrics",condition="Ready",'
            'status="true"} == 0'
        )
        out.append(_alert(labels, {"summary": f"{node} is NotReady"}, expr, at))
        labels = {
            "alertname": "BMCUnreachable",
            "collector": "bmc",
            "instance": f"{node}-bmc",
            "job": "ipmi",
            "node": node,
            "severity": "critical",
        }
        notes = {"summary": f"the BMC of {node} does not answer"}
        out.append(_alert(labels, notes, 'ipmi_up{collector="bmc"} == 0', at))
        out += [_port_down(node, hca, at) for hca in hcas]
    if sim is not None:
        cluster = sim.cluster
        with cluster.lock:
            for node in nodes:
                machine = cluster.machines[node]
                machine.power, machine.pending = "Off", []
                machine.log(cluster.now(), "Power Unit", "AC lost", "Critical")
                for port in machine.ib_ports:
                    port.up = False
                cluster.set_node_ready(node, False)
    return out


def nfs_down(
    fleet: Fleet, server: str, *, sim: SimHandle | None = None, now: datetime | None = None
) -> list[Alert]:
    """An NFS server stops answering: its export hangs on every node that mounts it."""
    nodes, at = fleet.members("nfs", server), _now(now)
    storage = f"{server}:{NFS_EXPORT}"
    out: list[Alert] = []
    for node in nodes:
        labels = {
            "alertname": "SharedFilesystemUnreachable",
            "device": storage,
            "fstype": "nfs4",
            "instance": f"{node}:9100",
            "job": "node-exporter",
            "mountpoint": NFS_MOUNT,
            "node": node,
            "server": server,
            "severity": "critical",
            "storage": storage,
            "storage_kind": "nfs",
        }
        notes = {"summary": f"{storage} is unreachable from {node}"}
        expr = 'node_filesystem_device_error{fstype=~"nfs4?|fuse.juicefs"} == 1'
        out.append(_alert(labels, notes, expr, at))
    if sim is not None:
        from bot.sim import faults

        for node in nodes:
            faults.fail_mounts(sim, node, server)
    return out


def xid(
    fleet: Fleet,
    node: str,
    code: int,
    *,
    gpu: int = 0,
    sim: SimHandle | None = None,
    now: datetime | None = None,
) -> list[Alert]:
    """GPU `gpu` of `node` reports XID `code` (79: it fell off the bus)."""
    fleet.nfs_of(node)  # refuses a node the fleet does not have
    if not 0 <= gpu < fleet.gpus:
        raise ValueError(f"{node} has GPUs 0 to {fleet.gpus - 1}, not {gpu}")
    labels = _gpu_labels(node, gpu, "GPUXIDError", "critical")
    labels["xid"] = str(code)
    notes = {"summary": f"{node} GPU {gpu} XID {code}"}
    out = [_alert(labels, notes, "DCGM_EXP_XID_ERRORS_COUNT > 0", _now(now))]
    if sim is not None and code == 79:
        sim.cluster.lose_gpu(node, gpu)
    return out


def push(alertmanager_url: str, alerts: list[Alert], timeout: float) -> None:
    """POST `alerts` to Alertmanager's `/api/v2/alerts`, as Prometheus does."""
    url = alertmanager_url.rstrip("/") + "/api/v2/alerts"
    response = httpx.post(url, json=alerts, timeout=timeout)
    if response.status_code // 100 != 2:
        raise RuntimeError(
            f"Alertmanager at {alertmanager_url} answered {response.status_code} to "
            f"{len(alerts)} alerts: {response.text[:200]}"
        )


def notifications(
    alerts: list[Alert],
    group_by: list[str],
    *,
    receiver: str = "runbook-bot",
    external_url: str = "http://alertmanager:9093",
) -> list[dict[str, Any]]:
    """The firing notifications (Alertmanager webhook v4 bodies) of `alerts` grouped by
    the labels `group_by` names, one per group, in the order the groups first appear."""
    groups: dict[tuple[tuple[str, str], ...], list[Alert]] = {}
    for alert in alerts:
        key = tuple((name, alert["labels"].get(name, "")) for name in group_by)
        groups.setdefault(key, []).append(alert)
    bodies = []
    for key, members in groups.items():
        group = {name: value for name, value in key if value}
        firing = [
            {
                "status": "firing",
                "labels": a["labels"],
                "annotations": a["annotations"],
                "startsAt": a["startsAt"],
                "endsAt": demo.FIRING_ENDS_AT,
                "generatorURL": a["generatorURL"],
                "fingerprint": demo.fingerprint(a["labels"]),
            }
            for a in members
        ]
        common = {
            name: value
            for name, value in members[0]["labels"].items()
            if all(a["labels"].get(name) == value for a in members)
        }
        shown = ", ".join(f'{k}="{v}"' for k, v in sorted(group.items()))
        bodies.append(
            {
                "receiver": receiver,
                "status": "firing",
                "alerts": firing,
                "groupLabels": group,
                "commonLabels": common,
                "commonAnnotations": {},
                "externalURL": external_url,
                "version": "4",
                "groupKey": "{}:{" + shown + "}",
                "truncatedAlerts": 0,
            }
        )
    return bodies

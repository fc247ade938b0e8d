"""The demo's faults: what each scenario breaks in the simulator, and how it shows.

`inject(sim, name)` breaks the cluster as scenario `name` says: a GPU falls off the bus, a
machine loses power, an InfiniBand port goes down, a node's NFS mount stops answering, a
GPU heats up. Some of these take time to show (a machine powers off in seconds, and only
then does its node go NotReady). `Probe` reads the simulator from outside, where the bot
reads it: nodes and events through the Kubernetes API and power and sensors through the
BMCs' Redfish, over HTTP, and `ibstat` as a Job pod on the node would print it.
`sighting(probe, name)` says what of the fault shows now and what does not yet; the
player posts an alert only once all of it shows, as a Prometheus rule with `for:` fires
only on a condition that has held.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import httpx

from bot.sim import alerts, manifests, node_outputs
from bot.sim.kinds import EVENT, POD, PV, PVC
from bot.sim.server import SimHandle

TIMEOUT = 10.0
"""Seconds one read of the simulator may take; it answers from memory, in milliseconds."""
MOUNT_FAILED = "VolumeConditionAbnormal"
"""The reason of the Warning event a pod's failing NFS volume gets (kubelet's volume health)."""
HOT_FROM = 85
"""The overheating rule's threshold: DCGM_FI_DEV_GPU_TEMP > 85."""
INLET_HOT_FROM = 35
"""An inlet the BMC judges warm (its sensor's first upper threshold): the room, not a fan."""


def inject(sim: SimHandle, name: str) -> str:
    """Break the simulated cluster as scenario `name` says; what was done."""
    e = alerts.get(name)
    cluster = sim.cluster
    assert e.node is not None  # every scenario breaks something on a node
    if name == "xid79":
        assert e.gpu is not None
        cluster.lose_gpu(e.node, e.gpu)
    elif name == "node-down":
        cluster.power(e.node, "ForceOff")  # off in seconds; then the node goes NotReady
    elif name == "ib-partition":
        cluster.set_ib_port(e.node, alerts.HCA, False)
    elif name == "storage":
        fail_mounts(sim, e.node, alerts.NFS_SERVER)
    elif name == "overheating":
        assert e.gpu is not None
        cluster.heat_gpu(e.node, e.gpu, alerts.HOT)
    return e.what


def fail_mounts(sim: SimHandle, node: str, server: str) -> list[str]:
    """The NFS volumes from `server` stop answering on `node`: each pod there that mounts
    one gets a Warning event, as the kubelet's volume health check writes; the pods'
    `namespace/name`."""
    cluster = sim.cluster
    failed = []
    with cluster.lock:
        exported = {
            pv["metadata"]["name"]: pv["spec"]["nfs"]["path"]
            for pv in cluster.store.items(PV)
            if (pv["spec"].get("nfs") or {}).get("server") == server
        }
        claims = {
            (c["metadata"]["namespace"], c["metadata"]["name"]): exported[c["spec"]["volumeName"]]
            for c in cluster.store.items(PVC)
            if c["spec"].get("volumeName") in exported
        }
        for pod in cluster.store.items(POD):
            meta = pod["metadata"]
            if pod["spec"].get("nodeName") != node:
                continue
            for volume in pod["spec"].get("volumes") or []:
                claim = (volume.get("persistentVolumeClaim") or {}).get("claimName")
                path = claims.get((meta["namespace"], claim))
                if path is None:
                    continue
                message = (
                    f"Volume {volume['name']}: NFS {server}:{path} is not responding "
                    "(the mount hangs; reads and writes time out)"
                )
                event = manifests.event_defaults(_event(pod, node, message), cluster.now())
                cluster.store.insert(EVENT, event, cluster.now())
                failed.append(f"{meta['namespace']}/{meta['name']}")
    return failed


def _event(pod: dict[str, Any], node: str, message: str) -> dict[str, Any]:
    meta = pod["metadata"]
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"namespace": meta["namespace"], "generateName": f"{meta['name']}."},
        "involvedObject": {
            "kind": "Pod",
            "namespace": meta["namespace"],
            "name": meta["name"],
            "uid": meta["uid"],
        },
        "reason": MOUNT_FAILED,
        "message": message,
        "type": "Warning",
        "source": {"component": "kubelet", "host": node},
    }


@dataclass
class Sighting:
    """What of a fault the simulator shows from outside, and what it does not show yet."""

    seen: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        return not self.missing

    def expect(self, shows: bool, what: str) -> None:
        (self.seen if shows else self.missing).append(what)


class Probe:
    """Reads a running simulator over HTTP, as the bot does: its Kubernetes API with the
    handle's token, its BMCs' Redfish with their login. Close it when done."""

    def __init__(self, sim: SimHandle, *, timeout: float = TIMEOUT) -> None:
        if sim.redfish is None or sim.redfish_url is None:
            raise ValueError("the probe reads the BMCs too: run the simulator with redfish=")
        self.sim = sim
        login = sim.redfish.options
        self.api = httpx.Client(
            base_url=sim.url, headers={"Authorization": f"Bearer {sim.token}"}, timeout=timeout
        )
        self.bmc = httpx.Client(
            base_url=f"{sim.redfish_url}/redfish/v1",
            auth=(login.username, login.password),
            timeout=timeout,
            verify=False,  # the simulator's own loopback certificate, when it has one
        )

    def close(self) -> None:
        self.api.close()
        self.bmc.close()

    def _get(self, client: httpx.Client, path: str) -> dict[str, Any]:
        response = client.get(path)
        response.raise_for_status()
        body: dict[str, Any] = response.json()
        return body

    def node_ready(self, node: str) -> str:
        """The node's Ready condition as the API reports it: True, False or Unknown."""
        found = self._get(self.api, f"/api/v1/nodes/{node}")
        for condition in found.get("status", {}).get("conditions") or []:
            if condition.get("type") == "Ready":
                return str(condition.get("status"))
        return "Unknown"

    def power_state(self, node: str) -> str:
        """The machine's PowerState as its BMC reports it: On, Off, PoweringOff, ..."""
        return str(self._get(self.bmc, f"/Systems/{node}").get("PowerState"))

    def thermal(self, node: str) -> dict[str, Any]:
        """The BMC's Thermal document: inlet and GPU temperatures, fans."""
        return self._get(self.bmc, f"/Chassis/{node}/Thermal")

    def gpu_sensor(self, node: str, gpu: int) -> dict[str, Any]:
        """The BMC's temperature sensor of GPU `gpu`: its reading and status."""
        for sensor in self.thermal(node).get("Temperatures") or []:
            if sensor.get("Name") == f"GPU{gpu} Temp":
                return dict(sensor)
        return {}

    def events(self) -> list[dict[str, Any]]:
        """Every namespace's events."""
        items: list[dict[str, Any]] = self._get(self.api, "/api/v1/events").get("items", [])
        return items

    def ibstat(self, node: str, hca: str) -> str:
        """What `ibstat HCA 1` prints on the node (a Job pod there gets the same)."""
        cluster = self.sim.cluster
        with cluster.lock:
            shown = node_outputs.answer(cluster, node, ["ibstat", hca, "1"])
        return shown.output if shown is not None else ""


def domain_sighting(probe: Probe, nodes: list[str], gpus: int) -> Sighting:
    """A hot row as the BMCs of its `nodes` read it: every GPU above the rule's threshold
    and the inlet hot (one Thermal read per machine)."""
    seen = Sighting()
    for node in nodes:
        readings = {
            sensor.get("Name"): sensor.get("ReadingCelsius")
            for sensor in probe.thermal(node).get("Temperatures") or []
        }
        hot = [
            g
            for g in range(gpus)
            if isinstance(reading := readings.get(f"GPU{g} Temp"), int | float)
            and reading > HOT_FROM
        ]
        seen.expect(len(hot) == gpus, f"the BMC of {node} reads {len(hot)} of {gpus} GPUs hot")
        inlet = readings.get("Inlet Temp")
        warm = isinstance(inlet, int | float) and inlet > INLET_HOT_FROM
        seen.expect(warm, f"its inlet at {inlet} °C")
    return seen


def sighting(probe: Probe, name: str) -> Sighting:
    """What of scenario `name`'s fault the simulator shows now, read as the bot reads it."""
    e = alerts.get(name)
    node = e.node
    assert node is not None
    seen = Sighting()
    if name == "xid79":
        assert e.gpu is not None
        absent = (probe.gpu_sensor(node, e.gpu).get("Status") or {}).get("State") == "Absent"
        seen.expect(absent, f"the BMC lists GPU{e.gpu} of {node} as absent")
    elif name == "node-down":
        ready, power = probe.node_ready(node), probe.power_state(node)
        seen.expect(ready == "False", f"the API reads {node} Ready={ready}")
        seen.expect(power == "Off", f"its BMC reads PowerState {power}")
    elif name == "ib-partition":
        down = "State: Down" in probe.ibstat(node, alerts.HCA)
        seen.expect(down, f"ibstat on {node} reads {alerts.HCA}/1 " + ("Down" if down else "up"))
    elif name == "storage":
        warned = [
            f"{ev['involvedObject']['namespace']}/{ev['involvedObject']['name']}"
            for ev in probe.events()
            if ev.get("reason") == MOUNT_FAILED and (ev.get("source") or {}).get("host") == node
        ]
        seen.expect(
            bool(warned), f"the API has {MOUNT_FAILED} events for {', '.join(warned) or 'no pod'}"
        )
    elif name == "overheating":
        assert e.gpu is not None
        reading = probe.gpu_sensor(node, e.gpu).get("ReadingCelsius")
        hot = isinstance(reading, int | float) and reading > HOT_FROM
        seen.expect(hot, f"the BMC reads GPU{e.gpu} of {node} at {reading} °C")
    return seen

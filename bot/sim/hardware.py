"""The machines behind the simulated nodes: power, BMC event log, sensors, GPUs, InfiniBand.

Each node has a `Machine`. Its BMC (served over Redfish by `redfish`) reports and changes
its power state with realistic delays; node Jobs read its GPUs and HCAs (through
`node_outputs`). Powering a machine off makes its Kubernetes node NotReady once the power
is gone; powering it on brings the node back Ready `boot_seconds` after the power returns.
Every transition happens in `advance`, which the kubelet calls each tick under the lock.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Literal

from bot.sim.scenario import Hardware, Scenario

if TYPE_CHECKING:
    from bot.sim.cluster import Cluster

Power = Literal["On", "Off", "PoweringOn", "PoweringOff"]
IDLE_TEMPERATURE = 34.0


@dataclass
class Gpu:
    index: int
    uuid: str
    serial: str
    pci_bus_id: str
    present: bool = True
    temperature: float = IDLE_TEMPERATURE
    ecc_uncorrected: int = 0
    resets: int = 0


@dataclass
class IbPort:
    hca: str
    port: int = 1
    up: bool = True
    rate: int = 200


@dataclass
class SelRecord:
    id: int
    time: datetime
    sensor: str
    event: str
    severity: Literal["OK", "Warning", "Critical"] = "OK"


@dataclass
class Machine:
    node: str
    product: str
    gpus: list[Gpu]
    ib_ports: list[IbPort]
    power: Power = "On"
    sel: list[SelRecord] = field(default_factory=list)
    inlet_temperature: float = 24.0
    fan_rpm: int = 9800
    power_watts: float = 1800.0
    # (monotonic due time, what happens then): the transitions in flight.
    pending: list[tuple[float, str]] = field(default_factory=list)
    resets: int = 0

    def log(self, when: datetime, sensor: str, event: str, severity: str = "OK") -> None:
        next_id = self.sel[-1].id + 1 if self.sel else 1
        self.sel.append(SelRecord(next_id, when, sensor, event, severity))  # type: ignore[arg-type]


def _hex(seed: str, length: int) -> str:
    return hashlib.sha256(seed.encode()).hexdigest()[:length]


def _uuid(seed: str) -> str:
    h = _hex(seed, 32)
    return f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def gpu_uuid(node: str, index: int) -> str:
    """The UUID of GPU `index` of `node`'s machine (what dcgm-exporter's `UUID` label says)."""
    return _uuid(f"{node}/{index}")


def build(
    scenario: Scenario, gpus_by_node: dict[str, tuple[int, str]], now: datetime
) -> dict[str, Machine]:
    """One machine per node, with the scenario's faults applied."""
    hw: Hardware = scenario.hardware
    machines: dict[str, Machine] = {}
    for node, (count, product) in gpus_by_node.items():
        gpus = [
            Gpu(
                index=i,
                uuid=gpu_uuid(node, i),
                serial=str(int(_hex(f"serial/{node}/{i}", 10), 16))[:13],
                pci_bus_id=f"00000000:{(0x18 + 0x10 * i) % 256:02X}:00.0",
            )
            for i in range(count)
        ]
        ports = [IbPort(hca=f"mlx5_{i}", rate=hw.ib_rate) for i in range(hw.ib_hcas)]
        machine = Machine(node=node, product=product, gpus=gpus, ib_ports=ports)
        machine.log(now, "System Event", "Initialization completed")
        machines[node] = machine
    for fault in hw.faults:
        machine = machines[fault.node]
        for index in fault.missing_gpus:
            machine.gpus[index].present = False
            machine.log(
                now, f"GPU{index} Status", "PCIe link lost (fallen off the bus)", "Critical"
            )
        for index, temperature in fault.hot_gpus.items():
            machine.gpus[index].temperature = temperature
            machine.log(now, f"GPU{index} Temp", "Upper critical going high", "Critical")
        for index, errors in fault.ecc_gpus.items():
            machine.gpus[index].ecc_uncorrected = errors
        for port in machine.ib_ports:
            if port.hca in fault.ib_ports_down:
                port.up = False
        if fault.powered_off:
            machine.power = "Off"
    return machines


def request_power(cluster: Cluster, node: str, action: str, mono: float) -> None:
    """Start a power transition as a BMC would: `On`, `ForceOff`, `GracefulShutdown`,
    `ForceRestart` or `PowerCycle`. The caller holds the lock and has checked `node`."""
    machine = cluster.machines[node]
    hw = cluster.scenario.hardware
    off, on = cluster.scaled(hw.power_off_seconds), cluster.scaled(hw.power_on_seconds)
    now = cluster.now()
    if action == "On":
        if machine.power in ("Off", "PoweringOff"):
            machine.pending = [(mono + on, "on")]
            machine.power = "PoweringOn"
            machine.log(now, "ACPI State", "S0/G0: working (power on requested)")
    elif action in ("ForceOff", "GracefulShutdown"):
        if machine.power in ("On", "PoweringOn"):
            # A graceful shutdown waits for the OS; a forced one only for the power rails.
            wait = off * (3 if action == "GracefulShutdown" else 1)
            machine.pending = [(mono + wait, "off")]
            machine.power = "PoweringOff"
            machine.log(now, "ACPI State", f"S5/G2: soft-off ({action})")
    elif action in ("ForceRestart", "PowerCycle"):
        machine.pending = [(mono + off, "off"), (mono + off + on, "on")]
        machine.power = "PoweringOff"
        machine.log(now, "Chassis Control", f"{action} requested")
    else:
        raise ValueError(action)


def advance(cluster: Cluster, mono: float) -> None:
    """Complete due power transitions; nodes follow their machines. Caller holds the lock."""
    boot = cluster.scaled(cluster.scenario.hardware.boot_seconds)
    for machine in cluster.machines.values():
        while machine.pending and machine.pending[0][0] <= mono:
            due, what = machine.pending.pop(0)
            now = cluster.now()
            if what == "off":
                machine.power = "Off"
                machine.log(now, "Power Unit", "Power off/down")
                if cluster.has_node(machine.node):
                    cluster.set_node_ready(machine.node, False)
            elif what == "on":
                machine.power = "On"
                machine.resets += 1
                machine.log(now, "Power Unit", "Power on")
                # A power cycle clears a GPU that fell off the bus; a burnt one stays out
                # (tests model that with `Cluster.lose_gpu` after the cycle).
                for gpu in machine.gpus:
                    gpu.present = True
                machine.pending.insert(0, (due + boot, "ready"))
            elif what == "ready" and cluster.has_node(machine.node):
                cluster.set_node_ready(machine.node, True)

"""What every node tool agrees on about a machine's GPUs, and which pod holds each.

A GPU is in use while a pod on the node that requests `nvidia.com/gpu` is not finished.
Pods get GPUs in a stable order, oldest first (then namespace/name), each taking the
next free indices, as the device plugin would have handed them out; one process per GPU.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from bot.sim import pods
from bot.sim.hardware import Gpu, Machine
from bot.sim.kinds import POD

if TYPE_CHECKING:
    from bot.sim.cluster import Cluster

Obj = dict[str, Any]
GPU_RESOURCE = "nvidia.com/gpu"
DRIVER = "550.90.07"
HOT_C = 85
MEMORY_MIB = {"80GB": 81559, "94GB": 95830, "141GB": 143771, "40GB": 40960}


def gpu_users(cluster: Cluster, node: str) -> dict[int, Obj]:
    """GPU index -> the pod holding it, for the unfinished GPU pods bound to `node`."""
    holders = [
        pod
        for pod in cluster.store.items(POD)
        if pod["spec"].get("nodeName") == node
        and not pods.is_terminal(pod)
        and pods.requested(pod, GPU_RESOURCE) > 0
    ]
    holders.sort(
        key=lambda p: (
            p["metadata"].get("creationTimestamp") or "",
            p["metadata"]["namespace"],
            p["metadata"]["name"],
        )
    )
    free = iter(gpu.index for gpu in cluster.machines[node].gpus)
    users: dict[int, Obj] = {}
    for pod in holders:
        for _ in range(pods.requested(pod, GPU_RESOURCE)):
            index = next(free, None)
            if index is None:
                return users
            users[index] = pod
    return users


def present(machine: Machine, selected: str | None = None) -> list[Gpu]:
    """The GPUs still on the bus, narrowed to `selected` (`-i`: indices or UUIDs)."""
    gpus = [g for g in machine.gpus if g.present]
    if selected is not None:
        wanted = {s.strip() for s in selected.split(",")}
        gpus = [g for g in gpus if str(g.index) in wanted or g.uuid in wanted]
    return gpus


def product(machine: Machine) -> str:
    return machine.product.replace("-", " ")


def memory_total(machine: Machine) -> int:
    size = re.search(r"\d+GB", machine.product)
    return MEMORY_MIB.get(size.group(0) if size else "", 81559)


def memory_used(machine: Machine) -> int:
    return memory_total(machine) * 87 // 100

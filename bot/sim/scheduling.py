"""The scheduler: which node a pod may run on, and which one it gets.

A node fits when it is Ready, schedulable (or the pod tolerates the unschedulable taint),
every NoSchedule/NoExecute taint is tolerated, the pod's nodeSelector matches, and there
is room for its nvidia.com/gpu request and one more pod. Among fitting nodes the least
GPU-allocated wins (ties by name), preferring nodes the pod is not being moved away from.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bot.sim import pods
from bot.sim.kinds import NODE, POD
from bot.sim.manifests import GPU
from bot.sim.store import Store

Obj = dict[str, Any]

UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable"


def tolerates(tolerations: list[Obj], taint: Obj) -> bool:
    for toleration in tolerations:
        effect = toleration.get("effect")
        if effect and effect != taint.get("effect"):
            continue
        key = toleration.get("key")
        if not key and toleration.get("operator") == "Exists":
            return True
        if key != taint.get("key"):
            continue
        if toleration.get("operator") == "Exists" or toleration.get("value") == taint.get("value"):
            return True
    return False


def is_ready(node: Obj) -> bool:
    for condition in node.get("status", {}).get("conditions") or []:
        if condition.get("type") == "Ready":
            return bool(condition.get("status") == "True")
    return False


@dataclass(frozen=True)
class Usage:
    """Per node: GPUs requested and pods held by its non-finished pods (terminating ones
    keep theirs until they are gone)."""

    gpus: dict[str, int]
    pods: dict[str, int]

    @classmethod
    def of(cls, store: Store) -> Usage:
        gpus: dict[str, int] = {}
        count: dict[str, int] = {}
        for pod in store.items(POD):
            node = pod["spec"].get("nodeName")
            if node and not pods.is_terminal(pod):
                gpus[node] = gpus.get(node, 0) + pods.requested(pod, GPU)
                count[node] = count.get(node, 0) + 1
        return cls(gpus, count)

    def free_gpus(self, node: Obj) -> int:
        allocatable = node.get("status", {}).get("allocatable") or {}
        return int(allocatable.get(GPU, "0")) - self.gpus.get(node["metadata"]["name"], 0)

    def pod_room(self, node: Obj) -> bool:
        limit = int((node.get("status", {}).get("allocatable") or {}).get("pods", "110"))
        return self.pods.get(node["metadata"]["name"], 0) < limit


def why_not(usage: Usage, node: Obj, pod: Obj) -> str | None:
    """None when `pod` fits on `node`; otherwise the scheduler's reason."""
    tolerations = pod["spec"].get("tolerations") or []
    if not is_ready(node):
        return "node(s) had untolerated taint {node.kubernetes.io/not-ready: }"
    unschedulable = {"key": UNSCHEDULABLE_TAINT, "effect": "NoSchedule"}
    if node.get("spec", {}).get("unschedulable") and not tolerates(tolerations, unschedulable):
        return "node(s) were unschedulable"
    for taint in node.get("spec", {}).get("taints") or []:
        if taint.get("effect") in ("NoSchedule", "NoExecute") and not tolerates(tolerations, taint):
            return f"node(s) had untolerated taint {{{taint.get('key')}: {taint.get('value', '')}}}"
    labels = node["metadata"].get("labels") or {}
    for key, value in (pod["spec"].get("nodeSelector") or {}).items():
        if labels.get(key) != value:
            return "node(s) didn't match Pod's node affinity/selector"
    if pods.requested(pod, GPU) > usage.free_gpus(node):
        return f"Insufficient {GPU}"
    if not usage.pod_room(node):
        return "Too many pods"
    return None


def pick(store: Store, pod: Obj, avoid: set[str] | None = None) -> tuple[str | None, str]:
    """Choose a node for `pod`: (name, "") or (None, the FailedScheduling message)."""
    nodes = store.items(NODE)
    usage = Usage.of(store)
    reasons: dict[str, int] = {}
    fitting: list[Obj] = []
    for node in nodes:
        reason = why_not(usage, node, pod)
        if reason is None:
            fitting.append(node)
        else:
            reasons[reason] = reasons.get(reason, 0) + 1
    if not fitting:
        summary = ", ".join(f"{count} {reason}" for reason, count in sorted(reasons.items()))
        return None, f"0/{len(nodes)} nodes are available: {summary}."
    avoid = avoid or set()
    fitting.sort(
        key=lambda n: (n["metadata"]["name"] in avoid, -usage.free_gpus(n), n["metadata"]["name"])
    )
    return fitting[0]["metadata"]["name"], ""

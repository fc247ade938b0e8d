"""Pods as the API returns them: built from templates, defaulted, and moved through phases.

Every function returns or edits a complete object (spec.containers, status.conditions,
containerStatuses with image/imageID/ready/restartCount), because the `kubernetes` client
validates each response against its models before the caller sees it.
"""

from __future__ import annotations

import copy
from datetime import datetime
from typing import Any

Obj = dict[str, Any]

CONDITIONS = ("PodScheduled", "Initialized", "ContainersReady", "Ready")


def stamp(when: datetime) -> str:
    """RFC 3339 in UTC with second precision, as `metav1.Time` is written."""
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


def owner_ref(owner: Obj) -> Obj:
    meta = owner["metadata"]
    return {
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": meta["name"],
        "uid": meta["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def controller_of(pod: Obj) -> Obj | None:
    for ref in pod.get("metadata", {}).get("ownerReferences") or []:
        if ref.get("controller"):
            found: Obj = ref
            return found
    return None


def container(
    name: str,
    image: str,
    *,
    gpus: int = 0,
    cpu: str = "100m",
    memory: str = "128Mi",
    command: list[str] | None = None,
    mounts: list[Obj] | None = None,
) -> Obj:
    requests = {"cpu": cpu, "memory": memory}
    limits: dict[str, str] = {}
    if gpus:
        requests["nvidia.com/gpu"] = limits["nvidia.com/gpu"] = str(gpus)
    spec: Obj = {"name": name, "image": image}
    if command:
        spec["command"] = list(command)
    spec["resources"] = (
        {"requests": requests, "limits": limits} if limits else {"requests": requests}
    )
    if mounts:
        spec["volumeMounts"] = mounts
    return spec


def complete_spec(spec: Obj, grace_seconds: int = 30) -> Obj:
    """Fill the defaults the apiserver adds to a pod spec."""
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("terminationGracePeriodSeconds", grace_seconds)
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("serviceAccountName", "default")
    spec.setdefault("securityContext", {})
    spec.setdefault("enableServiceLinks", True)
    spec.setdefault("priority", 0)
    spec.setdefault("preemptionPolicy", "PreemptLowerPriority")
    spec.setdefault(
        "tolerations",
        [
            {
                "key": f"node.kubernetes.io/{key}",
                "operator": "Exists",
                "effect": "NoExecute",
                "tolerationSeconds": 300,
            }
            for key in ("not-ready", "unreachable")
        ],
    )
    for item in spec.get("containers") or []:
        item.setdefault("imagePullPolicy", "IfNotPresent")
        item.setdefault("terminationMessagePath", "/dev/termination-log")
        item.setdefault("terminationMessagePolicy", "File")
        item.setdefault("resources", {})
    return spec


def from_template(
    template: Obj,
    *,
    name: str,
    namespace: str,
    owner: Obj | None,
    node: str | None = None,
    extra_labels: dict[str, str] | None = None,
) -> Obj:
    """A new Pending pod from a controller's `spec.template`."""
    tmeta = template.get("metadata") or {}
    metadata: Obj = {"name": name, "namespace": namespace}
    metadata["labels"] = {**(tmeta.get("labels") or {}), **(extra_labels or {})}
    if tmeta.get("annotations"):
        metadata["annotations"] = dict(tmeta["annotations"])
    if owner is not None:
        metadata["ownerReferences"] = [owner_ref(owner)]
    spec = copy.deepcopy(template.get("spec") or {})
    if node:
        spec["nodeName"] = node
    pod: Obj = {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}
    return complete(pod)


def complete(pod: Obj) -> Obj:
    """Default a pod's spec and give it a Pending status if it has none."""
    complete_spec(pod.setdefault("spec", {}))
    status = pod.setdefault("status", {})
    status.setdefault("phase", "Pending")
    status.setdefault("qosClass", "Burstable")
    return pod


def _conditions(now: datetime, **states: bool) -> list[Obj]:
    return [
        {
            "type": kind,
            "status": "True" if states.get(kind, False) else "False",
            "lastProbeTime": None,
            "lastTransitionTime": stamp(now),
        }
        for kind in CONDITIONS
        if kind in states
    ]


def _container_statuses(pod: Obj, state: Obj, *, ready: bool, started: bool) -> list[Obj]:
    return [
        {
            "name": c["name"],
            "image": c.get("image", ""),
            "imageID": f"{c.get('image', '')}@sha256:{'0' * 64}" if started else "",
            "containerID": f"containerd://{pod['metadata'].get('uid', '').replace('-', '')}"
            if started
            else None,
            "ready": ready,
            "started": started,
            "restartCount": 0,
            "state": state,
        }
        for c in pod["spec"].get("containers") or []
    ]


def mark_unschedulable(pod: Obj, message: str, now: datetime) -> None:
    pod["status"] = {
        "phase": "Pending",
        "qosClass": pod["status"].get("qosClass", "Burstable"),
        "conditions": [
            {
                "type": "PodScheduled",
                "status": "False",
                "reason": "Unschedulable",
                "message": message,
                "lastProbeTime": None,
                "lastTransitionTime": stamp(now),
            }
        ],
    }


def mark_scheduled(pod: Obj, node: str, host_ip: str, now: datetime) -> None:
    pod["spec"]["nodeName"] = node
    waiting = {"waiting": {"reason": "ContainerCreating"}}
    pod["status"] = {
        "phase": "Pending",
        "qosClass": pod["status"].get("qosClass", "Burstable"),
        "hostIP": host_ip,
        "hostIPs": [{"ip": host_ip}],
        "startTime": stamp(now),
        "conditions": _conditions(
            now, PodScheduled=True, Initialized=True, ContainersReady=False, Ready=False
        ),
        "containerStatuses": _container_statuses(pod, waiting, ready=False, started=False),
    }


def mark_running(pod: Obj, pod_ip: str, now: datetime, *, ready: bool = True) -> None:
    status = pod["status"]
    status["phase"] = "Running"
    status["podIP"] = pod_ip
    status["podIPs"] = [{"ip": pod_ip}]
    status.setdefault("startTime", stamp(now))
    status["conditions"] = _conditions(
        now, PodScheduled=True, Initialized=True, ContainersReady=ready, Ready=ready
    )
    running = {"running": {"startedAt": stamp(now)}}
    status["containerStatuses"] = _container_statuses(pod, running, ready=ready, started=True)


def mark_finished(pod: Obj, exit_code: int, now: datetime) -> None:
    status = pod["status"]
    status["phase"] = "Succeeded" if exit_code == 0 else "Failed"
    status["conditions"] = _conditions(
        now, PodScheduled=True, Initialized=True, ContainersReady=False, Ready=False
    )
    started = status.get("startTime", stamp(now))
    terminated = {
        "terminated": {
            "exitCode": exit_code,
            "reason": "Completed" if exit_code == 0 else "Error",
            "startedAt": started,
            "finishedAt": stamp(now),
        }
    }
    status["containerStatuses"] = _container_statuses(pod, terminated, ready=False, started=False)


def is_ready(pod: Obj) -> bool:
    for condition in pod.get("status", {}).get("conditions") or []:
        if condition.get("type") == "Ready":
            return bool(condition.get("status") == "True")
    return False


def is_terminal(pod: Obj) -> bool:
    return pod.get("status", {}).get("phase") in ("Succeeded", "Failed")


def is_deleting(pod: Obj) -> bool:
    return bool(pod["metadata"].get("deletionTimestamp"))


def requested(pod: Obj, resource: str) -> int:
    """The pod's integer request of an extended resource such as nvidia.com/gpu."""
    total = 0
    for item in pod.get("spec", {}).get("containers") or []:
        resources = item.get("resources") or {}
        value = (resources.get("requests") or {}).get(resource)
        value = value if value is not None else (resources.get("limits") or {}).get(resource)
        if value is not None:
            try:
                total += int(str(value))
            except ValueError:  # extended resources are integers; anything else holds none
                continue
    return total


def command_line(pod: Obj) -> list[str]:
    """The first container's command followed by its args: what the runtime would exec."""
    containers = pod.get("spec", {}).get("containers") or [{}]
    first = containers[0]
    return [str(p) for p in (first.get("command") or []) + (first.get("args") or [])]

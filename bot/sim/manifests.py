"""Complete objects for every kind but Pod (see `pods`): what a scenario seeds and the
defaults the apiserver adds to objects created through the API.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from bot.sim.pods import stamp

Obj = dict[str, Any]

KUBELET_VERSION = "v1.32.4"
GPU = "nvidia.com/gpu"

# What the DaemonSet controller adds to every DaemonSet pod, so they run on cordoned nodes.
DAEMON_TOLERATIONS = [
    {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"},
    {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute"},
    {"key": "node.kubernetes.io/disk-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/memory-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/pid-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"},
]


def _meta(name: str, namespace: str | None = None, **extra: Any) -> Obj:
    meta: Obj = {"name": name}
    if namespace is not None:
        meta["namespace"] = namespace
    meta.update({k: v for k, v in extra.items() if v})
    return meta


def node_condition(kind: str, status: bool, reason: str, message: str, now: datetime) -> Obj:
    return {
        "type": kind,
        "status": "True" if status else "False",
        "reason": reason,
        "message": message,
        "lastHeartbeatTime": stamp(now),
        "lastTransitionTime": stamp(now),
    }


def node(
    name: str,
    *,
    index: int,
    gpus: int,
    gpu_product: str,
    cpu: str,
    memory: str,
    max_pods: int,
    labels: dict[str, str],
    taints: list[Obj],
    unschedulable: bool,
    ready: bool,
    now: datetime,
) -> Obj:
    all_labels = {
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "beta.kubernetes.io/os": "linux",
        "beta.kubernetes.io/arch": "amd64",
        "node.kubernetes.io/instance-type": "gpu-8x" if gpus else "cpu",
    }
    if gpus:
        all_labels.update(
            {
                "nvidia.com/gpu.present": "true",
                "nvidia.com/gpu.count": str(gpus),
                "nvidia.com/gpu.product": gpu_product,
            }
        )
    all_labels.update(labels)
    capacity = {
        "cpu": cpu,
        "memory": memory,
        "pods": str(max_pods),
        "ephemeral-storage": "3840Gi",
        "hugepages-1Gi": "0",
        "hugepages-2Mi": "0",
    }
    if gpus:
        capacity[GPU] = str(gpus)
    cidr = f"10.{244 + index // 256}.{index % 256}.0/24"  # distinct for up to 2,800 nodes
    spec: Obj = {"podCIDR": cidr, "podCIDRs": [cidr]}
    spec["providerID"] = f"sim://{name}"
    if taints:
        spec["taints"] = taints
    if unschedulable:
        spec["unschedulable"] = True
    ready_reason = "KubeletReady" if ready else "KubeletNotReady"
    ready_message = "kubelet is posting ready status" if ready else "container runtime is down"
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": _meta(
            name,
            labels=all_labels,
            annotations={
                "node.alpha.kubernetes.io/ttl": "0",
                "volumes.kubernetes.io/controller-managed-attach-detach": "true",
            },
        ),
        "spec": spec,
        "status": {
            "capacity": capacity,
            "allocatable": dict(capacity),
            "conditions": [
                node_condition(
                    "MemoryPressure",
                    False,
                    "KubeletHasSufficientMemory",
                    "kubelet has sufficient memory available",
                    now,
                ),
                node_condition(
                    "DiskPressure",
                    False,
                    "KubeletHasNoDiskPressure",
                    "kubelet has no disk pressure",
                    now,
                ),
                node_condition(
                    "PIDPressure",
                    False,
                    "KubeletHasSufficientPID",
                    "kubelet has sufficient PID available",
                    now,
                ),
                node_condition("Ready", ready, ready_reason, ready_message, now),
            ],
            "addresses": [
                {"type": "InternalIP", "address": host_ip(index)},
                {"type": "Hostname", "address": name},
            ],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {
                "machineID": f"{index:032x}",
                "systemUUID": f"00000000-0000-0000-0000-{index:012x}",
                "bootID": f"b0000000-0000-0000-0000-{index:012x}",
                "kernelVersion": "5.15.0-119-generic",
                "osImage": "Ubuntu 22.04.4 LTS",
                "containerRuntimeVersion": "containerd://1.7.20",
                "kubeletVersion": KUBELET_VERSION,
                "kubeProxyVersion": KUBELET_VERSION,
                "operatingSystem": "linux",
                "architecture": "amd64",
            },
        },
    }


def host_ip(index: int) -> str:
    """Node addresses come from TEST-NET-1 (RFC 5737): documentation-only, never routed."""
    return f"192.0.2.{index % 250 + 1}"


def namespace(name: str) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": _meta(name, labels={"kubernetes.io/metadata.name": name}),
        "spec": {"finalizers": ["kubernetes"]},
        "status": {"phase": "Active"},
    }


def template(labels: dict[str, str], spec: Obj, annotations: dict[str, str] | None = None) -> Obj:
    meta: Obj = {"labels": dict(labels)}
    if annotations:
        meta["annotations"] = dict(annotations)
    return {"metadata": meta, "spec": spec}


def daemon_set(name: str, ns: str, labels: dict[str, str], tmpl: Obj) -> Obj:
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": _meta(name, ns, labels=labels),
        "spec": {
            "selector": {"matchLabels": dict(labels)},
            "template": tmpl,
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1}},
            "revisionHistoryLimit": 10,
        },
        "status": {
            "currentNumberScheduled": 0,
            "desiredNumberScheduled": 0,
            "numberMisscheduled": 0,
            "numberReady": 0,
        },
    }


def replica_set(name: str, ns: str, replicas: int, labels: dict[str, str], tmpl: Obj) -> Obj:
    return {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": _meta(name, ns, labels=labels),
        "spec": {"replicas": replicas, "selector": {"matchLabels": dict(labels)}, "template": tmpl},
        "status": {"replicas": 0},
    }


def stateful_set(name: str, ns: str, replicas: int, labels: dict[str, str], tmpl: Obj) -> Obj:
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": _meta(name, ns, labels=labels),
        "spec": {
            "replicas": replicas,
            "serviceName": name,
            "selector": {"matchLabels": dict(labels)},
            "template": tmpl,
            "podManagementPolicy": "Parallel",
            "updateStrategy": {"type": "RollingUpdate"},
        },
        "status": {"replicas": 0},
    }


def pdb(name: str, ns: str, selector: dict[str, str], budget: Obj) -> Obj:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": _meta(name, ns),
        "spec": {**budget, "selector": {"matchLabels": dict(selector)}},
        "status": {
            "currentHealthy": 0,
            "desiredHealthy": 0,
            "disruptionsAllowed": 0,
            "expectedPods": 0,
        },
    }


def storage_class(name: str, provisioner: str, reclaim: str, default: bool) -> Obj:
    annotations = {"storageclass.kubernetes.io/is-default-class": "true"} if default else None
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": _meta(name, annotations=annotations),
        "provisioner": provisioner,
        "reclaimPolicy": reclaim,
        "volumeBindingMode": "Immediate",
        "allowVolumeExpansion": True,
    }


def nfs_volume(pv_name: str, claim: Obj, server: str, path: str) -> Obj:
    spec = claim["spec"]
    size = spec["resources"]["requests"]["storage"]
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": _meta(pv_name),
        "spec": {
            "capacity": {"storage": size},
            "accessModes": list(spec["accessModes"]),
            "nfs": {"server": server, "path": path},
            "persistentVolumeReclaimPolicy": "Retain",
            "storageClassName": spec["storageClassName"],
            "volumeMode": "Filesystem",
            "claimRef": {
                "kind": "PersistentVolumeClaim",
                "apiVersion": "v1",
                "namespace": claim["metadata"]["namespace"],
                "name": claim["metadata"]["name"],
                "uid": claim["metadata"]["uid"],
            },
        },
        "status": {"phase": "Bound"},
    }


def claim(name: str, ns: str, size: str, storage_class: str, modes: list[str], pv: str) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": _meta(name, ns),
        "spec": {
            "accessModes": list(modes),
            "resources": {"requests": {"storage": size}},
            "storageClassName": storage_class,
            "volumeName": pv,
            "volumeMode": "Filesystem",
        },
        "status": {"phase": "Bound", "accessModes": list(modes), "capacity": {"storage": size}},
    }


def queue(name: str, weight: int, state: str, reclaimable: bool, capability: dict[str, str]) -> Obj:
    spec: Obj = {"weight": weight, "reclaimable": reclaimable}
    if capability:
        spec["capability"] = dict(capability)
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": _meta(name),
        "spec": spec,
        "status": {"state": state, "running": 0, "pending": 0, "inqueue": 0, "unknown": 0},
    }


def job_defaults(job: Obj) -> Obj:
    """What the Job strategy adds on create: selector, template labels, counts, status."""
    meta = job["metadata"]
    uid, name = meta["uid"], meta["name"]
    spec = job.setdefault("spec", {})
    labels = {
        "batch.kubernetes.io/controller-uid": uid,
        "batch.kubernetes.io/job-name": name,
        "controller-uid": uid,
        "job-name": name,
    }
    if not spec.get("manualSelector"):
        spec["selector"] = {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}
    tmeta = spec.setdefault("template", {}).setdefault("metadata", {})
    tmeta["labels"] = {**(tmeta.get("labels") or {}), **labels}
    spec.setdefault("backoffLimit", 6)
    spec.setdefault("completions", 1)
    spec.setdefault("parallelism", 1)
    spec.setdefault("completionMode", "NonIndexed")
    spec.setdefault("suspend", False)
    job["status"] = {}
    return job


def event_defaults(event: Obj, now: datetime) -> Obj:
    event.setdefault("firstTimestamp", stamp(now))
    event.setdefault("lastTimestamp", stamp(now))
    event.setdefault("count", 1)
    event.setdefault("type", "Normal")
    event.setdefault("involvedObject", {})
    return event

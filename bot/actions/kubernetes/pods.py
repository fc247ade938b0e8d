"""Which pods are where (read): the pods on given nodes, and the pods a volume fault hits.

`k8s.pods_on_nodes` lists each node's pods with phase, owner, GPUs and volumes, as
`kubectl get pods --field-selector spec.nodeName=...` would. `k8s.pods_using_volume` is the
storage runbook's impact assessment: from a claim, an NFS server or a storage class to the
claims it covers, then to the live pods mounting them, with their nodes and a count per
namespace. Lists are paged (`limit`/`continue`) so a large cluster is read in bounded
pieces.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException
from pydantic import BaseModel, Field, model_validator

from bot.actions import cluster
from bot.actions.context import ActionContext
from bot.actions.kubernetes import api
from bot.actions.registry import Risk, action
from bot.actions.types import ClaimRef, Host, NodeName, ObjectName, Params, Result
from bot.errors import PermanentActionError

GPU = "nvidia.com/gpu"
DONE_PHASES = ("Succeeded", "Failed")
PAGE = 500
MAX_PAGES = 200
NFS_CSI_DRIVER = "nfs.csi.k8s.io"


def every(
    ctx: ActionContext, what: str, fn: Callable[..., Any], *args: Any, **kwargs: Any
) -> list[Any]:
    """All items of a list call, read PAGE at a time (at most MAX_PAGES pages)."""
    items: list[Any] = []
    token: str | None = None
    for _ in range(MAX_PAGES):
        page = cluster.call(
            what,
            fn,
            *args,
            limit=PAGE,
            _continue=token,
            timeout=api.timeout(ctx),
            clock=ctx.clock,
            **kwargs,
        )
        items.extend(page.items or [])
        meta = page.metadata
        token = getattr(meta, "var_continue", None) or getattr(meta, "_continue", None)
        if not token:
            return items
    raise PermanentActionError(
        f"cannot {what}: more than {PAGE * MAX_PAGES} objects; narrow the question"
    )


def owner(pod: Any) -> str:
    """The pod's controller as `Kind namespace/name`; mirror pods are `static pod`."""
    meta = pod.metadata
    if (meta.annotations or {}).get("kubernetes.io/config.mirror"):
        return "static pod"
    refs = meta.owner_references or []
    controller = next((r for r in refs if r.controller), refs[0] if refs else None)
    if controller is None:
        return "no controller"
    return f"{controller.kind} {meta.namespace}/{controller.name}"


def gpus(pod: Any) -> int:
    """GPUs the pod's containers request (the API copies limits into requests)."""
    total = 0
    for container in pod.spec.containers or []:
        requests = (container.resources and container.resources.requests) or {}
        total += int(requests.get(GPU, 0))
    return total


def volume_source(volume: dict[str, Any]) -> str:
    """One volume (as the API writes it) as `name: kind detail`: `datasets: pvc datasets`."""
    name = volume.get("name", "")
    if "persistentVolumeClaim" in volume:
        return f"{name}: pvc {volume['persistentVolumeClaim'].get('claimName')}"
    if "nfs" in volume:
        return f"{name}: nfs {volume['nfs'].get('server')}:{volume['nfs'].get('path')}"
    if "hostPath" in volume:
        return f"{name}: hostPath {volume['hostPath'].get('path')}"
    kinds = [key for key in volume if key != "name"]
    return f"{name}: {kinds[0] if kinds else 'unknown'}"


def _live(pod: Any) -> bool:
    return not (pod.status and pod.status.phase in DONE_PHASES)


class PodSummary(BaseModel):
    namespace: str
    name: str
    phase: str
    owner: str
    gpus: int
    volumes: list[str] = Field(default_factory=list)


class PodsOnNodesParams(Params):
    nodes: list[NodeName] = Field(min_length=1, max_length=50, description="node names")


class PodsOnNodes(Result):
    pods: dict[str, list[PodSummary]] = Field(default_factory=dict, description="by node")
    gpus_requested: dict[str, int] = Field(
        default_factory=dict, description="by node, pods still running or pending"
    )
    missing: list[str] = Field(default_factory=list, description="names that are not nodes")


@action(
    "k8s.pods_on_nodes",
    params=PodsOnNodesParams,
    result=PodsOnNodes,
    risk=Risk.READ,
    description="The pods on each node: phase, owner, GPUs requested and volumes.",
    dry_run=True,
)
def pods_on_nodes(ctx: ActionContext, params: PodsOnNodesParams) -> PodsOnNodes:
    core = api.core(ctx)
    serialize = ctx.kube().sanitize_for_serialization
    found: dict[str, list[PodSummary]] = {}
    requested: dict[str, int] = {}
    missing: list[str] = []
    for node in dict.fromkeys(params.nodes):
        pods = every(
            ctx,
            f"list pods on {node}",
            core.list_pod_for_all_namespaces,
            field_selector=f"spec.nodeName={node}",
        )
        if not pods and not _node_exists(ctx, node):
            missing.append(node)
            continue
        found[node] = [
            PodSummary(
                namespace=p.metadata.namespace,
                name=p.metadata.name,
                phase=(p.status and p.status.phase) or "Unknown",
                owner=owner(p),
                gpus=gpus(p),
                volumes=[volume_source(serialize(v)) for v in p.spec.volumes or []],
            )
            for p in sorted(pods, key=lambda p: (p.metadata.namespace, p.metadata.name))
        ]
        requested[node] = sum(gpus(p) for p in pods if _live(p))
    counted = ", ".join(f"{node}: {_count(pods, 'pod')}" for node, pods in found.items())
    summary = counted or "no pods"
    if missing:
        summary += f"; not nodes: {', '.join(missing)} (kubectl get nodes)"
    return PodsOnNodes(
        ok=not missing,
        summary=summary,
        dry_run=ctx.dry_run,
        pods=found,
        gpus_requested=requested,
        missing=missing,
    )


def _node_exists(ctx: ActionContext, node: str) -> bool:
    try:
        cluster.call(
            f"read node {node}",
            api.core(ctx).read_node,
            node,
            timeout=api.timeout(ctx),
            clock=ctx.clock,
            passthrough=[404],
        )
    except ApiException:
        return False
    return True


class VolumeParams(Params):
    claim: ClaimRef | None = Field(None, description="a PersistentVolumeClaim, namespace/name")
    nfs_server: Host | None = Field(None, description="an NFS server's host name or address")
    storage_class: ObjectName | None = Field(None, description="a StorageClass name")

    @model_validator(mode="after")
    def _exactly_one(self) -> VolumeParams:
        given = [v for v in (self.claim, self.nfs_server, self.storage_class) if v is not None]
        if len(given) != 1:
            raise ValueError("give exactly one of claim, nfs_server and storage_class")
        return self


class VolumePod(BaseModel):
    namespace: str
    name: str
    node: str = Field(description="empty while the pod is not scheduled")
    phase: str
    mounts: list[str] = Field(description="the claims (namespace/name) or NFS exports used")


class VolumeUsers(Result):
    claims: list[str] = Field(default_factory=list, description="claims covered, ns/name")
    pods: list[VolumePod] = Field(default_factory=list)
    per_namespace: dict[str, int] = Field(default_factory=dict)
    nodes: list[str] = Field(default_factory=list)


@action(
    "k8s.pods_using_volume",
    params=VolumeParams,
    result=VolumeUsers,
    risk=Risk.READ,
    description="Storage impact: the live pods (and their nodes) using a claim, an NFS "
    "server or a storage class.",
    dry_run=True,
)
def pods_using_volume(ctx: ActionContext, params: VolumeParams) -> VolumeUsers:
    core = api.core(ctx)
    server = params.nfs_server
    if params.claim is not None:
        namespace, name = params.claim.split("/", 1)
        _require(
            ctx,
            f"read claim {params.claim}",
            core.read_namespaced_persistent_volume_claim,
            name,
            namespace,
            hint=f"kubectl get pvc -n {namespace}",
        )
        claims = {params.claim}
        pods = every(ctx, f"list pods in {namespace}", core.list_namespaced_pod, namespace)
        subject = f"claim {params.claim}"
    elif server is not None:
        volumes = every(ctx, "list persistent volumes", core.list_persistent_volume)
        claims = _claim_refs(v for v in volumes if _nfs_server(v) == server)
        pods = every(ctx, "list pods", core.list_pod_for_all_namespaces)
        subject = f"NFS server {server}"
    else:
        sc = str(params.storage_class)
        _require(
            ctx,
            f"read storage class {sc}",
            client.StorageV1Api(ctx.kube()).read_storage_class,
            sc,
            hint="kubectl get storageclass",
        )
        pvcs = every(ctx, "list claims", core.list_persistent_volume_claim_for_all_namespaces)
        claims = {
            f"{c.metadata.namespace}/{c.metadata.name}"
            for c in pvcs
            if c.spec.storage_class_name == sc
        }
        pods = every(ctx, "list pods", core.list_pod_for_all_namespaces)
        subject = f"storage class {sc}"
    users = [u for u in (_usage(p, claims, server) for p in pods if _live(p)) if u.mounts]
    users.sort(key=lambda u: (u.namespace, u.name))
    per_namespace = dict(sorted(Counter(u.namespace for u in users).items()))
    on_nodes = sorted({u.node for u in users if u.node})
    summary = (
        f"{_count(users, 'live pod')} in {_count(per_namespace, 'namespace')} on "
        f"{_count(on_nodes, 'node')} use {subject} ({_count(claims, 'claim')})"
    )
    return VolumeUsers(
        ok=True,
        summary=summary,
        dry_run=ctx.dry_run,
        claims=sorted(claims),
        pods=users,
        per_namespace=per_namespace,
        nodes=on_nodes,
    )


def _count(items: Iterable[Any] | dict[str, int], noun: str) -> str:
    n = len(list(items))
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _require(ctx: ActionContext, what: str, fn: Callable[..., Any], *args: Any, hint: str) -> None:
    try:
        cluster.call(what, fn, *args, timeout=api.timeout(ctx), clock=ctx.clock, passthrough=[404])
    except ApiException as exc:
        raise PermanentActionError(f"cannot {what}: it does not exist ({hint})") from exc


def _nfs_server(volume: Any) -> str | None:
    """The NFS server behind a PersistentVolume: in-tree `nfs` or the NFS CSI driver."""
    spec = volume.spec
    if spec.nfs is not None:
        return str(spec.nfs.server).lower()
    if spec.csi is not None and spec.csi.driver == NFS_CSI_DRIVER:
        found = (spec.csi.volume_attributes or {}).get("server")
        return str(found).lower() if found else None
    return None


def _claim_refs(volumes: Iterable[Any]) -> set[str]:
    return {
        f"{v.spec.claim_ref.namespace}/{v.spec.claim_ref.name}"
        for v in volumes
        if v.spec.claim_ref is not None
    }


def _usage(pod: Any, claims: set[str], server: str | None) -> VolumePod:
    mounts = []
    for volume in pod.spec.volumes or []:
        pvc = volume.persistent_volume_claim
        if pvc is not None and f"{pod.metadata.namespace}/{pvc.claim_name}" in claims:
            mounts.append(f"{pod.metadata.namespace}/{pvc.claim_name}")
        elif server and volume.nfs is not None and str(volume.nfs.server).lower() == server:
            mounts.append(f"{volume.nfs.server}:{volume.nfs.path}")
    return VolumePod(
        namespace=pod.metadata.namespace,
        name=pod.metadata.name,
        node=pod.spec.node_name or "",
        phase=(pod.status and pod.status.phase) or "Unknown",
        mounts=mounts,
    )

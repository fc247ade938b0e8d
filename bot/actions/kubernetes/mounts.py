"""Who mounts a failing NFS export (read): the pods, their nodes and their jobs.

The seed's plan four begins with the impact: 哪些节点/任务挂载受影响 (which nodes and jobs
mount it). A storage alert names the export as `server:/path` (node_exporter's `device`
of an NFS mount); `k8s.pods_mounting` finds every live pod that mounts it, by any of the
ways Kubernetes can: an inline `nfs` volume, a claim bound to a PersistentVolume with an
in-tree `nfs` source, or one of the NFS CSI driver (`volumeAttributes` server, share and
subDir).
A path matches the export itself and anything under it (`/exports/ckpt` covers a volume
of `/exports/ckpt/team-a`); no path means the whole server. Server names are compared
without case, as DNS does.

Unlike `k8s.pods_using_volume` (a claim, a server or a storage class), it answers for
one export and says per node which pods and jobs it would stop, so the storage runbook
can act on the same set.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pydantic import BaseModel, Field, TypeAdapter, field_validator

from bot.actions.context import ActionContext
from bot.actions.kubernetes import api
from bot.actions.kubernetes.pods import NFS_CSI_DRIVER, every, owner
from bot.actions.registry import Risk, action
from bot.actions.types import Host, Params, Result

FINISHED = ("Succeeded", "Failed")
_HOST: TypeAdapter[str] = TypeAdapter(Host)


class MountParams(Params):
    storage: str = Field(
        min_length=1,
        max_length=1024,
        description="the NFS export as server:/path (the alert's storage label), or a server",
    )

    @field_validator("storage")
    @classmethod
    def _export(cls, value: str) -> str:
        given, _, path = value.strip().partition(":")
        try:
            server = _HOST.validate_python(given)
        except ValueError:
            raise ValueError(
                f"an NFS export is server:/path with a host name or address, not {value!r}"
            ) from None
        if path and not path.startswith("/"):
            raise ValueError(f"an NFS export is server:/path, not {value!r}")
        if any(ord(c) < 32 for c in path) or "/../" in f"{path}/":
            raise ValueError("the path has control characters or '..'")
        return f"{server}:{path.rstrip('/') or '/'}" if path else server

    @property
    def server(self) -> str:
        return self.storage.partition(":")[0]

    @property
    def path(self) -> str | None:
        return self.storage.partition(":")[2] or None


class MountingPod(BaseModel):
    namespace: str
    name: str
    node: str = Field(description="empty while the pod is not scheduled")
    phase: str
    job: str = Field(description="its controller, `Kind namespace/name`")
    mounts: list[str] = Field(description="what it mounts of the export: server:/path (via)")


class PodsMounting(Result):
    storage: str
    pods: list[MountingPod] = Field(default_factory=list)
    nodes: list[str] = Field(default_factory=list, description="nodes running those pods")
    jobs: list[str] = Field(default_factory=list, description="their controllers, distinct")
    per_node: dict[str, int] = Field(default_factory=dict, description="node -> pods")
    volumes: list[str] = Field(default_factory=list, description="PersistentVolumes on the export")
    claims: list[str] = Field(default_factory=list, description="claims bound to them, ns/name")


@action(
    "k8s.pods_mounting",
    params=MountParams,
    result=PodsMounting,
    risk=Risk.READ,
    description="Storage impact: the live pods mounting an NFS export (inline, PV or NFS "
    "CSI), their nodes and jobs.",
    dry_run=True,
)
def pods_mounting(ctx: ActionContext, params: MountParams) -> PodsMounting:
    core = api.core(ctx)
    volumes = every(ctx, "list persistent volumes", core.list_persistent_volume)
    on_export = {
        v.metadata.name: export
        for v in volumes
        if (export := _pv_export(v)) is not None and _covers(params, *export)
    }
    claims = {
        f"{v.spec.claim_ref.namespace}/{v.spec.claim_ref.name}": v.metadata.name
        for v in volumes
        if v.metadata.name in on_export and v.spec.claim_ref is not None
    }
    pods = every(ctx, "list pods", core.list_pod_for_all_namespaces)
    users = [
        user
        for pod in pods
        if not (pod.status and pod.status.phase in FINISHED)
        and (user := _user(pod, params, claims, on_export)) is not None
    ]
    users.sort(key=lambda u: (u.node, u.namespace, u.name))
    per_node: dict[str, int] = {}
    for user in users:
        if user.node:
            per_node[user.node] = per_node.get(user.node, 0) + 1
    jobs = sorted({u.job for u in users})
    summary = (
        f"{_count(users, 'live pod')} of {_count(jobs, 'job')} on {_count(per_node, 'node')} "
        f"mount {params.storage} ({_count(on_export, 'volume')}, {_count(claims, 'claim')})"
    )
    return PodsMounting(
        ok=True,
        summary=summary,
        dry_run=ctx.dry_run,
        storage=params.storage,
        pods=users,
        nodes=sorted(per_node),
        jobs=jobs,
        per_node=dict(sorted(per_node.items())),
        volumes=sorted(on_export),
        claims=sorted(claims),
    )


def _pv_export(volume: Any) -> tuple[str, str] | None:
    """(server, path) of an NFS PersistentVolume, in-tree or NFS CSI; None for others."""
    spec = volume.spec
    if spec.nfs is not None:
        return str(spec.nfs.server).lower(), str(spec.nfs.path or "/")
    if spec.csi is not None and spec.csi.driver == NFS_CSI_DRIVER:
        attributes = spec.csi.volume_attributes or {}
        if attributes.get("server"):
            share = str(attributes.get("share") or "/").rstrip("/")
            sub = str(attributes.get("subDir") or "").strip("/")
            return str(attributes["server"]).lower(), f"{share}/{sub}" if sub else share or "/"
    return None


def _covers(params: MountParams, server: str, path: str) -> bool:
    if server.lower() != params.server:
        return False
    wanted = params.path
    if wanted is None or wanted == "/":
        return True
    path = path.rstrip("/") or "/"
    return path == wanted or path.startswith(wanted + "/")


def _user(
    pod: Any, params: MountParams, claims: dict[str, str], exports: dict[str, tuple[str, str]]
) -> MountingPod | None:
    meta = pod.metadata
    mounts = []
    for volume in pod.spec.volumes or []:
        if volume.nfs is not None:
            server, path = str(volume.nfs.server), str(volume.nfs.path or "/")
            if _covers(params, server, path):
                mounts.append(f"{server.lower()}:{path} (inline {volume.name})")
        elif volume.persistent_volume_claim is not None:
            claim = f"{meta.namespace}/{volume.persistent_volume_claim.claim_name}"
            if claim in claims:
                server, path = exports[claims[claim]]
                mounts.append(f"{server}:{path} (claim {claim})")
    if not mounts:
        return None
    return MountingPod(
        namespace=meta.namespace,
        name=meta.name,
        node=pod.spec.node_name or "",
        phase=(pod.status and pod.status.phase) or "Unknown",
        job=owner(pod),
        mounts=mounts,
    )


def _count(items: Iterable[Any], noun: str) -> str:
    n = len(list(items))
    return f"{n} {noun}{'' if n == 1 else 's'}"

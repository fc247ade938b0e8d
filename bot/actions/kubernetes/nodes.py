"""Node actions: status (read), cordon and uncordon (change), as `kubectl` would do them.

Cordon marks the node with who, which incident and why; uncordon only undoes the bot's own
cordon unless forced, so a node a human cordoned stays cordoned.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime
from typing import Any

from kubernetes.client.exceptions import ApiException
from pydantic import Field

from bot.actions import breaker, cluster
from bot.actions.context import ActionContext
from bot.actions.kubernetes import api, marks, pods
from bot.actions.registry import Risk, action
from bot.actions.types import NodeName, Params, Reason, Result
from bot.errors import TemporaryActionError

GPU = "nvidia.com/gpu"
CONFLICT_ATTEMPTS = 3
DONE_PHASES = ("Succeeded", "Failed")


class NodeParams(Params):
    node: NodeName = Field(description="the node's name")


class NodeStatus(Result):
    node: str
    ready: str = Field(description="the Ready condition: True, False or Unknown")
    ready_since: datetime | None = None
    ready_reason: str = ""
    unschedulable: bool
    taints: list[str] = Field(default_factory=list)
    gpus_allocatable: int = 0
    gpus_allocated: int = 0
    pods_by_owner: dict[str, list[str]] = Field(default_factory=dict)
    cordoned_by: str | None = Field(None, description="incident and person, when the bot did")


@action(
    "k8s.node_status",
    params=NodeParams,
    result=NodeStatus,
    risk=Risk.READ,
    description="Ready condition, cordon and taints, GPUs allocated, pods by owner.",
    dry_run=True,
)
def node_status(ctx: ActionContext, params: NodeParams) -> NodeStatus:
    node = api.read_node(ctx, params.node)
    running = cluster.call(
        f"list pods on {params.node}",
        api.core(ctx).list_pod_for_all_namespaces,
        field_selector=f"spec.nodeName={params.node}",
        timeout=api.timeout(ctx),
        clock=ctx.clock,
    ).items
    ready = next((c for c in node.status.conditions or [] if c.type == "Ready"), None)
    owners: dict[str, list[str]] = defaultdict(list)
    allocated = 0
    for pod in running:
        owners[pods.owner(pod)].append(f"{pod.metadata.namespace}/{pod.metadata.name}")
        if not (pod.status and pod.status.phase in DONE_PHASES):
            allocated += pods.gpus(pod)
    allocatable = int((node.status.allocatable or {}).get(GPU, 0))
    unschedulable = bool(node.spec.unschedulable)
    state = ready.status if ready else "Unknown"
    by = marks.holder(node) if marks.cordoned_by_bot(node) else None
    summary = (
        f"{params.node}: Ready={state}, "
        + (f"cordoned{' by ' + by if by else ''}" if unschedulable else "schedulable")
        + f", {allocated}/{allocatable} GPUs allocated, {len(running)} pods"
    )
    return NodeStatus(
        ok=True,
        summary=summary,
        dry_run=ctx.dry_run,
        node=params.node,
        ready=state,
        ready_since=ready.last_transition_time if ready else None,
        ready_reason=(ready.reason or "") if ready else "",
        unschedulable=unschedulable,
        taints=[_taint(t) for t in node.spec.taints or []],
        gpus_allocatable=allocatable,
        gpus_allocated=allocated,
        pods_by_owner=dict(sorted(owners.items())),
        cordoned_by=by,
    )


def _taint(taint: Any) -> str:
    value = f"={taint.value}" if taint.value else ""
    return f"{taint.key}{value}:{taint.effect}"


class CordonParams(NodeParams):
    reason: Reason = Field("runbook-bot", description="why, recorded on the node")


class NodeChange(Result):
    node: str
    changed: bool


def _change(
    ctx: ActionContext, node: str, summary: str, *, changed: bool, ok: bool = True
) -> NodeChange:
    return NodeChange(ok=ok, summary=summary, dry_run=ctx.dry_run, node=node, changed=changed)


@action(
    "k8s.cordon",
    params=CordonParams,
    result=NodeChange,
    risk=Risk.CHANGE,
    description="Mark a node unschedulable (kubectl cordon), recording incident, who and why.",
    dry_run=True,
)
def cordon(ctx: ActionContext, params: CordonParams) -> NodeChange:
    for _ in range(CONFLICT_ATTEMPTS):
        node = api.read_node(ctx, params.node)
        if node.spec.unschedulable:
            who = f"by {marks.holder(node)}" if marks.cordoned_by_bot(node) else "by someone else"
            return _change(
                ctx,
                params.node,
                f"{params.node} is already cordoned ({who}); nothing to do",
                changed=False,
            )
        notes = marks.cordon_annotations(
            incident=ctx.incident, actor=ctx.actor, reason=params.reason, at=ctx.clock.now()
        )
        # The resourceVersion makes the write conditional: if a human cordoned the node
        # since we read it, we must not put our marks on their cordon.
        meta = {"annotations": notes, "resourceVersion": node.metadata.resource_version}
        try:
            with breaker.held(ctx):  # no other worker counts or cordons in between
                breaker.check(ctx, params.node)
                api.patch_node(
                    ctx,
                    params.node,
                    {"spec": {"unschedulable": True}, "metadata": meta},
                    f"cordon {params.node}",
                    passthrough=(409,),
                )
        except ApiException:
            continue  # changed under us: read it again
        suffix = " (dry run)" if ctx.dry_run else ""
        ctx.progress(f"{params.node} cordoned{suffix}")
        return _change(ctx, params.node, f"{params.node} cordoned{suffix}", changed=True)
    raise TemporaryActionError(
        f"{params.node} kept changing while the bot tried to cordon it; try again"
    )


class UncordonParams(NodeParams):
    force: bool = Field(
        False, description="also uncordon a node the bot did not cordon (a human's cordon)"
    )


@action(
    "k8s.uncordon",
    params=UncordonParams,
    result=NodeChange,
    risk=Risk.CHANGE,
    description="Make a node schedulable again; only the bot's own cordon unless forced.",
    dry_run=True,
)
def uncordon(ctx: ActionContext, params: UncordonParams) -> NodeChange:
    node = api.read_node(ctx, params.node)
    ours = marks.cordoned_by_bot(node)
    stale = not node.spec.unschedulable and bool(set(marks.annotations_of(node)) & set(marks.KEYS))
    if not node.spec.unschedulable:
        if stale:
            # A human uncordoned what the bot cordoned: respect it, drop our marks.
            api.patch_node(
                ctx,
                params.node,
                {"metadata": {"annotations": marks.cleared()}},
                f"clear runbook-bot marks on {params.node}",
            )
            if not ctx.dry_run:
                ctx.record(
                    "k8s.uncordoned_by_human",
                    f"{params.node} was already uncordoned by someone else; the bot's marks were "
                    "removed",
                    {"node": params.node},
                )
        return _change(
            ctx, params.node, f"{params.node} is already schedulable; nothing to do", changed=False
        )
    if not ours and not params.force:
        return _change(
            ctx,
            params.node,
            f"{params.node} was cordoned by someone other than the bot; leaving it "
            "cordoned (pass force=true to uncordon it anyway)",
            changed=False,
            ok=False,
        )
    body = {"spec": {"unschedulable": None}, "metadata": {"annotations": marks.cleared()}}
    api.patch_node(ctx, params.node, body, f"uncordon {params.node}")
    forced = "" if ours else " (forced: the bot had not cordoned it)"
    ctx.progress(f"{params.node} uncordoned{forced}" + (" (dry run)" if ctx.dry_run else ""))
    return _change(
        ctx,
        params.node,
        f"{params.node} uncordoned{forced}" + (" (dry run)" if ctx.dry_run else ""),
        changed=True,
    )

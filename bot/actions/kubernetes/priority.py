"""Jobs by priority on a set of nodes (read), and stopping the low-priority ones (change).

The seed's plan five sheds load from a hot row before anything is shut down: 按优先级
graceful 停掉低优先级任务保核心在线 (stop the low-priority jobs gracefully, by priority, to
keep the core online). `k8s.pods_by_priority` lists the live pods on the nodes, lowest
priority first, marking the ones below a threshold; `k8s.stop_low_priority` evicts exactly
those through the Eviction API, as a drain does (`draining.evict`): each pod gets its own
grace period to write a checkpoint, and its PodDisruptionBudget is respected. The nodes
stay schedulable and everything at or above the threshold keeps running. DaemonSet pods,
mirror pods and pods no controller would recreate are never stopped (a stopped bare pod
is work lost, not moved).

A pod's priority is `spec.priority`, which the API server's Priority admission fills from
its `priorityClassName` (the class's value; 0 without one), so the threshold is a value:
`below: 1000` with classes `low` (100), `normal` (1000) and `core` (10000) stops `low`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, Field, field_validator

from bot.actions.context import ActionContext
from bot.actions.kubernetes import api, draining
from bot.actions.kubernetes.pods import every, gpus, owner
from bot.actions.registry import Risk, action
from bot.actions.types import NodeName, Params, Reason, Result
from bot.durations import Duration, format_duration
from bot.errors import PermanentActionError

MAX_NODES = 1000
"""A set as large as a row, a leaf switch or a storage server's clients."""
PRIORITY_RANGE = (-2147483648, 1000000000)
"""User PriorityClass values; above it are the system classes, never "low"."""


def _split(value: Any) -> Any:
    """A runbook renders a list as one string: `{{ incident.nodes | join(',') }}`."""
    if isinstance(value, str):
        return [part for part in re.split(r"[\s,]+", value) if part]
    return value


NodeSet = Annotated[list[NodeName], BeforeValidator(_split)]
"""Node names as a list, or as one string separated by commas or spaces."""


class PriorityParams(Params):
    nodes: NodeSet = Field(
        min_length=1,
        max_length=MAX_NODES,
        description="node names, a list or comma-separated (the incident's nodes)",
    )
    below: int = Field(
        ge=PRIORITY_RANGE[0],
        le=PRIORITY_RANGE[1],
        description="pods whose priority (their PriorityClass's value) is below this are low",
    )


class RankedPod(BaseModel):
    namespace: str
    name: str
    node: str
    priority: int
    priority_class: str = Field(description="empty without one")
    owner: str
    gpus: int
    low: bool = Field(description="below the threshold and stoppable: what stop_low_priority stops")
    kept: str = Field("", description="why a pod below the threshold is not stopped")


class PodsByPriority(Result):
    threshold: int = Field(description="the priority value `low` is below")
    pods: list[RankedPod] = Field(default_factory=list, description="lowest priority first")
    low: int = Field(0, description="pods marked low")
    low_gpus: int = Field(0, description="GPUs the low pods request: the load stopping frees")
    kept: int = Field(0, description="pods at or above the threshold (or not stoppable)")
    missing: list[str] = Field(default_factory=list, description="names that are not nodes")


@action(
    "k8s.pods_by_priority",
    params=PriorityParams,
    result=PodsByPriority,
    risk=Risk.READ,
    description="The live pods on the nodes, lowest priority first, marking those below a "
    "priority (what k8s.stop_low_priority would stop).",
    dry_run=True,
)
def pods_by_priority(ctx: ActionContext, params: PriorityParams) -> PodsByPriority:
    threshold = params.below
    found, missing = _rank(ctx, params.nodes, threshold)
    ranked = [RankedPod.model_validate(p.model_dump(exclude={"uid", "labels"})) for p in found]
    low = [p for p in ranked if p.low]
    summary = (
        f"{_count(low, 'pod')} below priority {threshold} "
        f"({sum(p.gpus for p in low)} GPUs) of {_count(ranked, 'live pod')} on "
        f"{_count(set(params.nodes) - set(missing), 'node')}"
    )
    if missing:
        summary += f"; not nodes: {', '.join(missing)} (kubectl get nodes)"
    return PodsByPriority(
        ok=not missing,
        summary=summary,
        dry_run=ctx.dry_run,
        threshold=threshold,
        pods=ranked,
        low=len(low),
        low_gpus=sum(p.gpus for p in low),
        kept=len(ranked) - len(low),
        missing=missing,
    )


class StopParams(PriorityParams):
    reason: Reason = Field("runbook-bot", description="why, recorded in the log")
    timeout: Duration | None = Field(
        None,
        description="give up on pods still there after this long (1s..2h); unset: drain_timeout",
    )

    @field_validator("timeout")
    @classmethod
    def _bounded(cls, value: timedelta | None) -> timedelta | None:
        if value is not None and not timedelta(seconds=1) <= value <= timedelta(hours=2):
            raise ValueError("must be between 1s and 2h")
        return value


class StoppedPod(BaseModel):
    pod: str = Field(description="namespace/name")
    node: str
    priority: int
    why: str = ""


class LowPriorityStopped(Result):
    threshold: int
    stopped: list[StoppedPod] = Field(default_factory=list, description="evicted, or gone")
    remaining: list[StoppedPod] = Field(
        default_factory=list, description="still there when it gave up: why (e.g. a budget)"
    )
    kept: int = Field(0, description="pods left running: at or above the threshold")
    gpus_freed: int = 0
    missing: list[str] = Field(default_factory=list, description="names that are not nodes")
    changed: bool = False


@action(
    "k8s.stop_low_priority",
    params=StopParams,
    result=LowPriorityStopped,
    risk=Risk.CHANGE,
    description="Gracefully evict the pods below a priority on the nodes (budgets respected), "
    "keeping the rest running and the nodes schedulable.",
    dry_run=True,
)
def stop_low_priority(ctx: ActionContext, params: StopParams) -> LowPriorityStopped:
    started = ctx.clock.monotonic()
    timeout = params.timeout or ctx.settings.drain_timeout
    threshold = params.below
    ranked, missing = _rank(ctx, params.nodes, threshold)
    low = [p for p in ranked if p.low]
    ctx.record(
        "pods.stopping",
        f"stopping {_count(low, 'pod')} below priority {threshold} on "
        f"{_count(params.nodes, 'node')}{_dry(ctx)}: {params.reason}",
        {
            "threshold": threshold,
            "pods": [f"{p.namespace}/{p.name}" for p in low],
            "nodes": list(params.nodes),
            "reason": params.reason,
            "timeout": format_duration(timeout),
            "dry_run": ctx.dry_run,
        },
    )
    deadline = started + timeout.total_seconds()
    by_key = {f"{p.namespace}/{p.name}": p for p in low}
    stopped: list[StoppedPod] = []
    remaining: list[StoppedPod] = []
    rules = draining.Rules()
    for node, refs in _refs_by_node(low).items():
        done = draining.evict(ctx, refs, node=node, rules=rules, deadline=deadline)
        for key in done.evicted:
            stopped.append(_stopped(by_key[key]))
        for key, why in done.gone:
            stopped.append(_stopped(by_key[key], why))
        for key, why in done.remaining:
            remaining.append(_stopped(by_key[key], why))
    freed = sum(by_key[s.pod].gpus for s in stopped)
    verb = "would stop" if ctx.dry_run else "stopped"
    summary = (
        f"{verb} {_count(stopped, 'pod')} below priority {threshold} ({freed} GPUs); "
        f"{len(ranked) - len(low)} kept running"
    )
    if remaining:
        listed = "; ".join(f"{r.pod}: {r.why}" for r in remaining[:5])
        summary += f"; {len(remaining)} still there: {listed}"
    if missing:
        summary += f"; not nodes: {', '.join(missing)} (kubectl get nodes)"
    result = LowPriorityStopped(
        ok=not remaining and not missing,
        summary=summary,
        dry_run=ctx.dry_run,
        threshold=threshold,
        stopped=sorted(stopped, key=lambda s: (s.priority, s.pod)),
        remaining=remaining,
        kept=len(ranked) - len(low),
        gpus_freed=freed,
        missing=missing,
        changed=bool(stopped) and not ctx.dry_run,
    )
    ctx.record(
        "pods.stopped",
        result.summary,
        {
            "threshold": threshold,
            "stopped": [s.pod for s in result.stopped],
            "remaining": {r.pod: r.why for r in remaining},
            "gpus_freed": freed,
            "dry_run": ctx.dry_run,
        },
    )
    return result


# -- shared -----------------------------------------------------------------------------------


class _Ranked(RankedPod):
    uid: str = ""
    labels: dict[str, str] = Field(default_factory=dict)


def _rank(
    ctx: ActionContext, nodes: Iterable[str], threshold: int
) -> tuple[list[_Ranked], list[str]]:
    """The live pods on the nodes, lowest priority first (then by name), and the names that
    are not nodes."""
    core = api.core(ctx)
    now = datetime.now(UTC)  # compared with the API server's timestamps, not a test clock
    ranked: list[_Ranked] = []
    missing: list[str] = []
    for node in dict.fromkeys(nodes):
        pods = every(
            ctx,
            f"list pods on {node}",
            core.list_pod_for_all_namespaces,
            field_selector=f"spec.nodeName={node}",
        )
        if not pods and not _is_node(ctx, node):
            missing.append(node)
            continue
        for pod in pods:
            if pod.status and pod.status.phase in draining.FINISHED:
                continue
            if pod.metadata.deletion_timestamp is not None:
                continue  # already stopping
            ranked.append(_ranked(pod, node, threshold, now))
    ranked.sort(key=lambda p: (p.priority, p.namespace, p.name))
    return ranked, missing


def _is_node(ctx: ActionContext, name: str) -> bool:
    try:
        api.read_node(ctx, name)
    except PermanentActionError:
        return False
    return True


def _ranked(pod: Any, node: str, threshold: int, now: datetime) -> _Ranked:
    priority = int(pod.spec.priority or 0)
    kept = ""
    if priority < threshold:
        verdict = draining.classify(pod, draining.Rules(), now, lambda _ns, _name: True)
        if verdict.action != "evict":
            kept = verdict.why
    meta = pod.metadata
    return _Ranked(
        namespace=meta.namespace,
        name=meta.name,
        node=node,
        priority=priority,
        priority_class=pod.spec.priority_class_name or "",
        owner=owner(pod),
        gpus=gpus(pod),
        low=priority < threshold and not kept,
        kept=kept,
        uid=meta.uid or "",
        labels=dict(meta.labels or {}),
    )


def _refs_by_node(pods: list[_Ranked]) -> dict[str, list[draining.PodRef]]:
    found: dict[str, list[draining.PodRef]] = {}
    for p in pods:
        ref = draining.PodRef(p.namespace, p.name, p.uid, p.labels)
        found.setdefault(p.node, []).append(ref)
    return found


def _stopped(pod: RankedPod, why: str = "") -> StoppedPod:
    return StoppedPod(
        pod=f"{pod.namespace}/{pod.name}", node=pod.node, priority=pod.priority, why=why
    )


def _count(items: Iterable[Any], noun: str) -> str:
    n = len(list(items))
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _dry(ctx: ActionContext) -> str:
    return " (dry run)" if ctx.dry_run else ""

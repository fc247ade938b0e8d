"""`k8s.drain` and `k8s.drain_unsafe`: cordon a node, then evict its pods as
`kubectl drain --ignore-daemonsets --delete-emptydir-data` would.

Both actions share one executor. `k8s.drain` (risk change) refuses `force` and
`disable_eviction`; `k8s.drain_unsafe` (risk disruptive, two approvals) allows them,
because deleting bare pods or bypassing PodDisruptionBudgets loses work nothing
recreates. The algorithm (filters, parallel evictions, waiting) lives in `draining`.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, field_validator

from bot.actions.context import ActionContext
from bot.actions.kubernetes import draining, nodes
from bot.actions.registry import Risk, action
from bot.actions.types import NodeName, Params, Reason, Result
from bot.durations import Duration, format_duration

# Label-selector syntax only (`gpu=3`, `app in (a,b)`, `!canary`): the characters of label
# keys and values, operators, commas, parentheses and spaces.
PodSelector = Annotated[
    str,
    StringConstraints(pattern=r"^[A-Za-z0-9_.\-/=!, ()]+$", max_length=512, strip_whitespace=True),
]
MIN_TIMEOUT = timedelta(seconds=1)
MAX_TIMEOUT = timedelta(hours=2)


class DrainOptions(Params):
    """Every drain parameter; `k8s.drain` narrows it (`DrainParams`)."""

    node: NodeName = Field(description="the node's name")
    reason: Reason = Field("runbook-bot", description="why, recorded on the node")
    pod_selector: PodSelector | None = Field(
        None, description="label selector: drain only the pods it matches (e.g. gpu-index=3)"
    )
    grace_period: int = Field(
        -1, ge=-1, le=86400, description="seconds each pod gets to stop; -1: the pod's own"
    )
    timeout: Duration | None = Field(
        None, description="give up after this long (1s..2h); unset: the drain_timeout setting"
    )
    delete_emptydir_data: bool = Field(
        True, description="evict pods with emptyDir volumes (their data is lost)"
    )
    ignore_daemonsets: bool = Field(
        True, description="leave DaemonSet pods in place; false refuses the drain if any exist"
    )
    skip_wait_for_delete_timeout: int = Field(
        0, ge=0, le=86400, description="skip pods already terminating this many seconds (0: off)"
    )
    force: bool = Field(False, description="also delete pods no controller will recreate")
    disable_eviction: bool = Field(
        False, description="DELETE pods instead of evicting them, bypassing PodDisruptionBudgets"
    )

    @field_validator("timeout")
    @classmethod
    def _bounded(cls, value: timedelta | None) -> timedelta | None:
        if value is not None and not MIN_TIMEOUT <= value <= MAX_TIMEOUT:
            raise ValueError("must be between 1s and 2h")
        return value


class DrainParams(DrainOptions):
    @field_validator("force", "disable_eviction")
    @classmethod
    def _only_unsafe(cls, value: bool) -> bool:
        if value:
            raise ValueError(
                "deletes pods nothing recreates or bypasses PodDisruptionBudgets; "
                "use k8s.drain_unsafe, which needs the disruptive approval"
            )
        return value


class UnsafeDrainParams(DrainOptions):
    """The same parameters with `force` and `disable_eviction` allowed."""


class PodNote(BaseModel):
    model_config = ConfigDict(extra="forbid")

    pod: str = Field(description="namespace/name")
    reason: str


class DrainResult(Result):
    node: str
    evicted: list[str] = Field(default_factory=list, description="pods evicted (or deleted)")
    gone: list[PodNote] = Field(
        default_factory=list, description="pods that left without our eviction (404, replaced)"
    )
    skipped: list[PodNote] = Field(default_factory=list)
    refused: list[PodNote] = Field(default_factory=list)
    remaining: list[PodNote] = Field(
        default_factory=list, description="pods still on the node when the drain gave up"
    )
    emptydir_deleted: list[str] = Field(default_factory=list)
    delete_emptydir_data: bool = True
    duration_seconds: float = 0.0
    changed: bool = False


def drain(ctx: ActionContext, params: DrainOptions) -> DrainResult:
    started = ctx.clock.monotonic()
    timeout = params.timeout or ctx.settings.drain_timeout
    cordon = nodes.cordon(ctx, nodes.CordonParams(node=params.node, reason=params.reason))
    if not cordon.changed:
        ctx.progress(cordon.summary.replace("nothing to do", "draining it"))
    rules = draining.Rules(
        force=params.force,
        ignore_daemonsets=params.ignore_daemonsets,
        delete_emptydir_data=params.delete_emptydir_data,
        skip_wait_seconds=params.skip_wait_for_delete_timeout,
        grace_period=params.grace_period,
        use_eviction=not params.disable_eviction,
    )
    plan = draining.plan(ctx, params.node, params.pod_selector, rules)
    _record_plan(ctx, params, plan, timeout)
    if plan.refused:
        return _refused(ctx, params, plan, cordon.changed, started)
    for pod in plan.emptydir:
        ctx.progress(f"deleting emptyDir data of {pod}" + _dry(ctx))
    deadline = started + timeout.total_seconds()
    done = draining.evict(ctx, plan.evict, node=params.node, rules=rules, deadline=deadline)
    duration = round(ctx.clock.monotonic() - started, 3)
    result = DrainResult(
        ok=not done.remaining,
        summary=_summary(params.node, plan, done, duration, timeout, ctx.dry_run),
        dry_run=ctx.dry_run,
        node=params.node,
        evicted=done.evicted,
        gone=_notes(done.gone),
        skipped=_notes(plan.skipped),
        remaining=_notes(done.remaining),
        emptydir_deleted=[pod for pod in plan.emptydir if pod in set(done.evicted)],
        delete_emptydir_data=params.delete_emptydir_data,
        duration_seconds=duration,
        changed=cordon.changed or bool(done.evicted),
    )
    ctx.record(
        "drain.finished",
        result.summary,
        {
            "node": params.node,
            "ok": result.ok,
            "evicted": len(done.evicted),
            "gone": len(done.gone),
            "skipped": len(plan.skipped),
            "remaining": _notes_data(done.remaining),
            "timed_out": done.timed_out,
            "duration_seconds": duration,
            "dry_run": ctx.dry_run,
        },
    )
    return result


def _record_plan(
    ctx: ActionContext, params: DrainOptions, plan: draining.Plan, timeout: timedelta
) -> None:
    ctx.record(
        "drain.started",
        f"draining {params.node}{_dry(ctx)}: {_pods(len(plan.evict))} to evict, "
        f"{len(plan.skipped)} left in place, {len(plan.refused)} refused",
        {
            "node": params.node,
            "evict": [ref.key for ref in plan.evict],
            "skipped": _notes_data(plan.skipped),
            "refused": _notes_data(plan.refused),
            "emptydir": plan.emptydir,
            "timeout": format_duration(timeout),
            "grace_period": params.grace_period,
            "pod_selector": params.pod_selector,
            "force": params.force,
            "disable_eviction": params.disable_eviction,
            "dry_run": ctx.dry_run,
        },
    )


def _refused(
    ctx: ActionContext, params: DrainOptions, plan: draining.Plan, cordoned: bool, started: float
) -> DrainResult:
    """kubectl's rule: one pod it may not evict stops the whole node before any eviction."""
    listed = "; ".join(f"{pod}: {why}" for pod, why in plan.refused)
    ctx.record(
        "drain.refused",
        f"{params.node} not drained, nothing evicted: {listed}",
        {"node": params.node, "refused": _notes_data(plan.refused)},
    )
    return DrainResult(
        ok=False,
        summary=f"{params.node} {'would be' if ctx.dry_run else 'is'} cordoned but not drained"
        f"{_dry(ctx)}: {_pods(len(plan.refused))} refused, nothing evicted: {listed}",
        dry_run=ctx.dry_run,
        node=params.node,
        skipped=_notes(plan.skipped),
        refused=_notes(plan.refused),
        delete_emptydir_data=params.delete_emptydir_data,
        duration_seconds=round(ctx.clock.monotonic() - started, 3),
        changed=cordoned,
    )


def _summary(
    node: str,
    plan: draining.Plan,
    done: draining.Drained,
    duration: float,
    timeout: timedelta,
    dry_run: bool,
) -> str:
    left = len(done.evicted) + len(done.gone)
    wiped = sum(1 for pod in plan.emptydir if pod in set(done.evicted))
    if not done.remaining:
        head, verb, lost = "drained", "evicted", "deleted"
        if dry_run:
            head, verb, lost = "would drain", "would evict", "would be deleted"
        return (
            f"{node} {head}: {verb} {_pods(left)}"
            + (f" (emptyDir data {lost} for {wiped})" if wiped else "")
            + (f", {len(plan.skipped)} left in place" if plan.skipped else "")
            + f" in {duration:.1f}s"
        )
    stuck = "; ".join(f"{pod}: {why}" for pod, why in done.remaining)
    when = f" after {format_duration(timeout)}" if done.timed_out else ""
    head = f"{node} would not drain now" if dry_run else f"{node} not drained{when}"
    return f"{head}: {_pods(left)} gone, {_pods(len(done.remaining))} still on it: {stuck}"


def _pods(count: int) -> str:
    return f"{count} pod" if count == 1 else f"{count} pods"


def _dry(ctx: ActionContext) -> str:
    return " (dry run)" if ctx.dry_run else ""


def _notes(pairs: list[tuple[str, str]]) -> list[PodNote]:
    return [PodNote(pod=pod, reason=why) for pod, why in pairs]


def _notes_data(pairs: list[tuple[str, str]]) -> list[dict[str, str]]:
    return [{"pod": pod, "reason": why} for pod, why in pairs]


action(
    "k8s.drain",
    params=DrainParams,
    result=DrainResult,
    risk=Risk.CHANGE,
    description="Cordon a node and evict its pods as kubectl drain does, respecting "
    "PodDisruptionBudgets; DaemonSet and mirror pods stay.",
    dry_run=True,
)(drain)

action(
    "k8s.drain_unsafe",
    params=UnsafeDrainParams,
    result=DrainResult,
    risk=Risk.DISRUPTIVE,
    description="k8s.drain that may also delete bare pods (force) or bypass "
    "PodDisruptionBudgets (disable_eviction).",
    dry_run=True,
)(drain)

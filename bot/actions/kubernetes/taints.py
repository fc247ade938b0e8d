"""Node taints and labels (change), as `kubectl taint` and `kubectl label` make them.

`spec.taints` is a list without a merge key, so any patch replaces all of it. Each taint
change therefore reads the node, edits the list and writes it back carrying the node's
resourceVersion: if anyone changed the node in between, the API answers 409 Conflict and
we read it again (a bounded number of times) rather than lose their change. The same
write keeps the `runbook-bot/taints` annotation, the bot's record of the taints it added
(key, effect, incident, who, why, when); untaint removes only those unless forced.
Labels are a map, so a merge patch touches only the keys given.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kubernetes.client.exceptions import ApiException
from pydantic import Field

from bot import retrying
from bot.actions import breaker, cluster
from bot.actions.context import ActionContext
from bot.actions.kubernetes import api, marks, nodes
from bot.actions.registry import Risk, action
from bot.actions.types import LabelKey, LabelValue, Reason, TaintEffect
from bot.errors import TemporaryActionError

TAINTS = marks.TAINTS
OUT_OF_SERVICE = marks.OUT_OF_SERVICE
ATTEMPTS = 5

Taint = dict[str, Any]
Plan = Callable[[Any], "Edit | None"]


@dataclass(frozen=True)
class Edit:
    """The node's next taint list and the bot's records of the taints it owns."""

    taints: list[Taint]
    records: list[dict[str, str]]


def taints_of(ctx: ActionContext, node: Any) -> list[Taint]:
    """The node's taints as the API writes them (camelCase dicts), ready to send back."""
    serialize = ctx.kube().sanitize_for_serialization
    return [serialize(taint) for taint in node.spec.taints or []]


def records_of(node: Any) -> list[dict[str, str]]:
    return marks.taint_records(node)


def describe(taint: Taint) -> str:
    value = f"={taint['value']}" if taint.get("value") else ""
    return f"{taint['key']}{value}:{taint['effect']}"


def _matches(item: Taint, key: str, effect: str | None) -> bool:
    return bool(item.get("key") == key and (effect is None or item.get("effect") == effect))


def _write(
    ctx: ActionContext, name: str, node: Any, plan: Plan, what: str
) -> tuple[Any, Edit | None]:
    """Write `plan(node)` with the node's resourceVersion; on 409 Conflict read the node
    again and plan again. Returns the node last read and the edit written (None: nothing
    to do)."""
    latest, tries = node, 0

    def write_once() -> tuple[Any, Edit | None]:
        nonlocal latest, tries
        tries += 1
        if tries > 1:
            ctx.progress(f"{name} changed while the bot edited it; reading it again")
            latest = api.read_node(ctx, name)
        edit = plan(latest)
        if edit is None:
            return latest, None
        records = json.dumps(edit.records, separators=(",", ":")) if edit.records else None
        body = {
            "metadata": {
                "resourceVersion": latest.metadata.resource_version,
                "annotations": {TAINTS: records},
            },
            "spec": {"taints": edit.taints or None},
        }
        try:
            cluster.call(
                what,
                api.core(ctx).patch_node,
                name,
                body,
                timeout=api.timeout(ctx),
                clock=ctx.clock,
                passthrough=[409],
                _content_type=api.MERGE_PATCH,
                **api.dry_run(ctx),
            )
        except ApiException as exc:
            raise _Conflict from exc
        return latest, edit

    try:
        return retrying.call(
            write_once,
            attempts=ATTEMPTS,
            retry_if=lambda exc: isinstance(exc, _Conflict),
            wait=retrying.immediately,  # kubectl too retries a conflict at once, re-reading
        )
    except _Conflict:
        raise TemporaryActionError(
            f"cannot {what}: the node changed {ATTEMPTS} times while the bot edited it; try again",
            delay=5,
        ) from None


class _Conflict(Exception):
    """The node's resourceVersion moved between the bot's read and its write (409)."""


class TaintParams(nodes.NodeParams):
    key: LabelKey = Field(description="the taint's key, e.g. runbook-bot/gpu-fault")
    value: LabelValue = Field("", description="the taint's value (may be empty)")
    effect: TaintEffect = Field(description="NoSchedule, PreferNoSchedule or NoExecute")
    reason: Reason = Field("runbook-bot", description="why, recorded on the node")


class TaintChange(nodes.NodeChange):
    taints: list[str] = Field(default_factory=list, description="the node's taints after")


def _done(
    ctx: ActionContext, node: str, summary: str, *, changed: bool, taints: list[Taint]
) -> TaintChange:
    shown = summary + (" (dry run)" if ctx.dry_run and changed else "")
    if changed:
        ctx.progress(shown)
    return TaintChange(
        ok=True,
        summary=shown,
        dry_run=ctx.dry_run,
        node=node,
        changed=changed,
        taints=[describe(t) for t in taints],
    )


@action(
    "k8s.taint",
    params=TaintParams,
    result=TaintChange,
    risk=Risk.CHANGE,
    description="Add (or re-value) a node taint like kubectl taint, recording it as the bot's.",
    dry_run=True,
)
def taint(ctx: ActionContext, params: TaintParams) -> TaintChange:
    wanted: Taint = {"key": params.key, "effect": params.effect}
    if params.value:
        wanted["value"] = params.value
    now = ctx.clock.now()
    if params.effect == "NoExecute":
        # tolerationSeconds count from here, as for the taints the node controller adds.
        wanted["timeAdded"] = now.strftime("%Y-%m-%dT%H:%M:%SZ")
    record = {
        "key": params.key,
        "effect": params.effect,
        "incident": ctx.incident or "",
        "by": ctx.actor,
        "reason": params.reason[:250],
        "at": now.isoformat().replace("+00:00", "Z"),
    }

    def plan(node: Any) -> Edit | None:
        taints = taints_of(ctx, node)
        records = records_of(node)
        index = next(
            (i for i, t in enumerate(taints) if _matches(t, params.key, params.effect)), None
        )
        if index is None:
            if params.effect in OUT_OF_SERVICE:
                breaker.check(ctx, params.node)
            # A record left by a taint someone else removed is replaced by this one.
            kept = [r for r in records if not _matches(r, params.key, params.effect)]
            return Edit([*taints, wanted], [*kept, record])
        if (taints[index].get("value") or "") == params.value:
            return None
        updated = {k: v for k, v in taints[index].items() if k != "value"}
        if params.value:
            updated["value"] = params.value
        taints[index] = updated
        return Edit(taints, records)

    first = api.read_node(ctx, params.node)
    # A taint that keeps pods off is counted by the breaker: its check (in `plan`) and the
    # write are held together, so no other worker counts or patches in between.
    gate = breaker.held(ctx) if params.effect in OUT_OF_SERVICE else contextlib.nullcontext()
    with gate:
        node, edit = _write(ctx, params.node, first, plan, f"taint {params.node}")
    if edit is None:
        present = next(t for t in taints_of(ctx, node) if _matches(t, params.key, params.effect))
        return _done(
            ctx,
            params.node,
            f"{params.node} already has taint {describe(present)}; nothing to do",
            changed=False,
            taints=taints_of(ctx, node),
        )
    return _done(
        ctx,
        params.node,
        f"{params.node} tainted {describe(wanted)}",
        changed=True,
        taints=edit.taints,
    )


class UntaintParams(nodes.NodeParams):
    key: LabelKey = Field(description="the key of the taint(s) to remove")
    effect: TaintEffect | None = Field(None, description="only this effect (default: any)")
    force: bool = Field(False, description="also remove taints the bot did not add")


@action(
    "k8s.untaint",
    params=UntaintParams,
    result=TaintChange,
    risk=Risk.CHANGE,
    description="Remove a node taint the bot added (any taint with force=true).",
    dry_run=True,
)
def untaint(ctx: ActionContext, params: UntaintParams) -> TaintChange:
    wanted = params.key + (f":{params.effect}" if params.effect else "")
    removed: list[str] = []
    forced: list[str] = []
    left: list[str] = []
    stale: list[str] = []

    def plan(node: Any) -> Edit | None:
        taints, records = taints_of(ctx, node), records_of(node)
        ours = {(r["key"], r["effect"]) for r in records}
        present = {(t["key"], t["effect"]) for t in taints}
        matching = [t for t in taints if _matches(t, params.key, params.effect)]
        going = [t for t in matching if params.force or (t["key"], t["effect"]) in ours]
        removed[:] = [describe(t) for t in going]
        forced[:] = [describe(t) for t in going if (t["key"], t["effect"]) not in ours]
        left[:] = [describe(t) for t in matching if t not in going]
        stale[:] = [
            f"{r['key']}:{r['effect']}"
            for r in records
            if _matches(r, params.key, params.effect) and (r["key"], r["effect"]) not in present
        ]
        if not going and not stale:
            return None
        return Edit(
            [t for t in taints if t not in going],
            [r for r in records if not _matches(r, params.key, params.effect)],
        )

    first = api.read_node(ctx, params.node)
    node, edit = _write(ctx, params.node, first, plan, f"untaint {params.node}")
    after = edit.taints if edit is not None else taints_of(ctx, node)
    if stale and not ctx.dry_run:
        ctx.record(
            "k8s.untainted_by_human",
            f"{params.node}: someone else already removed {', '.join(stale)}; the bot's record "
            "of it was dropped",
            {"node": params.node, "taints": stale},
        )
    refusal = (
        f"{', '.join(left)} on {params.node} was not added by the bot; leaving it "
        "(pass force=true to remove it anyway)"
    )
    if removed:
        summary = f"{params.node}: removed {', '.join(removed)}"
        if forced:
            summary += f" (forced: the bot had not added {', '.join(forced)})"
        if left:
            summary += f"; {refusal}"
        return _done(ctx, params.node, summary, changed=True, taints=after)
    if left:
        return TaintChange(
            ok=False,
            summary=refusal,
            dry_run=ctx.dry_run,
            node=params.node,
            changed=False,
            taints=[describe(t) for t in after],
        )
    summary = f"{params.node} has no taint {wanted}; nothing to do"
    return _done(ctx, params.node, summary, changed=False, taints=after)


class LabelParams(nodes.NodeParams):
    labels: dict[LabelKey, LabelValue | None] = Field(
        min_length=1, max_length=32, description="labels to set; a null value removes one"
    )


class LabelChange(nodes.NodeChange):
    applied: dict[str, str] = Field(default_factory=dict, description="labels set or changed")
    removed: list[str] = Field(default_factory=list)


@action(
    "k8s.label",
    params=LabelParams,
    result=LabelChange,
    risk=Risk.CHANGE,
    description="Set or remove node labels like kubectl label; unchanged labels are left alone.",
    dry_run=True,
)
def label(ctx: ActionContext, params: LabelParams) -> LabelChange:
    guarded = sorted(set(params.labels) & _selector_keys(ctx.settings.gpu_node_selector))
    if guarded:
        return LabelChange(
            ok=False,
            summary=f"refusing to change {', '.join(guarded)} on {params.node}: the circuit "
            "breaker counts GPU nodes by it (gpu_node_selector); change it with kubectl if "
            "you must",
            dry_run=ctx.dry_run,
            node=params.node,
            changed=False,
        )
    current = dict(api.read_node(ctx, params.node).metadata.labels or {})
    applied = {k: v for k, v in params.labels.items() if v is not None and current.get(k) != v}
    removed = sorted(k for k, v in params.labels.items() if v is None and k in current)
    if not applied and not removed:
        return LabelChange(
            ok=True,
            summary=f"{params.node} already has those labels; nothing to do",
            dry_run=ctx.dry_run,
            node=params.node,
            changed=False,
        )
    patch: dict[str, str | None] = {**applied, **dict.fromkeys(removed)}
    api.patch_node(ctx, params.node, {"metadata": {"labels": patch}}, f"label {params.node}")
    parts = [f"{k}={v}" for k, v in sorted(applied.items())] + [f"{k}-" for k in removed]
    summary = f"{params.node} labelled {' '.join(parts)}" + (" (dry run)" if ctx.dry_run else "")
    ctx.progress(summary)
    return LabelChange(
        ok=True,
        summary=summary,
        dry_run=ctx.dry_run,
        node=params.node,
        changed=True,
        applied=applied,
        removed=removed,
    )


def _selector_keys(selector: str) -> set[str]:
    """The label keys a selector like `a=b,!c,d in (e)` looks at."""
    flat = re.sub(r"\([^)]*\)", "", selector)  # drop `in (a,b)` value lists first
    found = (re.match(r"\s*!?\s*([^\s=!,]+)", part) for part in flat.split(","))
    return {match.group(1) for match in found if match}

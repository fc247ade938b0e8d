"""Power actions through the BMC: on (change); soft off, hard off and cycle (disruptive).

Power off and cycle refuse a node that is Ready and schedulable (cordon and drain it
first, or force=true). Then, as an experienced operator would with ipmitool: read the
power state and the tail of the SEL and write them to the incident log *before* touching
anything; ask once (a request whose answer was lost is retried only when repeating it is
harmless: on and off, never cycle); then poll until the BMC itself reports the new
state, within `bmc.power_timeout`. Some BMCs say "ok" long before the node is off, so the request's
answer is never taken as success. The state and SEL tail afterwards go in the result.
"""

from __future__ import annotations

import time
from dataclasses import asdict

from pydantic import Field

from bot.actions.bmc import calls
from bot.actions.bmc.protocol import Bmc, PowerOp, PowerState, SelEntry
from bot.actions.context import ActionContext, Reading
from bot.actions.kubernetes import api
from bot.actions.kubernetes.nodes import NodeParams
from bot.actions.registry import Risk, action
from bot.actions.types import Reason, Result
from bot.durations import format_duration
from bot.errors import ActionError, PermanentActionError, TemporaryActionError

SEL_TAIL = 5
POLL_FIRST, POLL_MAX = 0.2, 1.0
"""Seconds between power-state polls: at most one request a second, which BMCs bear."""
CYCLE_SETTLE = 10.0
"""A cycle never seen off counts as done once the node has stayed on this many seconds."""
WANTED = {
    "on": PowerState.ON,
    "off": PowerState.OFF,
    "soft_off": PowerState.OFF,
    "cycle": PowerState.ON,
}
VERB = {"on": "power on", "off": "power off", "soft_off": "soft power off", "cycle": "power cycle"}


class PowerParams(NodeParams):
    reason: Reason = Field("", description="why, for the incident log and the SEL reader")
    force: bool = Field(
        False, description="power off or cycle a node that is Ready and schedulable"
    )


class PowerResult(Result):
    node: str
    bmc: str
    operation: str
    before: str = Field(description="power state before the request")
    after: str = Field(description="power state the BMC reported last")
    changed: bool = Field(False, description="a request was sent (false: already there)")
    waited_seconds: float = 0.0
    sel_before: list[SelEntry] = Field(default_factory=list)
    sel_after: list[SelEntry] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)


def _register(name: str, op: PowerOp, risk: Risk, description: str) -> None:
    def run(ctx: ActionContext, params: PowerParams) -> PowerResult:
        return change_power(ctx, params, op)

    action(
        name,
        params=PowerParams,
        result=PowerResult,
        risk=risk,
        description=description,
        dry_run=True,
    )(run)


_register(
    "bmc.power_on",
    "on",
    Risk.CHANGE,
    "Power the node on through its BMC; succeeds when the BMC reports it on.",
)
_register(
    "bmc.power_soft_off",
    "soft_off",
    Risk.DISRUPTIVE,
    "Ask the OS to shut down (ACPI soft off); succeeds when the BMC reports the node off.",
)
_register(
    "bmc.power_off",
    "off",
    Risk.DISRUPTIVE,
    "Cut the node's power at once (hard off); succeeds when the BMC reports it off.",
)
_register(
    "bmc.power_cycle",
    "cycle",
    Risk.DISRUPTIVE,
    "Power the node off and on again (the fix for a GPU that fell off the bus, XID 79); "
    "succeeds when the BMC reports it on again.",
)


def change_power(ctx: ActionContext, params: PowerParams, op: PowerOp) -> PowerResult:
    if op != "on" and not params.force:
        _refuse_if_in_service(ctx, params.node, op)
    with calls.session(ctx, params.node) as bmc:
        before = calls.retried(ctx, bmc.power_state)
        notes: list[str] = []
        sel_before = _sel_tail(ctx, bmc, notes)  # copied into the result below
        result = PowerResult(
            ok=False,
            summary="",
            dry_run=ctx.dry_run,
            node=params.node,
            bmc=bmc.target.where(),
            operation=op,
            before=before.value,
            after=before.value,
            sel_before=sel_before,
            notes=notes,
        )
        ctx.record(
            "bmc.before",
            f"{params.node} is powered {before.value} before {VERB[op]}"
            + (f" ({params.reason})" if params.reason else ""),
            {
                "node": params.node,
                "bmc": bmc.target.where(),
                "operation": op,
                "power": before.value,
                "sel": [asdict(e) for e in sel_before],
            },
        )
        if _already(op, before):
            result.ok = True
            result.summary = f"{params.node} is already powered {before.value}; nothing to do"
            return result
        if op == "cycle" and before == PowerState.OFF:
            raise PermanentActionError(
                f"{params.node} is powered off, so there is nothing to cycle; use bmc.power_on"
            )
        if ctx.dry_run:
            result.ok = True
            result.summary = (
                f"would {VERB[op]} {params.node} (now {before.value}) through its "
                f"{bmc.target.where()} (dry run)"
            )
            return result
        ctx.progress(f"asking {bmc.target.where()} to {VERB[op]}")
        _request(ctx, bmc, op)
        result.changed = True
        started = time.monotonic()
        after, saw_off = _await(ctx, bmc, op, params.node, before)
        result.waited_seconds = round(time.monotonic() - started, 2)
        result.after = after.value
        result.sel_after = _sel_tail(ctx, bmc, result.notes)
    wanted = WANTED[op]
    waited = format_duration(ctx.settings.bmc.power_timeout)
    if after == wanted:
        result.ok = True
        result.summary = (
            f"{params.node} powered {after.value} ({VERB[op]} confirmed by the BMC after "
            f"{result.waited_seconds:.1f}s)"
        )
        if op == "cycle" and not saw_off:
            result.notes.append(
                "the BMC never reported the node off: the cycle was shorter than a poll"
            )
    elif op == "soft_off":
        result.summary = (
            f"{params.node} still reports {after.value} {waited} after the soft power off: the "
            "OS did not shut down; check the console, or use bmc.power_off (hard)"
        )
    else:
        result.summary = (
            f"{params.node}'s BMC accepted {VERB[op]} but still reports {after.value} after "
            f"{waited}; check bmc.sel_list and the BMC's web console"
        )
    ctx.record(
        "bmc.after",
        f"{params.node} is powered {after.value} after {VERB[op]}",
        {"node": params.node, "power": after.value, "sel": [asdict(e) for e in result.sel_after]},
    )
    return result


def _refuse_if_in_service(ctx: ActionContext, node: str, op: PowerOp) -> None:
    """A node the scheduler may still use is not powered off: its pods would die with no
    eviction, new ones would land on it meanwhile. Cordon and drain first (the runbooks
    do), or say force=true. A node that is NotReady (down, or lost its GPUs' driver) or
    cordoned may go."""
    found = api.read_node(ctx, node)
    conditions = (found.status and found.status.conditions) or []
    ready = any(c.type == "Ready" and c.status == "True" for c in conditions)
    if ready and not (found.spec and found.spec.unschedulable):
        raise PermanentActionError(
            f"refusing to {VERB[op]} {node}: it is Ready and schedulable, so its pods would "
            f"be killed without eviction; cordon and drain it first (k8s.drain node={node}), "
            "or pass force=true"
        )


def _said(state: PowerState) -> str:
    if state in (PowerState.ON, PowerState.OFF):
        return f"powered {state.value}"
    if state == PowerState.UNKNOWN:
        return "in a power state it does not say (busy switching)"
    return state.value  # powering on, powering off


def _already(op: PowerOp, state: PowerState) -> bool:
    return (op == "on" and state == PowerState.ON) or (
        op in ("off", "soft_off") and state == PowerState.OFF
    )


def _sel_tail(ctx: ActionContext, bmc: Bmc, notes: list[str]) -> list[SelEntry]:
    """The SEL's newest entries; a BMC that cannot show them must not stop a power action."""
    try:
        return calls.retried(ctx, lambda: bmc.sel(SEL_TAIL), attempts=1)
    except ActionError as exc:
        notes.append(f"SEL not read: {exc}")
        return []


def _request(ctx: ActionContext, bmc: Bmc, op: PowerOp) -> None:
    # On and off may be repeated safely; a repeated cycle would cycle twice.
    attempts = 1 if op == "cycle" else None
    try:
        calls.retried(ctx, lambda: bmc.request_power(op), attempts=attempts)
    except TemporaryActionError as exc:
        if op == "cycle":
            raise TemporaryActionError(
                f"{exc}; the cycle may or may not have started: check bmc.power_status and "
                "bmc.sel_list before asking again"
            ) from exc
        raise


def _await(
    ctx: ActionContext, bmc: Bmc, op: PowerOp, node: str, before: PowerState
) -> tuple[PowerState, bool]:
    """Poll the power state until the BMC reports what `op` asked for or time runs out,
    reporting each state it changes to (a cycle: off, then on). A cycle is done when the
    node is on again after having been seen off (or switching), or when it has stayed on
    for CYCLE_SETTLE seconds (some BMCs cycle faster than we poll)."""
    deadline = time.monotonic() + ctx.settings.bmc.power_timeout.total_seconds()
    wanted = WANTED[op]
    pause, saw_off, state = POLL_FIRST, False, PowerState.UNKNOWN
    shown = before
    on_since: float | None = None
    while True:
        ctx.checkpoint(f"polling {bmc.target.where()} for its power state")
        try:
            state = bmc.power_state()
        except TemporaryActionError:
            state = PowerState.UNKNOWN  # busy BMCs stop answering while they switch
        if state != shown:
            shown = state
            ctx.report(Reading(f"{node} is {_said(state)}, says its BMC", state=state.value))
        # Off, or on its way off or back on: the BMC shows the cycle under way.
        saw_off = saw_off or state in (
            PowerState.OFF,
            PowerState.POWERING_OFF,
            PowerState.POWERING_ON,
        )
        if state == wanted:
            on_since = time.monotonic() if on_since is None else on_since
            if op != "cycle" or saw_off or time.monotonic() - on_since >= CYCLE_SETTLE:
                return state, saw_off
        else:
            on_since = None
        left = deadline - time.monotonic()
        if left <= 0:
            return state, saw_off
        time.sleep(min(pause, left))
        pause = min(pause * 2, POLL_MAX)

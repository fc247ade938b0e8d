"""`k8s.wait_node_ready` (read): wait until a node is Ready again, e.g. after a power cycle.

A node's Ready condition outlives its kubelet: after the power goes, the API keeps saying
Ready=True until the node lifecycle controller misses the kubelet's lease for its grace
period (40 s by default) and marks it Unknown. A wait that stopped at the first Ready would
return at once after a power cycle, with the node still down. So the node must stay Ready
for `ready_for` (default 1 minute, longer than that grace period): a Ready left over from
before the power went cannot last that long, and a Ready that does comes from a kubelet
that is running now.

`until` waits on the action's clock for something another thread reports (an event), as
the drain waits for a PodDisruptionBudget to allow one more eviction.
"""

from __future__ import annotations

import threading
from datetime import datetime, timedelta
from typing import Annotated, Any

from pydantic import Field

from bot.actions.context import ActionContext
from bot.actions.kubernetes import api, nodes
from bot.actions.registry import Risk, action
from bot.actions.types import Result
from bot.clock import Clock, ScaledClock, SystemClock
from bot.durations import Duration, format_duration
from bot.errors import TemporaryActionError

POLL_SECONDS = 5.0
"""How often the node is read while waiting, on the action's clock."""
STILL_CLOCK_GRACE = 1.0
"""Real seconds `until` gives an event on a clock that moves only when told (a test's)."""
STILL_CLOCK_STEP = 1.0
"""How far `until` then moves such a clock at most, so what falls due on it happens."""

WaitTimeout = Annotated[Duration, Field(ge=timedelta(seconds=1), le=timedelta(hours=2))]
Hold = Annotated[Duration, Field(ge=timedelta(0), le=timedelta(minutes=30))]


class WaitReadyParams(nodes.NodeParams):
    timeout: WaitTimeout = Field(
        timedelta(minutes=20), description="give up after this long (1s..2h)"
    )
    ready_for: Hold = Field(
        timedelta(minutes=1),
        description="Ready without a break for this long (longer than the 40 s node grace "
        "period, so a Ready left from before a power cycle cannot pass)",
    )


class NodeReadyWait(Result):
    node: str
    ready: bool = Field(False, description="Ready held for ready_for within the timeout")
    condition: str = Field("Unknown", description="the Ready condition last read")
    reason: str = Field("", description="its reason, e.g. KubeletNotReady, NodeStatusUnknown")
    ready_since: datetime | None = Field(None, description="its lastTransitionTime")
    saw_not_ready: bool = Field(False, description="the node was seen not Ready meanwhile")
    waited_seconds: float = 0.0


@action(
    "k8s.wait_node_ready",
    params=WaitReadyParams,
    result=NodeReadyWait,
    risk=Risk.READ,
    description="Wait until a node is Ready and stays so for ready_for (after a power cycle "
    "or a crash); fails with the last condition when the timeout passes.",
    dry_run=True,
)
def wait_node_ready(ctx: ActionContext, params: WaitReadyParams) -> NodeReadyWait:
    clock = ctx.clock
    started = clock.monotonic()
    deadline = started + params.timeout.total_seconds()
    hold = params.ready_for.total_seconds()
    ready_from: float | None = None
    saw_not_ready = False
    while True:
        state = _read(ctx, params.node)
        now = clock.monotonic()
        if state is not None:
            condition, reason, since = state
            if condition == "True":
                ready_from = now if ready_from is None else ready_from
            else:
                ready_from, saw_not_ready = None, True
            if ctx.dry_run:
                return _result(
                    ctx, params, state, False, saw_not_ready, 0.0, _dry_summary(params, state)
                )
            if ready_from is not None and now - ready_from >= hold:
                waited = round(now - started, 2)
                summary = f"{params.node} is Ready (held {format_duration(params.ready_for)})"
                if saw_not_ready:
                    summary += f" after {waited:g}s"
                return _result(ctx, params, state, True, saw_not_ready, waited, summary)
            ctx.progress(
                f"{params.node}: Ready={condition}"
                + (f" ({reason})" if reason and condition != "True" else "")
                + f", waited {now - started:.0f}s of {format_duration(params.timeout)}"
            )
        if now >= deadline:
            last = state or ("Unknown", "the API did not answer", None)
            summary = (
                f"{params.node} is not Ready after {format_duration(params.timeout)}: "
                f"Ready={last[0]}" + (f" ({last[1]})" if last[1] else "")
            )
            if last[0] == "True":
                summary += f", but not yet for {format_duration(params.ready_for)}"
            summary += "; check its console through the BMC (bmc.sel_list, bmc.power_status)"
            waited = round(now - started, 2)
            return _result(ctx, params, last, False, saw_not_ready, waited, summary)
        clock.sleep(max(0.0, min(POLL_SECONDS, deadline - now)))


def _read(ctx: ActionContext, node: str) -> tuple[str, str, datetime | None] | None:
    """(status, reason, lastTransitionTime) of the Ready condition; None when the API is
    briefly unavailable (the wait goes on; a missing node still fails at once)."""
    try:
        found: Any = api.read_node(ctx, node)
    except TemporaryActionError:
        return None
    ready = next((c for c in found.status.conditions or [] if c.type == "Ready"), None)
    if ready is None:
        return ("Unknown", "no Ready condition", None)
    return (str(ready.status), str(ready.reason or ""), ready.last_transition_time)


def _dry_summary(params: WaitReadyParams, state: tuple[str, str, datetime | None]) -> str:
    return (
        f"{params.node} is Ready={state[0]} now; would wait up to "
        f"{format_duration(params.timeout)} for Ready held {format_duration(params.ready_for)}"
    )


def _result(
    ctx: ActionContext,
    params: WaitReadyParams,
    state: tuple[str, str, datetime | None],
    ready: bool,
    saw_not_ready: bool,
    waited: float,
    summary: str,
) -> NodeReadyWait:
    return NodeReadyWait(
        ok=ready or ctx.dry_run,
        summary=summary,
        dry_run=ctx.dry_run,
        node=params.node,
        ready=ready,
        condition=state[0],
        reason=state[1],
        ready_since=state[2],
        saw_not_ready=saw_not_ready,
        waited_seconds=waited,
    )


def until(clock: Clock, event: threading.Event, seconds: float) -> bool:
    """Wait until `event` is set or `seconds` pass on `clock`; True when it is set.

    The system clock and a scaled one run by themselves: the wait is `seconds` of theirs.
    A clock that moves only when told (a test's `FrozenClock`) stands still while another
    thread sets the event: the event gets `STILL_CLOCK_GRACE` real seconds, then the clock
    is moved as a sleep would, by at most `STILL_CLOCK_STEP`, and the caller waits again.
    """
    if seconds <= 0:
        return event.is_set()
    if isinstance(clock, SystemClock):
        return event.wait(seconds)
    if isinstance(clock, ScaledClock):
        return event.wait(seconds * clock.scale)
    if event.wait(STILL_CLOCK_GRACE):
        return True
    clock.sleep(min(seconds, STILL_CLOCK_STEP))
    return event.is_set()

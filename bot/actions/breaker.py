"""The circuit breaker (DESIGN invariant 6): a bound on how much of the GPU fleet the bot
takes out of service by itself.

Before cordon, drain or taint puts another GPU node out of service, `check` counts the
GPU nodes the bot currently holds out of service (its cordon, or its NoSchedule/NoExecute
taint); past max(1, fraction x GPU nodes), capped at
`breaker_max_nodes`, it refuses with the count and the nodes. An admin override lets the
action through and is recorded in the incident log.

A step over many nodes whose approval named its count (`ctx.allowance`: "cordon 32 nodes
of row/a") is bounded per domain and globally instead: the node must be one the approval
names; the bot never holds more of those nodes than the count; and the bot's total stays
within the global cap, min(`breaker_global_max_nodes`, max(1, `breaker_global_max_fraction`
x GPU nodes)). Past that cap only an admin override that names how many nodes it lets past
(`ctx.override_count`, at least the number past the cap) goes through, recorded with the
count.

The count and the patch that follows it are one step: `held` serialises them under the
context's `breaker_lock` (the database's, `bot.actions.breaker_lock`: PostgreSQL's advisory
lock, or on SQLite this process's lock and a file lock), so two workers cordoning at once
cannot both pass a limit of one. A cancelled run (its step timed out) gets no further.
"""

from __future__ import annotations

import contextlib
import math
import threading
from collections.abc import Iterator

from kubernetes import client

from bot.actions import cluster
from bot.actions.context import ActionContext, Allowance
from bot.actions.kubernetes import marks
from bot.errors import BreakerOpen, TemporaryActionError

PROCESS_LOCK = threading.Lock()
"""Held by the one thread of this process between a breaker count and its patch, where
no database lock serialises them (SQLite, or no database at hand)."""


@contextlib.contextmanager
def process_lock(wait: float) -> Iterator[None]:
    """`PROCESS_LOCK`, waited for at most `wait` seconds."""
    if not PROCESS_LOCK.acquire(timeout=wait):
        raise TemporaryActionError(
            f"another action of this process held the circuit breaker for more than "
            f"{wait:.0f} s; the step is tried again later",
            delay=10,
        )
    try:
        yield
    finally:
        PROCESS_LOCK.release()


@contextlib.contextmanager
def held(ctx: ActionContext) -> Iterator[None]:
    """Hold the breaker for a `check` and the patch after it: no other worker counts or
    patches meanwhile. The context's `breaker_lock` (the database's) when it has one,
    else (and for a dry run) this process's lock; the wait is bounded by the worker's
    database lock timeout."""
    ctx.checkpoint("the circuit breaker check")
    wait = ctx.settings.database_worker_lock_timeout.total_seconds()
    # A dry run takes nothing out of service: this process's lock is enough for it.
    across = ctx.breaker_lock is not None and not ctx.dry_run
    with ctx.breaker_lock() if across and ctx.breaker_lock else process_lock(wait):
        ctx.checkpoint("the circuit breaker check")
        yield


def limit(gpu_nodes: int, *, fraction: float, cap: int) -> int:
    return min(cap, max(1, math.floor(gpu_nodes * fraction)))


def check(ctx: ActionContext, node: str) -> None:
    """Refuse (BreakerOpen) when taking `node` out would pass the bound; else return.
    Call it, and make the patch, inside `held`."""
    ctx.checkpoint("the circuit breaker check")
    settings = ctx.settings
    api = client.CoreV1Api(ctx.kube())
    nodes = cluster.call(
        "list GPU nodes",
        api.list_node,
        label_selector=settings.gpu_node_selector,
        timeout=settings.kube_timeout.total_seconds(),
        clock=ctx.clock,
    ).items
    held = sorted(n.metadata.name for n in nodes if marks.held_by_bot(n))
    if ctx.allowance is not None:
        _outside(ctx.allowance, node)
    if node in held or not any(n.metadata.name == node for n in nodes):
        return  # already counted, or not a GPU node: no new capacity leaves
    if ctx.allowance is not None:
        _check_allowance(ctx, ctx.allowance, node, held, len(nodes))
        return
    allowed = limit(
        len(nodes), fraction=settings.breaker_max_fraction, cap=settings.breaker_max_nodes
    )
    if len(held) < allowed:
        return
    detail = (
        f"the bot already holds {len(held)} of {len(nodes)} GPU nodes out of service "
        f"({', '.join(held)}); the limit is {allowed}"
    )
    if ctx.admin_override:
        ctx.record(
            "breaker.override",
            f"circuit breaker overridden by {ctx.actor} for {node}: {detail}",
            {"node": node, "held": held, "limit": allowed, "gpu_nodes": len(nodes)},
        )
        return
    raise BreakerOpen(
        f"refusing to take {node} out of service: {detail}. Resolve one of those incidents "
        "and return its node to service, or have an admin override the breaker"
    )


def global_cap(ctx: ActionContext, gpu_nodes: int) -> int:
    settings = ctx.settings
    return limit(
        gpu_nodes,
        fraction=settings.breaker_global_max_fraction,
        cap=settings.breaker_global_max_nodes,
    )


def _where(allowance: Allowance) -> str:
    return f" of {allowance.domain}" if allowance.domain else ""


def _outside(allowance: Allowance, node: str) -> None:
    if node not in allowance.nodes:
        raise BreakerOpen(
            f"refusing to take {node} out of service: it is not one of the "
            f"{len(allowance.nodes)} nodes this approval names"
            + (f" ({allowance.domain})" if allowance.domain else "")
            + "; a node outside that list needs an approval of its own"
        )


def _check_allowance(
    ctx: ActionContext, allowance: Allowance, node: str, held: list[str], gpu_nodes: int
) -> None:
    """The per-domain and global bounds for `node`, one of the allowance's, not yet held."""
    mine = [n for n in held if n in allowance.nodes]
    if len(mine) >= allowance.count:
        raise BreakerOpen(
            f"refusing to take {node} out of service: the bot already holds {len(mine)} "
            f"of the nodes{_where(allowance)} this approval names, and it named "
            f"{allowance.count}; return one to service, or approve again naming more"
        )
    cap = global_cap(ctx, gpu_nodes)
    past = len(held) + 1 - cap
    if past <= 0:
        return
    # Naming this many lets the rest of the approval's nodes through, not just this one.
    needed = len(held) + len(allowance.nodes - set(held)) - cap
    detail = (
        f"the bot already holds {len(held)} of {gpu_nodes} GPU nodes out of service, "
        f"{len(mine)} of them of the {allowance.count}{_where(allowance)} this approval "
        f"names; the global cap is {cap}"
    )
    if not ctx.admin_override:
        raise BreakerOpen(
            f"refusing to take {node} out of service: {detail}. Return nodes to service, or "
            f"have an admin override the breaker naming {needed} node(s) past the cap"
        )
    if ctx.override_count is None or ctx.override_count < past:
        named = "no count" if ctx.override_count is None else f"{ctx.override_count}"
        raise BreakerOpen(
            f"refusing to take {node} out of service: {detail}, and the admin override "
            f"named {named}; {node} would be node {past} past the cap: override again "
            f"naming {needed} to let the rest of this approval's nodes through"
        )
    ctx.record(
        "breaker.override",
        f"circuit breaker's global cap overridden by {ctx.actor} for {node} "
        f"({past} of the {ctx.override_count} named past the cap): {detail}",
        {
            "node": node,
            "held": held,
            "limit": cap,
            "gpu_nodes": gpu_nodes,
            "override_count": ctx.override_count,
            "past": past,
            "domain": allowance.domain,
            "count": allowance.count,
        },
    )

"""The circuit breaker (DESIGN invariant 6): a bound on how much of the GPU fleet the bot
takes out of service by itself.

Before cordon, drain or taint puts another GPU node out of service, `check` counts the
GPU nodes the bot currently holds out of service (its cordon, or its NoSchedule/NoExecute
taint); past max(1, fraction x GPU nodes), capped at
`breaker_max_nodes`, it refuses with the count and the nodes. An admin override lets the
action through and is recorded in the incident log.
"""

from __future__ import annotations

import math

from kubernetes import client

from bot.actions import cluster
from bot.actions.context import ActionContext
from bot.actions.kubernetes import marks
from bot.errors import BreakerOpen


def limit(gpu_nodes: int, *, fraction: float, cap: int) -> int:
    return min(cap, max(1, math.floor(gpu_nodes * fraction)))


def check(ctx: ActionContext, node: str) -> None:
    """Refuse (BreakerOpen) when taking `node` out would pass the bound; else return."""
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
    if node in held or not any(n.metadata.name == node for n in nodes):
        return  # already counted, or not a GPU node: no new capacity leaves
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

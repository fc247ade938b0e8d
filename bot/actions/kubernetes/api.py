"""Small helpers every Kubernetes executor shares: typed API handles, patches, dry run."""

from __future__ import annotations

from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from bot.actions import cluster
from bot.actions.context import ActionContext
from bot.errors import PermanentActionError

MERGE_PATCH = "application/merge-patch+json"
"""The client (v37) labels every PATCH json-patch unless told otherwise; we always say."""


def core(ctx: ActionContext) -> client.CoreV1Api:
    return client.CoreV1Api(ctx.kube())


def timeout(ctx: ActionContext) -> float:
    return ctx.settings.kube_timeout.total_seconds()


def dry_run(ctx: ActionContext) -> dict[str, Any]:
    """The `dry_run` keyword for write calls: server-side `dryRun=All` on a dry run."""
    return {"dry_run": "All"} if ctx.dry_run else {}


def read_node(ctx: ActionContext, name: str) -> Any:
    try:
        return cluster.call(
            f"read node {name}",
            core(ctx).read_node,
            name,
            timeout=timeout(ctx),
            clock=ctx.clock,
            passthrough=[404],
        )
    except ApiException as exc:
        raise PermanentActionError(
            f"node {name} does not exist in the cluster; check the node name (kubectl get nodes)"
        ) from exc


def patch_node(
    ctx: ActionContext,
    name: str,
    body: dict[str, Any],
    what: str,
    *,
    passthrough: tuple[int, ...] = (),
) -> Any:
    """Merge-patch a node. Put `metadata.resourceVersion` in `body` and pass (409,) to be told,
    by `ApiException`, that someone changed the node since it was read."""
    return cluster.call(
        what,
        core(ctx).patch_node,
        name,
        body,
        timeout=timeout(ctx),
        clock=ctx.clock,
        passthrough=passthrough,
        _content_type=MERGE_PATCH,
        **dry_run(ctx),
    )

"""Volcano queues (change): close a queue so no new jobs start during a storage fault, and
open it again afterwards (the seed's plan four: "pause new job scheduling").

A Volcano Queue (`scheduling.volcano.sh/v1beta1`, cluster-scoped) keeps its state in
`status.state` (Open, Closing, Closed); the scheduler admits no new PodGroups into a
queue that is not Open, and jobs already running keep running. The bot writes the state
through the status subresource and marks the queue with who closed it, for which
incident and why; it reopens only a queue it closed itself unless forced.
"""

from __future__ import annotations

from typing import Any, Literal

from kubernetes import client
from kubernetes.client.exceptions import ApiException
from pydantic import Field

from bot.actions import cluster
from bot.actions.context import ActionContext
from bot.actions.kubernetes import api, marks
from bot.actions.registry import Risk, action
from bot.actions.types import ObjectName, Params, Reason, Result
from bot.errors import PermanentActionError

GROUP, VERSION, PLURAL = "scheduling.volcano.sh", "v1beta1", "queues"
CLOSED = marks.PREFIX + "closed"
"""Present (value "true") while the bot's close stands."""
MARKS = (marks.INCIDENT, marks.BY, marks.REASON, marks.AT, CLOSED)
STATES = {"open": "Open", "closed": "Closed"}


class QueueParams(Params):
    queue: ObjectName = Field(description="the Volcano queue's name")
    state: Literal["open", "closed"] = Field(description="open or closed")
    reason: Reason = Field("runbook-bot", description="why, recorded on the queue")
    force: bool = Field(False, description="also reopen a queue the bot did not close")


class QueueChange(Result):
    queue: str
    previous: str = Field(description="the state before: Open, Closing, Closed or Unknown")
    state: str = Field(description="the state after")
    changed: bool


def _objects(ctx: ActionContext) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(ctx.kube())


def _read(ctx: ActionContext, name: str) -> dict[str, Any]:
    try:
        found: dict[str, Any] = cluster.call(
            f"read Volcano queue {name}",
            _objects(ctx).get_cluster_custom_object,
            GROUP,
            VERSION,
            PLURAL,
            name,
            timeout=api.timeout(ctx),
            clock=ctx.clock,
            passthrough=[404],
        )
    except ApiException as exc:
        raise PermanentActionError(
            f"Volcano queue {name} does not exist (or Volcano is not installed); check the "
            "name (kubectl get queues)"
        ) from exc
    return found


@action(
    "volcano.queue_state",
    params=QueueParams,
    result=QueueChange,
    risk=Risk.CHANGE,
    description="Open or close a Volcano queue: a closed queue admits no new jobs.",
    dry_run=True,
)
def queue_state(ctx: ActionContext, params: QueueParams) -> QueueChange:
    queue = _read(ctx, params.queue)
    previous = str((queue.get("status") or {}).get("state") or "Unknown")
    target = STATES[params.state]
    notes = (queue.get("metadata") or {}).get("annotations") or {}
    ours = notes.get(CLOSED) == "true"

    def result(ok: bool, summary: str, *, changed: bool) -> QueueChange:
        return QueueChange(
            ok=ok,
            summary=summary,
            dry_run=ctx.dry_run,
            queue=params.queue,
            previous=previous,
            state=target if changed else previous,
            changed=changed,
        )

    # Closing is a close under way: running jobs finish, nothing new is admitted.
    if previous == target or (target == "Closed" and previous == "Closing"):
        return result(
            True, f"queue {params.queue} is already {previous}; nothing to do", changed=False
        )
    if target == "Open" and not ours and not params.force:
        return result(
            False,
            f"queue {params.queue} was closed by someone other than the bot; leaving it "
            f"{previous} (pass force=true to open it anyway)",
            changed=False,
        )
    cluster.call(
        f"set Volcano queue {params.queue} {target}",
        _objects(ctx).patch_cluster_custom_object_status,
        GROUP,
        VERSION,
        PLURAL,
        params.queue,
        {"status": {"state": target}},
        timeout=api.timeout(ctx),
        clock=ctx.clock,
        _content_type=api.MERGE_PATCH,
        **api.dry_run(ctx),
    )
    if target == "Closed":
        mark: dict[str, str | None] = {
            marks.INCIDENT: ctx.incident or "",
            marks.BY: ctx.actor,
            marks.REASON: params.reason[:250],
            marks.AT: ctx.clock.now().isoformat().replace("+00:00", "Z"),
            CLOSED: "true",
        }
    else:
        mark = dict.fromkeys(MARKS)
    cluster.call(
        f"mark Volcano queue {params.queue}",
        _objects(ctx).patch_cluster_custom_object,
        GROUP,
        VERSION,
        PLURAL,
        params.queue,
        {"metadata": {"annotations": mark}},
        timeout=api.timeout(ctx),
        clock=ctx.clock,
        _content_type=api.MERGE_PATCH,
        **api.dry_run(ctx),
    )
    forced = " (forced: the bot had not closed it)" if target == "Open" and not ours else ""
    summary = f"queue {params.queue}: {previous} -> {target}{forced}" + (
        " (dry run)" if ctx.dry_run else ""
    )
    ctx.progress(summary)
    return result(True, summary, changed=True)

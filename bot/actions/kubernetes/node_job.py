"""Run one command on one node (change): a short-lived Job pinned to that node.

Diagnostics such as `nvidia-smi` or `dcgmi diag -r 2` must run on the suspect node even
while it is cordoned. The Job's pod names the node in `spec.nodeName` (no scheduler, so a
cordon does not stop it), tolerates every taint, never restarts and is never retried.
The bot waits, within the timeout, for the pod to finish; keeps its exit code and the end
of its log; and always deletes the Job afterwards, its pod with it. ttlSecondsAfterFinished
is the backstop should that delete fail. The command is an argv list handed to the
container runtime: no shell is involved anywhere.
"""

from __future__ import annotations

import contextlib
import math
import re
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException
from pydantic import Field

from bot.actions import cluster
from bot.actions.context import ActionContext
from bot.actions.kubernetes import api, marks, nodes
from bot.actions.registry import Risk, action
from bot.actions.types import LABEL_VALUE, Argv, ImageRef, JobTimeout, LogBytes, Result
from bot.durations import format_duration
from bot.errors import ActionError, PermanentActionError, TemporaryActionError

JOB_LABEL = marks.PREFIX + "job"
INCIDENT_LABEL = marks.PREFIX + "incident"
TTL_SECONDS = 600
POLL_FIRST, POLL_MAX = 0.1, 0.5
LOG_READS = 3
DONE_PHASES = ("Succeeded", "Failed")


class NodeJobParams(nodes.NodeParams):
    command: Argv = Field(description='program and arguments, e.g. ["nvidia-smi", "-q"]')
    image: ImageRef | None = Field(None, description="image (default: node_job_image setting)")
    timeout: JobTimeout = Field(timedelta(minutes=2), description="how long to wait, 5s..30m")
    privileged: bool = Field(False, description="run the container privileged")
    host_pid: bool = Field(False, description="share the node's process namespace")
    host_network: bool = Field(
        False, description="use the node's network (reach daemons on the node's localhost)"
    )
    log_bytes: LogBytes = Field(16384, description="keep this many bytes of the log's end")


class NodeJobResult(Result):
    node: str
    job: str = Field("", description="namespace/name of the Job (deleted afterwards)")
    exit_code: int | None = None
    succeeded: bool = Field(False, description="the command ran and exited 0")
    log_tail: str = ""
    log_truncated: bool = False
    duration_seconds: float = 0.0


@dataclass(frozen=True)
class Run:
    """How the wait ended: an exit code and log, or `problem` saying what never happened."""

    exit_code: int | None = None
    log: str = ""
    truncated: bool = False
    problem: str | None = None


@action(
    "k8s.node_job",
    params=NodeJobParams,
    result=NodeJobResult,
    risk=Risk.CHANGE,
    description="Run a command (argv, no shell) on a node, even a cordoned one, as a Job "
    "pinned to it; ok means it ran, succeeded that it exited 0.",
    dry_run=True,
)
def node_job(ctx: ActionContext, params: NodeJobParams) -> NodeJobResult:
    api.read_node(ctx, params.node)  # a pod pinned to a missing node would wait forever
    namespace = ctx.settings.node_job_namespace
    shown = " ".join(params.command)[:200]
    batch = client.BatchV1Api(ctx.kube())
    try:
        # One attempt: a create retried after a lost answer would run the command twice.
        job = cluster.call(
            f"create a Job on {params.node}",
            batch.create_namespaced_job,
            namespace,
            manifest(ctx, params),
            timeout=api.timeout(ctx),
            clock=ctx.clock,
            attempts=1,
            passthrough=[404],
            **api.dry_run(ctx),
        )
    except ApiException as exc:
        raise PermanentActionError(
            f"cannot run `{shown}` on {params.node}: namespace {namespace} does not exist; "
            "create it (deploy/rbac.yaml expects it) or set node_job_namespace"
        ) from exc
    ref = f"{namespace}/{job.metadata.name}"
    if ctx.dry_run:
        return NodeJobResult(
            ok=True,
            summary=f"would run `{shown}` on {params.node} as Job {ref} (dry run)",
            dry_run=True,
            node=params.node,
            job=ref,
        )
    ctx.progress(f"Job {ref} runs `{shown}` on {params.node}")
    started = ctx.clock.monotonic()
    try:
        run = _await(ctx, job, params)
    finally:
        leftover = _delete(ctx, namespace, job.metadata.name)
    duration = round(ctx.clock.monotonic() - started, 3)
    if run.problem is not None:
        summary = run.problem
    else:
        summary = f"`{shown}` on {params.node} exited {run.exit_code} after {duration:.1f}s"
        last = next((line for line in reversed(run.log.splitlines()) if line.strip()), "")
        if run.exit_code != 0 and last:
            summary += f": {last.strip()[:200]}"
    ctx.progress(summary)
    return NodeJobResult(
        ok=run.problem is None,
        summary=summary + (f"; {leftover}" if leftover else ""),
        node=params.node,
        job=ref,
        exit_code=run.exit_code,
        succeeded=run.exit_code == 0,
        log_tail=run.log,
        log_truncated=run.truncated,
        duration_seconds=duration,
    )


def run_checked(
    ctx: ActionContext,
    node: str,
    argv: list[str],
    *,
    retry_delay: float,
    failed: str | None = None,
    missing: str | None = None,
    **options: Any,
) -> NodeJobResult:
    """Run `argv` on `node` through `node_job` (`options`: the other NodeJobParams) for an
    action that needs its output, and raise when there is none to read.

    A Job that did not run the command (no pod, a timeout) is TemporaryActionError:
    "`failed`: <the Job's summary>", `failed` by default "could not run <program> on
    <node>". With `missing` (what to do about it), exit 127, the program not being in the
    image, is PermanentActionError. Any other exit code is the caller's to judge.
    """
    run = node_job(ctx, NodeJobParams(node=node, command=argv, **options))
    if not run.ok:
        said = failed or f"could not run {argv[0]} on {node}"
        raise TemporaryActionError(f"{said}: {run.summary}", delay=retry_delay)
    if missing is not None and run.exit_code == 127:
        raise PermanentActionError(f"{argv[0]} is not in the node Job's image on {node}; {missing}")
    return run


def manifest(ctx: ActionContext, params: NodeJobParams) -> dict[str, Any]:
    labels = {JOB_LABEL: "true"}
    if ctx.incident and len(ctx.incident) <= 63 and re.fullmatch(LABEL_VALUE, ctx.incident):
        labels[INCIDENT_LABEL] = ctx.incident
    notes = {
        marks.INCIDENT: ctx.incident or "",
        marks.BY: ctx.actor,
        marks.AT: ctx.clock.now().isoformat().replace("+00:00", "Z"),
    }
    base = re.sub(r"[^a-z0-9-]", "-", params.node)[:40]  # node names may hold dots
    container = {
        "name": "run",
        "image": params.image or ctx.settings.node_job_image,
        "command": list(params.command),
        # See every GPU without allocating one: the GPUs under diagnosis are usually all
        # taken by the jobs running there, and a GPU request would keep this pod out.
        "env": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}],
        "securityContext": {"privileged": params.privileged},
    }
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "generateName": f"runbook-bot-{base}-",
            "labels": labels,
            "annotations": notes,
        },
        "spec": {
            "backoffLimit": 0,
            "activeDeadlineSeconds": max(1, math.ceil(params.timeout.total_seconds())),
            "ttlSecondsAfterFinished": TTL_SECONDS,
            "template": {
                "metadata": {"labels": labels, "annotations": notes},
                "spec": {
                    "nodeName": params.node,
                    "restartPolicy": "Never",
                    "hostPID": params.host_pid,
                    "hostNetwork": params.host_network,
                    "tolerations": [{"operator": "Exists"}],
                    "automountServiceAccountToken": False,
                    "enableServiceLinks": False,
                    "terminationGracePeriodSeconds": 5,
                    "containers": [container],
                },
            },
        },
    }


def _await(ctx: ActionContext, job: Any, params: NodeJobParams) -> Run:
    """Poll the Job's pod until it has finished or the timeout has passed."""
    namespace, name = job.metadata.namespace, job.metadata.name
    selector = ",".join(f"{k}={v}" for k, v in sorted(job.spec.selector.match_labels.items()))
    deadline = ctx.clock.monotonic() + params.timeout.total_seconds()
    pause = POLL_FIRST
    pod: Any = None
    while True:
        pods = cluster.call(
            f"list the pods of Job {namespace}/{name}",
            api.core(ctx).list_namespaced_pod,
            namespace,
            label_selector=selector,
            timeout=api.timeout(ctx),
            clock=ctx.clock,
        ).items
        done = [p for p in pods if p.status and p.status.phase in DONE_PHASES]
        pod = done[0] if done else (pods[0] if pods else None)
        if done:
            log, truncated = log_tail(ctx, pod, params.log_bytes)
            code = _exit_code(pod)
            if code is None:
                why = pod.status.reason or pod.status.message or "no container status"
                problem = f"pod {namespace}/{pod.metadata.name} failed without running: {why}"
                return Run(log=log, truncated=truncated, problem=problem)
            return Run(exit_code=code, log=log, truncated=truncated)
        left = deadline - ctx.clock.monotonic()
        if left <= 0:
            break
        ctx.clock.sleep(min(pause, left))
        pause = min(pause * 2, POLL_MAX)
    waited = f"timed out after {format_duration(params.timeout)} waiting for "
    if pod is None:
        problem = waited + (
            f"Job {namespace}/{name} to start a pod on {params.node}; kubectl describe job "
            f"-n {namespace} {name} shows why (quota, admission)"
        )
        return Run(problem=problem)
    problem = waited + f"pod {namespace}/{pod.metadata.name} on {params.node} ({_state(pod)})"
    log, truncated = "", False
    if pod.status and pod.status.phase == "Running":
        # The timeout is the news; a log that cannot be read adds nothing to it.
        with contextlib.suppress(ActionError, ApiException):
            log, truncated = log_tail(ctx, pod, params.log_bytes)
    return Run(log=log, truncated=truncated, problem=problem)


def log_tail(ctx: ActionContext, pod: Any, keep: int) -> tuple[str, bool]:
    """The last `keep` bytes of the pod's log, and whether anything before them was cut.

    `limitBytes` keeps the start of what the API sends, so we ask for the last `lines`
    lines under a cap of 4 x `keep` bytes. Every line holds at least one byte, so `keep`
    lines cover `keep` bytes; an answer that hits the cap means long lines, and we ask
    again for about `keep` bytes' worth of them (bounded: LOG_READS reads).
    """
    cap, lines, text = 4 * keep, keep, ""
    for attempt in range(LOG_READS):
        text = cluster.call(
            f"read the log of pod {pod.metadata.namespace}/{pod.metadata.name}",
            api.core(ctx).read_namespaced_pod_log,
            pod.metadata.name,
            pod.metadata.namespace,
            tail_lines=lines,
            limit_bytes=cap,
            timeout=api.timeout(ctx),
            clock=ctx.clock,
        )
        data = text.encode()
        if len(data) < cap:
            return data[-keep:].decode(errors="ignore"), attempt > 0 or len(data) > keep
        # Lines this long: about `keep` bytes' worth, and one more so the cut falls inside.
        lines = -(-text.count("\n") * keep // cap) + 1
    return text.encode()[-keep:].decode(errors="ignore"), True


def _exit_code(pod: Any) -> int | None:
    for status in pod.status.container_statuses or []:
        if status.state and status.state.terminated:
            return int(status.state.terminated.exit_code)
    return None


def _state(pod: Any) -> str:
    phase = (pod.status and pod.status.phase) or "Pending"
    for status in (pod.status and pod.status.container_statuses) or []:
        waiting = status.state and status.state.waiting
        if waiting and waiting.reason:
            return f"{phase}: {waiting.reason}"
    return phase


def _delete(ctx: ActionContext, namespace: str, name: str) -> str | None:
    """Delete the Job and, in the background, its pod. Never raises: it runs in `finally`.
    Returns what went wrong, for the summary."""
    try:
        cluster.call(
            f"delete Job {namespace}/{name}",
            client.BatchV1Api(ctx.kube()).delete_namespaced_job,
            name,
            namespace,
            propagation_policy="Background",
            timeout=api.timeout(ctx),
            clock=ctx.clock,
            passthrough=[404],
        )
    except ApiException:
        return None  # already gone
    except ActionError as exc:
        ctx.progress(f"Job {namespace}/{name} was not deleted: {exc}")
        return (
            f"Job {namespace}/{name} could not be deleted ({exc}); Kubernetes removes it "
            f"{TTL_SECONDS}s after it ends"
        )
    return None

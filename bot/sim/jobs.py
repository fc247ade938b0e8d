"""Jobs and run-to-completion pods: the Job controller and the scenario's command table.

A Job gets one pod at a time (up to `completions`, retrying failures up to
`backoffLimit`). A pinned `spec.template.spec.nodeName` is honored even on a cordoned
or tainted node, as the real API does for pods that skip the scheduler. When such a pod
(any pod whose restartPolicy is not Always) has run, its output and exit code come from,
in order: a scenario `commands` entry matching exactly (the node's, then the default) or
by first word for that node; what the node's hardware prints (`node_outputs`: nvidia-smi,
dcgmi, ibstat); a default first-word entry; else exit 127.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from bot.sim import node_outputs, pods
from bot.sim.controllers import owned, spawn
from bot.sim.kinds import JOB, POD
from bot.sim.scenario import Command

if TYPE_CHECKING:
    from bot.sim.cluster import Cluster

Obj = dict[str, Any]


def resolve(commands: list[Command], argv: list[str], node: str) -> Command:
    """The table entry for `argv` on `node`: exact before first-word, node before default."""
    if not argv:
        return Command(command=["<image entrypoint>"])
    found = _ahead_of_hardware(commands, argv, node) or next(
        (e for e in commands if e.node is None and _first_word(e, argv)), None
    )
    if found is not None:
        return found
    return Command(
        command=argv,
        exit_code=127,
        output=f"/bin/sh: 1: {argv[0]}: command not found\n",
        seconds=0.1,
    )


def _first_word(entry: Command, argv: list[str]) -> bool:
    return os.path.basename(entry.command[0]) == os.path.basename(argv[0])


def _ahead_of_hardware(commands: list[Command], argv: list[str], node: str) -> Command | None:
    """Entries that win over the node's hardware: exact ones, and this node's own."""
    for wanted_node in (node, None):
        for entry in commands:
            if entry.node == wanted_node and entry.command == argv:
                return entry
    return next((e for e in commands if e.node == node and _first_word(e, argv)), None)


def run_of(cluster: Cluster, pod: Obj) -> tuple[Command, Callable[[], None] | None]:
    """What the pod's command prints and exits with, and the change it makes to the
    machine when it ends (a GPU reset), if any."""
    argv, node = pods.command_line(pod), pod["spec"].get("nodeName", "")
    entry = _ahead_of_hardware(cluster.commands, argv, node) if argv else None
    if entry is None and argv:
        rendered = node_outputs.answer(cluster, node, argv)
        if rendered is not None:
            entry = Command(
                command=argv,
                exit_code=rendered.exit_code,
                output=rendered.output,
                seconds=rendered.seconds,
            )
            return entry, rendered.effect
    return entry or resolve(cluster.commands, argv, node), None


def _condition(kind: str, reason: str, message: str, now: str) -> Obj:
    return {
        "type": kind,
        "status": "True",
        "reason": reason,
        "message": message,
        "lastProbeTime": now,
        "lastTransitionTime": now,
    }


def is_finished(job: Obj) -> bool:
    return any(
        c.get("type") in ("Complete", "Failed") and c.get("status") == "True"
        for c in job.get("status", {}).get("conditions") or []
    )


def reconcile_jobs(cluster: Cluster, mono: float) -> None:
    for job in cluster.store.items(JOB):
        if is_finished(job) or job["spec"].get("suspend"):
            continue
        children = owned(cluster, job)
        succeeded = sum(1 for p in children if p["status"].get("phase") == "Succeeded")
        failed = sum(1 for p in children if p["status"].get("phase") == "Failed")
        active = [p for p in children if not pods.is_terminal(p) and not pods.is_deleting(p)]
        completions = int(job["spec"].get("completions") or 1)
        now = pods.stamp(cluster.now())
        status = dict(job.get("status") or {})
        status.setdefault("startTime", now)
        status.update(
            active=len(active),
            ready=sum(1 for p in active if pods.is_ready(p)),
            succeeded=succeeded,
            failed=failed,
            terminating=sum(1 for p in children if pods.is_deleting(p)),
            uncountedTerminatedPods={},
        )
        if succeeded >= completions:
            status["completionTime"] = now
            status["conditions"] = [
                _condition(
                    "SuccessCriteriaMet",
                    "CompletionsReached",
                    "Reached expected number of succeeded pods",
                    now,
                ),
                _condition(
                    "Complete",
                    "CompletionsReached",
                    "Reached expected number of succeeded pods",
                    now,
                ),
            ]
        elif failed > int(job["spec"].get("backoffLimit", 6)):
            message = "Job has reached the specified backoff limit"
            status["conditions"] = [
                _condition("FailureTarget", "BackoffLimitExceeded", message, now),
                _condition("Failed", "BackoffLimitExceeded", message, now),
            ]
        elif not active:
            _start_pod(cluster, job, mono)
            status["active"] = 1
        if status != job.get("status"):
            job["status"] = status
            cluster.store.write(JOB, job)


def _start_pod(cluster: Cluster, job: Obj, mono: float) -> None:
    ns = job["metadata"]["namespace"]
    name = cluster.store.generate_name(POD, ns, f"{job['metadata']['name']}-")
    tmpl = job["spec"]["template"]
    pod = pods.from_template(tmpl, name=name, namespace=ns, owner=job)
    node = tmpl.get("spec", {}).get("nodeName")
    if node:
        pod["spec"].pop("nodeName", None)
    spawn(cluster, pod, node, mono, instant=False)


def finish_runs(cluster: Cluster, mono: float) -> None:
    """Pods whose command has had its time: write the log and the exit code."""
    for uid, due in list(cluster.books.finish_at.items()):
        if due > mono:
            continue
        del cluster.books.finish_at[uid]
        pod = next((p for p in cluster.store.items(POD) if p["metadata"]["uid"] == uid), None)
        if pod is None or pods.is_terminal(pod):
            continue
        entry, effect = run_of(cluster, pod)
        if effect is not None:
            effect()
        cluster.books.logs[uid] = entry.output
        pods.mark_finished(pod, entry.exit_code, cluster.now())
        cluster.store.write(POD, pod)


def run_seconds(cluster: Cluster, pod: Obj) -> float:
    entry, _ = run_of(cluster, pod)
    return cluster.scaled(entry.seconds)

"""The kubelet thread: every ~50 ms, under the cluster lock, it moves time forward.

One tick, in order: node taints follow spec.unschedulable; garbage collection; pods whose
grace period has passed disappear (unless made stuck); controllers create replacements
and Job pods; the scheduler binds pending pods; bound pods become Running/Ready after
`startup_seconds`; run-to-completion pods finish with the command table's result;
statuses of Jobs, workloads and budgets are brought up to date. Every duration is
multiplied by the cluster's `time_scale`.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import TYPE_CHECKING

from bot.sim import controllers, hardware, jobs, pods
from bot.sim.kinds import POD

if TYPE_CHECKING:
    from bot.sim.cluster import Cluster

logger = logging.getLogger(__name__)


def finish_terminations(cluster: Cluster, mono: float) -> None:
    due = {uid for uid, at in cluster.books.delete_at.items() if at <= mono}
    due -= cluster.books.stuck
    if not due:
        return
    for pod in cluster.store.items(POD):
        meta = pod["metadata"]
        if meta["uid"] not in due:
            continue
        cluster.store.remove(POD, meta["namespace"], meta["name"])
        cluster.forget(pod)
        if pod["spec"].get("nodeName"):
            cluster.books.vacated[(meta["namespace"], meta["name"])] = pod["spec"]["nodeName"]
    for uid in due:
        cluster.books.delete_at.pop(uid, None)


def start_pods(cluster: Cluster, mono: float) -> None:
    """Bound Pending pods start once their startup time is up; Job pods begin running."""
    startup = cluster.scaled(cluster.scenario.startup_seconds)
    for pod in cluster.store.items(POD):
        uid = pod["metadata"]["uid"]
        if (
            not pod["spec"].get("nodeName")
            or pod["status"].get("phase") != "Pending"
            or pods.is_deleting(pod)
        ):
            continue
        if pod["status"].get("hostIP") is None:
            # Created through the API with nodeName set: the kubelet just noticed it.
            pods.mark_scheduled(
                pod,
                pod["spec"]["nodeName"],
                cluster.host_ip(pod["spec"]["nodeName"]),
                cluster.now(),
            )
            cluster.store.write(POD, pod)
        ready_at = cluster.books.ready_at.setdefault(uid, mono + startup)
        if ready_at > mono:
            continue
        del cluster.books.ready_at[uid]
        pods.mark_running(pod, cluster.pod_ip(), cluster.now())
        cluster.store.write(POD, pod)
        if pod["spec"].get("restartPolicy", "Always") != "Always":
            cluster.books.finish_at[uid] = mono + jobs.run_seconds(cluster, pod)


def tick(cluster: Cluster, mono: float | None = None) -> None:
    """One pass of every loop; tests may call it directly instead of running the thread."""
    mono = time.monotonic() if mono is None else mono
    with cluster.lock:
        hardware.advance(cluster, mono)
        controllers.sync_unschedulable_taints(cluster)
        controllers.collect_garbage(cluster, mono)
        finish_terminations(cluster, mono)
        controllers.reconcile_daemon_sets(cluster, mono)
        controllers.reconcile_mirror_pods(cluster, mono)
        controllers.reconcile_replica_sets(cluster, mono)
        controllers.reconcile_stateful_sets(cluster, mono)
        jobs.reconcile_jobs(cluster, mono)
        controllers.schedule_pending(cluster, mono)
        start_pods(cluster, mono)
        jobs.finish_runs(cluster, mono)
        jobs.reconcile_jobs(cluster, mono)
        controllers.update_statuses(cluster)


class Kubelet:
    """Runs `tick` on a daemon thread until `stop()`."""

    def __init__(self, cluster: Cluster, *, interval: float = 0.05) -> None:
        self.cluster = cluster
        self.interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="sim-kubelet", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                tick(self.cluster)
            except Exception:  # one bad tick must not stop the cluster
                logger.exception("simulated kubelet tick failed")
            self._stop.wait(self.interval)

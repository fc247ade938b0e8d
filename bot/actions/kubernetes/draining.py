"""Draining a node as kubectl's pkg/drain does: pick the pods, then evict them all at once.

`plan` runs kubectl's filters in kubectl's order (the first that decides, decides):
terminating past the skip-wait timeout, DaemonSet pods, mirror pods, emptyDir pods, pods
with no controller. `evict` evicts every planned pod at once and waits for each to leave:

    evict -> accepted -> read it every 1 s -> NotFound, new UID or other node: evicted
          -> 429 (a PodDisruptionBudget) -> wait until the budget's status allows one
             more disruption (watched: `budgets`) -> re-read -> evict again
          -> 404 (already gone), or 409 on our UID precondition (replaced): gone

Where kubectl retries a refused eviction every 5 s, we watch the budget: its
`disruptionsAllowed` turns positive when a replacement is Ready, and its waiting pods go
at that moment, as many as it allows. Only when no budget is named, or the budgets cannot
be watched, does a refused pod wait kubectl's 5 s (staggered) before it is tried again.

The caller's thread keeps each pod's next step on a timer heap and hands it (one API call)
to a bounded pool, so a pod waiting on a budget holds no worker and a hundred pods start
at once. Only the caller's thread reports. Every wait and deadline is on the action's clock
(`ctx.clock`), so a test moves time instead of waiting for it. A cancelled run
(`ctx.cancelled`: its step timed out, or the worker is stopping) stops waiting within
`CANCEL_CHECK`, also while every pod left is parked on a budget: the calls in flight
answer, and what is still there is listed as remaining.
"""

from __future__ import annotations

import functools
import heapq
import itertools
import threading
from collections import Counter
from collections.abc import Callable, Mapping
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final, NamedTuple

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from bot.actions import cluster
from bot.actions.context import ActionContext, Reading
from bot.actions.kubernetes import api, budgets, waits
from bot.errors import ActionError

RETRY_INTERVAL: Final = 5.0
"""kubectl's wait after a 429 before evicting that pod again (the API sends no Retry-After)."""
POLL_INTERVAL: Final = 1.0
"""kubectl's interval between reads of an evicted pod until it is gone."""
CANCEL_CHECK: Final = 1.0
"""The longest wait on a budget between two looks at `ctx.cancelled` (seconds of the
action's clock): a budget that never allows the pod must not hold a cancelled run."""
MAX_WORKERS: Final = 32
MIRROR: Final = "kubernetes.io/config.mirror"
FINISHED: Final = ("Succeeded", "Failed")


@dataclass(frozen=True)
class Rules:
    force: bool = False
    ignore_daemonsets: bool = True
    delete_emptydir_data: bool = True
    skip_wait_seconds: int = 0
    grace_period: int = -1
    use_eviction: bool = True


@dataclass(frozen=True)
class PodRef:
    namespace: str
    name: str
    uid: str
    labels: Mapping[str, str] = field(default_factory=dict, compare=False)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass
class Plan:
    evict: list[PodRef] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    refused: list[tuple[str, str]] = field(default_factory=list)
    emptydir: list[str] = field(default_factory=list)


@dataclass
class Drained:
    evicted: list[str] = field(default_factory=list)
    gone: list[tuple[str, str]] = field(default_factory=list)
    remaining: list[tuple[str, str]] = field(default_factory=list)
    timed_out: bool = False


class Verdict(NamedTuple):
    action: str  # evict | skip | refuse
    why: str
    emptydir: bool = False


def plan(ctx: ActionContext, node: str, selector: str | None, rules: Rules) -> Plan:
    """The node's pods, sorted into evict / skip / refuse by kubectl's filters."""
    pods = cluster.call(
        f"list pods on {node}",
        api.core(ctx).list_pod_for_all_namespaces,
        field_selector=f"spec.nodeName={node}",
        label_selector=selector,
        timeout=api.timeout(ctx),
        clock=ctx.clock,
    ).items
    apps = client.AppsV1Api(ctx.kube())

    @functools.cache
    def daemon_set_exists(namespace: str, name: str) -> bool:
        what = f"read DaemonSet {namespace}/{name}"
        return _found(ctx, what, apps.read_namespaced_daemon_set, name, namespace) is not None

    now = datetime.now(UTC)  # compared with the API server's timestamps, not a test clock
    found = Plan()
    for pod in pods:
        meta = pod.metadata
        ref = PodRef(meta.namespace, meta.name, meta.uid, dict(meta.labels or {}))
        verdict = classify(pod, rules, now, daemon_set_exists)
        if verdict.action == "evict":
            found.evict.append(ref)
            if verdict.emptydir:
                found.emptydir.append(ref.key)
        else:
            {"skip": found.skipped, "refuse": found.refused}[verdict.action].append(
                (ref.key, verdict.why)
            )
    return found


def classify(
    pod: Any, rules: Rules, now: datetime, daemon_set_exists: Callable[[str, str], bool]
) -> Verdict:
    """kubectl's filters in kubectl's order, the first that decides deciding."""
    meta, phase = pod.metadata, (pod.status.phase if pod.status else None)
    finished = phase in FINISHED
    deleting = meta.deletion_timestamp
    waited = (now - deleting).total_seconds() if deleting is not None else 0.0
    if rules.skip_wait_seconds > 0 and waited > rules.skip_wait_seconds:
        return Verdict("skip", f"terminating for more than {rules.skip_wait_seconds}s")
    owner = next((r for r in meta.owner_references or [] if r.controller), None)
    if owner is not None and owner.kind == "DaemonSet" and not finished:
        daemon_set = f"DaemonSet {meta.namespace}/{owner.name}"
        if not daemon_set_exists(meta.namespace, owner.name):
            if not rules.force:  # an orphan: kubectl treats it like a bare pod
                return Verdict("refuse", f"its {daemon_set} is gone; force=true deletes it")
        elif rules.ignore_daemonsets:
            return Verdict("skip", daemon_set)
        else:
            return Verdict("refuse", f"managed by {daemon_set} (ignore_daemonsets=false)")
    if MIRROR in (meta.annotations or {}):
        return Verdict("skip", "mirror pod of a static pod (the kubelet owns it)")
    emptydir = not finished and any(v.empty_dir is not None for v in pod.spec.volumes or [])
    if emptydir and not rules.delete_emptydir_data:
        return Verdict("refuse", "uses emptyDir data (delete_emptydir_data=false)")
    if finished or owner is not None or rules.force:  # an orphan got here only with force
        return Verdict("evict", "", emptydir)
    return Verdict(
        "refuse", "no controller would recreate it; k8s.drain_unsafe with force=true deletes it"
    )


def _found(ctx: ActionContext, what: str, fn: Callable[..., Any], *args: Any) -> Any:
    """`fn(*args)`, or None when the API answers 404 Not Found."""
    try:
        return cluster.call(
            what, fn, *args, timeout=api.timeout(ctx), clock=ctx.clock, passthrough=[404]
        )
    except ApiException:
        return None


@dataclass
class _Pod:
    ref: PodRef
    waiting: bool = False  # accepted; now read until it is gone
    attempts: int = 0
    blocked_by: str = ""
    accepted_at: float = 0.0
    outcome: str = ""  # evicted | gone | failed, once settled
    why: str = ""
    parked_on: str = ""  # the budget ("ns/name") it waits to allow it

    def remains(self, now: float) -> str:
        if self.outcome:  # failed
            return self.why
        if self.waiting:
            late = now - self.accepted_at
            return f"evicted {late:.0f}s ago, still terminating" + (self.why and f" ({self.why})")
        times = "once" if self.attempts == 1 else f"{self.attempts} times"
        return f"eviction refused {times}: {self.blocked_by}" if self.attempts else "not evicted"


class _Answer(NamedTuple):
    outcome: str  # accepted | blocked | waiting | evicted | gone | failed
    why: str = ""
    budget: str = ""  # of a 429: the budgets that refused
    keys: tuple[str, ...] = ()  # ... as "ns/name"


def evict(
    ctx: ActionContext, refs: list[PodRef], *, node: str, rules: Rules, deadline: float
) -> Drained:
    """Evict (or delete) every pod at once and wait for each to leave, until `deadline`."""
    clock = ctx.clock
    calls = _Calls(ctx, node, rules)
    pods = [_Pod(ref) for ref in refs]
    order = itertools.count()
    timers = [(0.0, next(order), pod) for pod in pods]
    running: dict[Future[_Answer], _Pod] = {}
    shown, refusals = ("", 0.0), Counter[str]()
    watch = budgets.BudgetWatch[_Pod](ctx)

    def settle(done: set[Future[_Answer]]) -> None:
        for future in done:
            pod = running.pop(future)
            now = clock.monotonic()
            answer = future.result()
            if _park(pod, answer, ctx.dry_run, watch):
                continue
            delay = _apply(pod, answer, now, ctx.dry_run, refusals)
            if delay is not None:
                heapq.heappush(timers, (now + delay, next(order), pod))

    def release() -> None:
        watch.changed.clear()  # before reading: a status that comes later wakes the wait
        for pod in watch.due():
            pod.parked_on = ""
            heapq.heappush(timers, (clock.monotonic(), next(order), pod))

    # More threads than pooled connections would open and drop a connection per call; a
    # budget's watch, if one is needed, holds one of them.
    pooled = getattr(getattr(ctx.kube(), "configuration", None), "connection_pool_maxsize", 0)
    workers = max(1, min(MAX_WORKERS, len(pods), (pooled - 1) if pooled else MAX_WORKERS))
    try:
        with ThreadPoolExecutor(workers, thread_name_prefix="drain") as pool:
            while (timers or running or watch.waiting()) and clock.monotonic() < deadline:
                if ctx.cancelled.is_set():
                    break  # nobody waits any more (the step timed out, the worker stops)
                release()
                now = clock.monotonic()
                while timers and timers[0][0] <= now:
                    pod = heapq.heappop(timers)[2]
                    running[pool.submit(calls.step, pod.ref, pod.waiting, pod.attempts)] = pod
                pause = max(0.0, min(timers[0][0] if timers else deadline, deadline) - now)
                if running:
                    # The calls in flight answer within the API timeout; a test clock stands
                    # still meanwhile, so its timers fall due only once they have answered.
                    settle(wait(running, timeout=pause, return_when=FIRST_COMPLETED).done)
                elif watch.waiting():
                    # A budget's status, or a timer; a cancelled run is looked at each second.
                    waits.until(clock, watch.changed, min(pause, CANCEL_CHECK))
                else:
                    clock.sleep(pause)
                shown = _report(ctx, pods, shown)
            # Past the deadline, calls already sent still answer (each within the API
            # timeout), so the result says what really happened to those pods.
            settle(wait(running).done)
    finally:
        watch.close()
    drained = Drained(timed_out=any(not pod.outcome for pod in pods))
    for pod in pods:
        if pod.outcome == "evicted":
            drained.evicted.append(pod.ref.key)
        elif pod.outcome == "gone":
            drained.gone.append((pod.ref.key, pod.why))
        else:
            drained.remaining.append((pod.ref.key, _remains(pod, clock.monotonic(), watch)))
    return drained


def _park(pod: _Pod, answer: _Answer, dry_run: bool, watch: budgets.BudgetWatch[_Pod]) -> bool:
    """A refused pod whose one budget is known waits for that budget's status (True);
    otherwise (False) `_apply` schedules its retry."""
    if answer.outcome != "blocked" or dry_run or len(answer.keys) != 1:
        return False
    if not watch.park(pod, answer.keys[0]):
        return False
    pod.attempts += 1
    pod.blocked_by, pod.parked_on = answer.why, answer.keys[0]
    return True


def _remains(pod: _Pod, now: float, watch: budgets.BudgetWatch[_Pod]) -> str:
    why = pod.remains(now)
    status = watch.status(pod.parked_on) if pod.parked_on else None
    if status is None:
        return why
    return f"{why}; PDB {pod.parked_on} never allowed it meanwhile ({status.describe()})"


def _apply(
    pod: _Pod, answer: _Answer, now: float, dry_run: bool, refusals: Counter[str]
) -> float | None:
    """Move one pod on by a step's answer, come at `now` (the clock's monotonic time): the
    delay until its next step, or None."""
    if answer.outcome == "accepted" and not dry_run:
        pod.waiting, pod.blocked_by, pod.accepted_at = True, "", now
        return POLL_INTERVAL  # kubectl reads at once too, but the pod is only just terminating
    if answer.outcome == "blocked":
        pod.attempts += 1
        pod.blocked_by = answer.why
        if dry_run:
            pod.outcome, pod.why = "failed", f"would wait: {answer.why}"
            return None
        if pod.attempts > 1:
            return RETRY_INTERVAL
        # Pods one budget refuses would retry in lockstep every 5 s while its free slot waits
        # for that round: golden-ratio offsets spread their cycles; each still waits >= 5 s.
        refusals[answer.budget] += 1
        return RETRY_INTERVAL * (1 + (refusals[answer.budget] - 1) * 0.618034 % 1.0)
    if answer.outcome == "waiting":
        pod.why = answer.why
        return POLL_INTERVAL
    pod.outcome = "evicted" if answer.outcome == "accepted" else answer.outcome
    pod.why = answer.why
    return None


def _report(ctx: ActionContext, pods: list[_Pod], shown: tuple[str, float]) -> tuple[str, float]:
    """Say how far the drain is: what it waits on at once, a new count at most each second
    (pods leave in bursts) unless it is the last."""
    out = sum(1 for pod in pods if pod.outcome in ("evicted", "gone"))
    blocked = [pod for pod in pods if not pod.outcome and pod.blocked_by]
    more = f" (and {len(blocked) - 1} more)" if len(blocked) > 1 else ""
    waiting = f", waiting on {blocked[0].ref.key}: {blocked[0].blocked_by}{more}" if blocked else ""
    text = f"{out}/{len(pods)} evicted" + (" (dry run)" if ctx.dry_run else "") + waiting
    now, (last, at) = ctx.clock.monotonic(), shown
    if text == last or (last.endswith(waiting) and now - at < 1.0 and out < len(pods)):
        return shown
    ctx.report(Reading(text, done=out, total=len(pods), unit="pods"))
    return text, now


@dataclass
class _Calls:
    """The API calls of one drain. They run on worker threads and only read and answer."""

    ctx: ActionContext
    node: str
    rules: Rules
    listed: dict[str, list[Any]] = field(default_factory=dict)  # budgets, by namespace
    lock: threading.Lock = field(default_factory=threading.Lock)

    def step(self, ref: PodRef, waiting: bool, attempts: int) -> _Answer:
        try:
            if waiting:
                return self.check(ref)
            moved = self.moved(ref) if attempts else ""  # kubectl re-reads before a retry
            return _Answer("gone", f"{moved} while waiting") if moved else self.evict(ref)
        except ActionError as exc:
            return _Answer("failed", str(exc))

    def read(self, ref: PodRef) -> Any:
        what, name = f"read pod {ref.key}", ref.name
        return _found(self.ctx, what, api.core(self.ctx).read_namespaced_pod, name, ref.namespace)

    def moved(self, ref: PodRef, pod: Any = None) -> str:
        """Why the pod we listed is no longer on this node, or "" while it still is."""
        pod = pod if pod is not None else self.read(ref)
        if pod is None:
            return "deleted"
        if pod.metadata.uid != ref.uid or pod.spec.node_name != self.node:
            return f"replaced by a new pod of that name on {pod.spec.node_name or 'no node yet'}"
        return ""

    def evict(self, ref: PodRef) -> _Answer:
        grace = self.rules.grace_period if self.rules.grace_period >= 0 else None
        delete = client.V1DeleteOptions(
            grace_period_seconds=grace, preconditions=client.V1Preconditions(uid=ref.uid)
        )
        verb, call, body = "delete", api.core(self.ctx).delete_namespaced_pod, delete
        if self.rules.use_eviction:
            meta = client.V1ObjectMeta(name=ref.name, namespace=ref.namespace)
            verb, call = "evict", api.core(self.ctx).create_namespaced_pod_eviction
            body = client.V1Eviction(metadata=meta, delete_options=delete)
        options = {"body": body, "passthrough": [404, 409, 429], **api.dry_run(self.ctx)}
        try:
            what, timeout = f"{verb} pod {ref.key}", api.timeout(self.ctx)
            cluster.call(
                what,
                call,
                ref.name,
                ref.namespace,
                timeout=timeout,
                clock=self.ctx.clock,
                **options,
            )
        except ApiException as exc:
            if exc.status == 404:
                return _Answer("gone", "already gone")
            if exc.status == 429:
                keys, cause = self.budget_keys(ref), budgets.cause(exc)
                named = f"PDB {', '.join(keys)}" if keys else ""
                why = f"{named} ({cause})" if named else cause
                return _Answer("blocked", why, named, tuple(keys))
            moved = self.moved(ref)  # 409: our UID precondition failed
            return _Answer("gone", moved) if moved else _Answer("failed", cluster.reason(exc))
        return _Answer("accepted")

    def budget_keys(self, ref: PodRef) -> list[str]:
        """ "ns/name" of each PodDisruptionBudget selecting the pod."""
        try:
            with self.lock:
                if ref.namespace not in self.listed:
                    self.listed[ref.namespace] = cluster.call(
                        f"list PodDisruptionBudgets in {ref.namespace}",
                        client.PolicyV1Api(self.ctx.kube()).list_namespaced_pod_disruption_budget,
                        ref.namespace,
                        timeout=api.timeout(self.ctx),
                        clock=self.ctx.clock,
                    ).items
                found = self.listed[ref.namespace]
        except ActionError:
            return []  # the API's own message still explains the 429
        return [
            f"{ref.namespace}/{b.metadata.name}"
            for b in found
            if b.spec is not None and budgets.selects(b.spec.selector, ref.labels)
        ]

    def check(self, ref: PodRef) -> _Answer:
        pod = self.read(ref)
        moved = self.moved(ref, pod) if pod is not None else "deleted"
        if moved:
            return _Answer("evicted", moved)
        deleting = pod.metadata.deletion_timestamp
        waited = (datetime.now(UTC) - deleting).total_seconds() if deleting else 0.0
        if 0 < self.rules.skip_wait_seconds < waited:
            return _Answer("gone", f"terminating over {self.rules.skip_wait_seconds}s; skipped")
        return _Answer("waiting", "" if deleting is None else f"deletion due {deleting}")

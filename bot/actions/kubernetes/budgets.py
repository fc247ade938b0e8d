"""The PodDisruptionBudgets a drain waits on, kept current by a watch, so a pod an eviction
refused (429) is evicted again the moment its budget allows one more disruption.

    429 naming PDB ns/b -> park the pod on ns/b, noting the budget's status as last seen
    watch event: ns/b's status changed, disruptionsAllowed = k > 0
        -> `due` hands back up to k pods parked on ns/b (first parked, first out)
    the watch cannot run (RBAC without `watch`, an API error) -> `broken`: the drain
        retries on kubectl's fixed schedule instead

One `BudgetWatch` per drain; a thread per namespace streams `?watch=true` on its budgets
(timeoutSeconds bounded, resumed from the last resourceVersion, relisted after 410 Gone)
and sets `changed` on every event. The threads wait in real time only: they never touch
the action's clock, which belongs to the drain's own thread. `close` shuts their streams.

Also here: which budgets select a pod (`selects`, a LabelSelector as policy/v1 reads it)
and what a 429 says about its budget (`cause`: "needs 3 healthy pods, has 3").
"""

from __future__ import annotations

import json
import logging
import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Generic, TypeVar

from kubernetes import client
from kubernetes.client.exceptions import ApiException
from kubernetes.watch.watch import iter_resp_lines

from bot.actions import cluster
from bot.actions.context import ActionContext
from bot.actions.kubernetes import api
from bot.errors import ActionCancelled

logger = logging.getLogger(__name__)
T = TypeVar("T")

WATCH_SECONDS: Final = 60
"""How long one watch request lasts before it is resumed (the server's timeoutSeconds)."""
RECONNECT_SECONDS: Final = 1.0
"""Real seconds between a watch stream that failed and the next."""
_NEEDS = re.compile(r"needs (\d+) healthy pods and has (\d+)")


@dataclass(frozen=True)
class Status:
    """A budget's status as the disruption controller last wrote it."""

    version: str
    allowed: int
    current: int
    desired: int

    def describe(self) -> str:
        return (
            f"disruptionsAllowed {self.allowed}: {self.current} healthy pods, {self.desired} needed"
        )


@dataclass
class _Parked(Generic[T]):
    item: T
    seen: str | None  # the budget's status version when the eviction was refused


@dataclass
class BudgetWatch(Generic[T]):
    """The budgets one drain waits on, and the items (pods) parked on each."""

    ctx: ActionContext
    changed: threading.Event = field(default_factory=threading.Event)
    broken: str = ""  # why the watch cannot run; then nothing is parked
    _statuses: dict[str, Status] = field(default_factory=dict)
    _parked: dict[str, list[_Parked[T]]] = field(default_factory=dict)
    _spent: dict[str, tuple[str, int]] = field(default_factory=dict)
    _streams: dict[str, Any] = field(default_factory=dict)
    _threads: dict[str, threading.Thread] = field(default_factory=dict)
    _stop: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def park(self, item: T, key: str) -> bool:
        """Wait for budget `key` ("ns/name") to allow a disruption before `item` is tried
        again; False when the watch cannot run (the caller retries on its own schedule)."""
        namespace = key.split("/", 1)[0]
        with self._lock:
            if self.broken:
                return False
            if namespace not in self._threads:
                thread = threading.Thread(
                    target=self._run, args=(namespace,), name=f"pdb-watch-{namespace}", daemon=True
                )
                self._threads[namespace] = thread
                thread.start()
            seen = self._statuses.get(key)
            self._parked.setdefault(key, []).append(_Parked(item, seen.version if seen else None))
        return True

    def due(self) -> list[T]:
        """The parked items whose budget now allows them, at most as many per budget as it
        allows, each status version spent once; a broken watch hands back all of them."""
        out: list[T] = []
        with self._lock:
            for key, parked in self._parked.items():
                status = self._statuses.get(key)
                if self.broken:
                    out += [p.item for p in parked]
                    parked.clear()
                    continue
                if status is None or status.allowed <= 0:
                    continue
                version, used = self._spent.get(key, (status.version, 0))
                if version != status.version:
                    used = 0
                for entry in list(parked):
                    if used >= status.allowed:
                        break
                    if entry.seen == status.version:
                        continue  # refused at this very status: wait for the next one
                    parked.remove(entry)
                    out.append(entry.item)
                    used += 1
                self._spent[key] = (status.version, used)
        return out

    def waiting(self) -> bool:
        with self._lock:
            return any(self._parked.values())

    def status(self, key: str) -> Status | None:
        with self._lock:
            return self._statuses.get(key)

    def close(self) -> None:
        self._stop.set()
        with self._lock:
            streams = list(self._streams.values())
        for stream in streams:
            try:
                stream.shutdown()  # unblocks the thread's read at once
            except Exception:  # already closed: nothing to stop
                logger.debug("PDB watch stream already closed", exc_info=True)

    def _run(self, namespace: str) -> None:
        version: str | None = None
        while not self._stop.is_set():
            try:
                resumed, version = version, self._stream(namespace, version)
                if version != resumed:
                    continue  # the server ended it (timeoutSeconds): go on where it stopped
                # A stream that brought nothing waits a moment: a server ending streams
                # at once (shutting down) is not asked again in a tight loop.
            except ApiException as exc:
                if exc.status == 410:
                    version = None  # history gone: list again from now
                    continue
                if exc.status in (401, 403, 404):
                    self._give_up(namespace, f"watching PodDisruptionBudgets: {exc.reason}")
                    return
                logger.info("PDB watch in %s failed (%s); resuming", namespace, exc.status)
            except ActionCancelled:
                return  # the run was cancelled: no more calls on its behalf
            except Exception as exc:  # the stream broke (or was shut by `close`)
                if self._stop.is_set():
                    return
                logger.info("PDB watch in %s broke (%s); resuming", namespace, exc)
            self._stop.wait(RECONNECT_SECONDS)

    def _stream(self, namespace: str, version: str | None) -> str | None:
        policy = client.PolicyV1Api(self.ctx.kube())
        response = policy.list_namespaced_pod_disruption_budget(
            namespace,
            watch=True,
            resource_version=version,
            allow_watch_bookmarks=False,
            timeout_seconds=WATCH_SECONDS,
            _preload_content=False,
            _request_timeout=(api.timeout(self.ctx), WATCH_SECONDS + api.timeout(self.ctx)),
        )
        with self._lock:
            self._streams[namespace] = response
        try:
            if self._stop.is_set():
                return version
            for line in iter_resp_lines(response):
                event = json.loads(line)
                if event.get("type") == "ERROR":
                    body = event.get("object") or {}
                    raise ApiException(status=body.get("code"), reason=body.get("message"))
                version = self._apply(namespace, event) or version
        finally:
            with self._lock:
                self._streams.pop(namespace, None)
            response.release_conn()
        return version

    def _apply(self, namespace: str, event: dict[str, Any]) -> str | None:
        obj = event.get("object") or {}
        meta, status = obj.get("metadata") or {}, obj.get("status") or {}
        key, version = f"{namespace}/{meta.get('name')}", meta.get("resourceVersion")
        with self._lock:
            if event.get("type") == "DELETED":
                # No budget left to wait on: let its pods be tried at once.
                self._statuses[key] = Status(f"deleted-{version}", 1 << 30, 0, 0)
            else:
                self._statuses[key] = Status(
                    str(version),
                    int(status.get("disruptionsAllowed") or 0),
                    int(status.get("currentHealthy") or 0),
                    int(status.get("desiredHealthy") or 0),
                )
        self.changed.set()
        return str(version) if version else None

    def _give_up(self, namespace: str, why: str) -> None:
        broken = f"cannot watch PodDisruptionBudgets in {namespace} ({why})"
        with self._lock:
            self.broken = broken
        logger.warning(
            "%s; evictions a budget refuses are retried every 5 s instead; grant the bot "
            "watch on poddisruptionbudgets (deploy/rbac.yaml)",
            broken,
        )
        self.changed.set()


def cause(exc: ApiException) -> str:
    """ "needs 3 healthy pods, has 3" from the 429's DisruptionBudget cause, else its message."""
    try:
        body = json.loads(exc.body or "{}")
        causes = (body.get("details") or {}).get("causes") or []
        found = next(m for c in causes if (m := _NEEDS.search(str(c.get("message")))))
    except (TypeError, ValueError, AttributeError, StopIteration):
        return cluster.reason(exc)
    return f"needs {found[1]} healthy pods, has {found[2]}"


def selects(selector: Any, labels: Mapping[str, str]) -> bool:
    """A LabelSelector against pod labels; an empty selector selects every pod, None none."""
    if selector is None:
        return False
    terms = [(key, "In", [value]) for key, value in (selector.match_labels or {}).items()]
    terms += [(t.key, t.operator, t.values or []) for t in selector.match_expressions or []]
    return all(_holds(labels, *term) for term in terms)


def _holds(labels: Mapping[str, str], key: str, operator: str, values: list[str]) -> bool:
    matched, present = key in labels and labels[key] in values, key in labels
    known = {"In": matched, "NotIn": not matched, "Exists": present, "DoesNotExist": not present}
    return known.get(operator, False)

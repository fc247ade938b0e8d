"""The live topology: every node's labels, listed from the Kubernetes API and kept current
by a watch, with a bounded staleness.

`NodeCache.start()` lists the nodes once (all of them: only their labels matter) and then
watches them on a daemon thread, from the list's resourceVersion, in streams of a bounded
`timeoutSeconds`. A stream that ends is opened again from the last version seen; a 410
Gone (the server's history no longer reaches back) is answered by listing again; any
other failure backs off (1 s doubling to 30 s) and lists again.

`current()` answers at once with the snapshot, a `Topology`. It never waits behind the
thread: only when the watch is not healthy and the snapshot is older than
`topology.max_staleness` does it list again, waiting for that list at most
`kube_timeout`, and only one caller at a time (the others get the snapshot as it is). A
list that fails keeps the stale snapshot, logs one warning (not one per call, until the
nodes are read again) and is not tried synchronously again before another
`max_staleness` has passed.

With no levels configured, or no cluster configured, the cache reads nothing and
`current()` is an empty `Topology`: every node is its own domain.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
from collections.abc import Callable, Mapping
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any

from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException

from bot.actions import cluster
from bot.clock import Clock, SystemClock
from bot.config import Settings
from bot.errors import BotError
from bot.topology.tree import Topology

logger = logging.getLogger(__name__)

WATCH_SECONDS = 240
"""How long one watch stream lasts before it is opened again (the server ends it then)."""
BACKOFF_FIRST, BACKOFF_MAX = 1.0, 30.0
"""After a failed list or watch, the wait before the next list, doubling per failure."""
GONE = 410

Levels = dict[str, dict[str, str]]
"""node -> level name -> the value of the level's label, as `Topology.nodes` holds it."""


def cluster_configured(settings: Settings) -> bool:
    """Whether the settings (or the environment) name a cluster, as `connect` reads them."""
    if settings.kube_in_cluster or settings.kubeconfig is not None:
        return True
    if os.environ.get("KUBECONFIG"):
        return True
    return (Path.home() / ".kube" / "config").is_file()


class NodeCache:
    """The nodes' failure domains, read once and then watched; see the module docstring.

    `kube_factory` builds the `kubernetes.client.ApiClient` (default: `cluster.connect`
    from the settings). `watch_seconds` and `backoff` bound one watch stream and the waits
    after failures (tests shorten them). The back-off waits are real time on a stop event,
    not the clock: `stop()` must end them at once, and a test's frozen clock must not spin.
    """

    def __init__(
        self,
        settings: Settings,
        kube_factory: Callable[[], Any] | None = None,
        clock: Clock | None = None,
        *,
        watch_seconds: int = WATCH_SECONDS,
        backoff: tuple[float, float] = (BACKOFF_FIRST, BACKOFF_MAX),
    ) -> None:
        self.settings = settings
        self.topology_settings = settings.topology
        self.clock: Clock = clock or SystemClock()
        self._kube_factory = kube_factory
        self._watch_seconds = watch_seconds
        self._backoff = backoff
        self._timeout = settings.kube_timeout.total_seconds()
        self.enabled = bool(self.topology_settings.levels) and (
            kube_factory is not None or cluster_configured(settings)
        )
        empty = Topology(tuple(self.topology_settings.levels))
        self._lock = threading.Lock()
        self._snapshot = empty
        self._levels: Levels = {}
        self._fresh_at: datetime | None = None
        """When the snapshot was last known current: a list, or the watch seeing events
        or ending cleanly."""
        self._version: str | None = None
        self._healthy = False
        self._relisting = threading.Lock()
        self._next_sync: datetime | None = None
        """No synchronous list before this (after one failed)."""
        self._warned = False
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._watch: watch.Watch | None = None
        self._api: Any = None

    # -- the public face ---------------------------------------------------------------

    @property
    def healthy(self) -> bool:
        """True while the watch streams (or between two streams of it)."""
        with self._lock:
            return self._healthy

    def start(self) -> Topology:
        """List the nodes and start watching them; the first snapshot. A first list that
        fails is logged and left to the watch thread, which lists again with back-off."""
        if not self.enabled:
            why = "no levels configured" if not self.topology_settings.levels else "no cluster"
            logger.info("topology: not reading nodes (%s); every node is its own domain", why)
            return self.current()
        try:
            self._list()
            topology = self.current()
            domains = sum(len(values) for values in topology.tree().values())
            logger.info(
                "topology: read %d nodes in %d domains (levels %s)",
                len(topology.nodes),
                domains,
                ", ".join(topology.level_names()),
            )
        except BotError as exc:
            logger.warning(
                "topology: cannot list the nodes yet (%s); retrying in the background", exc
            )
        self._thread = threading.Thread(target=self._run, name="topology-watch", daemon=True)
        self._thread.start()
        return self.current()

    def read(self) -> Topology:
        """List the nodes once, without watching (for a command that looks and exits);
        the API's refusal or absence is raised as the `BotError` saying what to check."""
        if self.enabled:
            try:
                self._list()
            finally:
                self._close()
        return self.current()

    def current(self) -> Topology:
        """The snapshot, at once; listed again first (bounded) only when the watch is
        broken and the snapshot is older than `max_staleness`."""
        stale = self.enabled and not self._stopping.is_set() and self._stale()
        if stale and self._relisting.acquire(blocking=False):
            if self._stale():
                self._relist_within(self._timeout)  # releases `_relisting` when done
            else:
                self._relisting.release()
        with self._lock:
            snapshot = self._snapshot
            if snapshot.read_at != self._fresh_at:
                snapshot = self._snapshot = replace(snapshot, read_at=self._fresh_at)
            return snapshot

    def stop(self, timeout: float = 5.0) -> None:
        """Stop watching; a stream in flight is cut at once."""
        self._stopping.set()
        with self._lock:
            stream = self._watch
        if stream is not None:
            stream.stop()
            # The Watch reads a response it keeps privately; shutting it down unblocks the
            # read at once instead of at the stream's next event or its timeout.
            # It may be closing by itself meanwhile: then there is nothing to cut.
            response = getattr(stream, "_resp", None)
            if response is not None and hasattr(response, "shutdown"):
                with contextlib.suppress(OSError, ValueError, RuntimeError):
                    response.shutdown()
        if self._thread is not None:
            self._thread.join(timeout)
        self._close()

    def _close(self) -> None:
        if self._api is not None:
            self._api.close()
            self._api = None

    # -- reading the nodes ---------------------------------------------------------------

    def _core(self) -> client.CoreV1Api:
        if self._api is None:
            if self._kube_factory is not None:
                self._api = self._kube_factory()
            else:
                self._api = cluster.connect(self.settings)
        return client.CoreV1Api(self._api)

    def _list(self) -> None:
        """One list of every node (raw JSON: only labels matter, and 1,000 nodes
        deserialised into models take a second), then the snapshot is replaced."""
        response = cluster.call(
            "list the nodes for the topology",
            self._core().list_node,
            timeout=self._timeout,
            clock=self.clock,
            attempts=1,
            _preload_content=False,
        )
        body = json.loads(response.data)
        levels = {
            item["metadata"]["name"]: self._levels_of(item["metadata"].get("labels") or {})
            for item in body.get("items") or []
        }
        with self._lock:
            self._levels = levels
            self._snapshot = Topology(tuple(self.topology_settings.levels), dict(levels))
            self._version = (body.get("metadata") or {}).get("resourceVersion")
            self._fresh_at = self.clock.now()
            self._next_sync = None
            warned, self._warned = self._warned, False
        if warned:
            logger.warning("topology: the nodes were read again (%d nodes)", len(levels))

    def _relist_within(self, seconds: float) -> None:
        """List on a thread of its own and wait for it at most `seconds`: the client's own
        connection retries could take a multiple of `kube_timeout`, and the caller (an
        ingest) must not. A list still running when the wait ends replaces the snapshot
        when it is done; until then callers get the stale one at once."""
        done = threading.Event()

        def relist() -> None:
            try:
                self._sync_list()
            finally:
                self._relisting.release()
                done.set()

        threading.Thread(target=relist, name="topology-relist", daemon=True).start()
        done.wait(seconds)

    def _sync_list(self) -> None:
        try:
            self._list()
        except Exception as exc:  # on its own thread: whatever failed is logged here
            with self._lock:
                self._next_sync = self.clock.now() + self.topology_settings.max_staleness
                first, self._warned = not self._warned, True
                age = self._fresh_at
            if first:
                logger.warning(
                    "topology: the node watch is down and the nodes cannot be listed (%s); "
                    "keeping the node labels read at %s; check the cluster address and the "
                    "bot's RBAC (list and watch nodes)",
                    exc,
                    age.isoformat() if age else "never",
                )

    def _stale(self) -> bool:
        with self._lock:
            if self._healthy:
                return False
            now = self.clock.now()
            if self._next_sync is not None and now < self._next_sync:
                return False
            return (
                self._fresh_at is None
                or now - self._fresh_at > self.topology_settings.max_staleness
            )

    def _levels_of(self, labels: Mapping[str, str]) -> dict[str, str]:
        return {
            level.name: labels[level.label]
            for level in self.topology_settings.levels
            if labels.get(level.label)
        }

    # -- the watch thread ----------------------------------------------------------------

    def _run(self) -> None:
        failures = 0
        while not self._stopping.is_set():
            try:
                if self._version is None:
                    self._list()
                self._stream()
                failures = 0
            except ApiException as exc:
                self._set_healthy(False)
                if self._stopping.is_set():
                    return
                if exc.status == GONE:
                    logger.info("topology: the node watch expired (410); listing again")
                    self._version = None
                    continue
                failures += 1
                self._wait_after(failures, f"{exc.status} {cluster.reason(exc)}")
            except Exception as exc:  # the thread must outlive any failure; it logs it
                self._set_healthy(False)
                if self._stopping.is_set():
                    return  # the stream cut by `stop`
                failures += 1
                self._wait_after(failures, f"{type(exc).__name__}: {exc}")

    def _stream(self) -> None:
        stream = watch.Watch()
        with self._lock:
            self._watch = stream
        if self._stopping.is_set():
            return
        events = stream.stream(
            self._core().list_node,
            resource_version=self._version,
            timeout_seconds=self._watch_seconds,
            allow_watch_bookmarks=True,
            # Events are deserialised into models, though only `raw_object`'s labels are
            # read: with deserialize=False the client fails on the server's ERROR events
            # (it looks for `raw_object` there too), and a 410 must reach us as one.
            _request_timeout=(self._timeout, self._watch_seconds + self._timeout),
        )
        self._set_healthy(True)
        for event in events:
            if self._stopping.is_set():
                break
            self._apply(event["type"], event.get("raw_object") or {})
        with self._lock:
            self._watch = None
            if not self._stopping.is_set():
                self._fresh_at = self.clock.now()  # a stream that ended cleanly missed nothing

    def _apply(self, kind: str, obj: Mapping[str, Any]) -> None:
        meta = obj.get("metadata") or {}
        version = meta.get("resourceVersion")
        with self._lock:
            if version:
                self._version = str(version)
            self._fresh_at = self.clock.now()
            if kind == "BOOKMARK":
                return
            name = meta.get("name")
            if not name:
                return
            if kind == "DELETED":
                if name not in self._levels:
                    return
                levels = dict(self._levels)
                del levels[name]
            else:
                found = self._levels_of(meta.get("labels") or {})
                if self._levels.get(name) == found:
                    return  # a status change (Ready, heartbeats): the domains stand
                levels = {**self._levels, name: found}
            self._levels = levels
            self._snapshot = Topology(tuple(self.topology_settings.levels), dict(levels))

    def _set_healthy(self, healthy: bool) -> None:
        with self._lock:
            self._healthy = healthy
            if not healthy:
                self._watch = None

    def _wait_after(self, failures: int, why: str) -> None:
        first, most = self._backoff
        delay = min(first * 2 ** (failures - 1), most)
        logger.log(
            logging.WARNING if failures == 1 else logging.DEBUG,
            "topology: the node watch failed (%s); listing again in %.0f s",
            why,
            delay,
        )
        self._version = None
        self._stopping.wait(delay)

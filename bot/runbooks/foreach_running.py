"""Running a claimed `for_each` run: its action once per node, at most `max_parallel` at
once, batch after batch with `pause` between them on the injected clock.

`NodeRuns.run` is called on the run's own thread (`Running`), so the worker's loop never
waits on it; it starts one thread per node it runs, never more than `max_parallel` alive
at once. Before each node starts it asks whether to go on: not once the run is cancelled
(its step timed out: the nodes running get the same `cancelled` event and stop at their
next call), not once a person stopped the rest (`stopped_by`, read from the database), and
with `stop_on: first_failure` not once a node failed. The nodes running always finish.
Every node's start and end is stored (`store`), so the card and the API count them while
the run runs; the result (`EachResult`) lists each node's outcome and the counts.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from bot.actions import Outcome
from bot.actions.types import Result
from bot.clock import Clock
from bot.db import Database
from bot.errors import BotError
from bot.runbooks import foreach
from bot.runbooks.foreach import Plan
from bot.runbooks.models import StepRun
from bot.runbooks.steps import StepState

__all__ = ["PAUSE_CHECK", "EachResult", "NodeRuns", "Stored"]

PAUSE_CHECK = 5.0
"""Seconds of a pause between two looks at whether the rest was stopped."""
WAKE = 1.0
"""Real seconds the starter waits for a node to end before it looks again."""

Act = Callable[[str, dict[str, Any], Callable[[str], None]], Outcome]
"""(node, its parameters, its progress callback) -> the node's outcome; never raises."""
Store = Callable[[dict[str, Any]], None]
StoppedBy = Callable[[], str | None]
logger = logging.getLogger(__name__)
S = StepState


class Stored:
    """A running `for_each` run's row, as its nodes go: their states stored where the
    card and the API read them (only while the run is still `owner`'s), and who stopped
    the rest, if anyone yet. The database being away is news, never a failure: the next
    node's start or end tries again."""

    def __init__(self, db: Database, run_id: int, owner: str) -> None:
        self.db, self.run_id, self.owner = db, run_id, owner
        self.last: dict[str, Any] | None = None
        """The nodes as last reported (stored or not)."""

    def stopped_by(self) -> str | None:
        try:
            with self.db.session() as session:
                run = session.get(StepRun, self.run_id)
                return None if run is None else run.stop_requested_by
        except BotError as exc:
            logger.warning("step run %s: whether it was stopped not read: %s", self.run_id, exc)
            return None

    def store(self, progress: dict[str, Any]) -> None:
        self.last = progress
        try:
            with self.db.transaction() as session:
                run = session.get(StepRun, self.run_id, with_for_update=True)
                if run is not None and run.state == S.RUNNING and run.lease_owner == self.owner:
                    run.progress = progress
        except BotError as exc:
            logger.warning("step run %s: progress not stored: %s", self.run_id, exc)


class EachResult(Result):
    """A `for_each` run's result: each node's outcome and the counts (`steps.X.result`)."""

    nodes: dict[str, dict[str, Any]]
    succeeded: int
    failed: int
    left: int
    stopped: bool = False
    stopped_by: str | None = None


class NodeRuns:
    """One `for_each` run's nodes, run as its plan says."""

    def __init__(
        self,
        action: str,
        params: dict[str, Any],
        plan: Plan,
        *,
        act: Act,
        clock: Clock,
        cancelled: threading.Event,
        stopped_by: StoppedBy,
        store: Store,
    ) -> None:
        self.action, self.params, self.plan = action, params, plan
        self.nodes = foreach.nodes_of(params)
        self.withs: list[dict[str, Any]] = list(params.get("with") or [])
        self._act, self._clock, self._cancelled = act, clock, cancelled
        self._stopped_by, self._store = stopped_by, store
        self._lock = threading.Condition()
        self._store_lock = threading.Lock()
        self._states: dict[str, dict[str, Any]] = {
            node: {"state": "left", "summary": ""} for node in self.nodes
        }
        self._alive = 0
        self._stopper: str | None = None
        self._threads: list[threading.Thread] = []

    def run(self) -> Outcome:
        size = self.plan.batch or max(len(self.nodes), 1)
        batches = [
            list(range(i, min(i + size, len(self.nodes)))) for i in range(0, len(self.nodes), size)
        ]
        self._save()
        for number, batch in enumerate(batches):
            if number and self.plan.pause and not self._pause():
                break
            if self._halted():
                break
            self._run_batch(batch)
        for thread in self._threads:
            thread.join()
        return self._outcome()

    def _run_batch(self, batch: list[int]) -> None:
        """Start the batch's nodes, at most `max_parallel` alive, and wait for its last."""
        for index in batch:
            self._wait_until(lambda: self._alive < self.plan.max_parallel)
            if self._halted():
                break
            with self._lock:
                self._start(index)
        self._wait_until(lambda: self._alive == 0)

    def _wait_until(self, ready: Callable[[], bool]) -> None:
        """Wait (real time) until `ready` holds; a node ending wakes the wait."""
        with self._lock:
            while not ready():
                self._lock.wait(WAKE)

    def _start(self, index: int) -> None:
        """Start one node's action (the caller holds the lock)."""
        node = self.nodes[index]
        params = self.withs[index] if index < len(self.withs) else {"node": node}
        self._states[node] = {"state": "running", "summary": ""}
        self._alive += 1
        thread = threading.Thread(
            target=self._one, args=(node, params), name=f"each-{node}", daemon=True
        )
        self._threads.append(thread)
        thread.start()

    def _one(self, node: str, params: dict[str, Any]) -> None:
        self._save()

        def progress(message: str) -> None:
            with self._lock:
                self._states[node]["summary"] = message[:300]

        outcome = self._act(node, params, progress)
        result = outcome.result
        with self._lock:
            self._states[node] = {
                "state": "succeeded" if result.ok else "failed",
                "summary": result.summary[:500],
            }
            self._alive -= 1
            self._lock.notify_all()
        self._save()

    def _halted(self) -> bool:
        """Whether no new node may start; asks the database whether the rest was stopped
        (called without the lock: the database may be slow)."""
        if self._cancelled.is_set():
            return True
        if self._stopper is None:
            self._stopper = self._stopped_by()
        if self._stopper is not None:
            return True
        if self.plan.stop_on == "first_failure":
            with self._lock:
                return any(s["state"] == "failed" for s in self._states.values())
        return False

    def _pause(self) -> bool:
        """Wait `pause` on the clock between two batches, looking every PAUSE_CHECK
        whether to go on; False when the run halted meanwhile."""
        left = self.plan.pause
        while left > 0:
            if self._halted():
                return False
            step = min(left, PAUSE_CHECK)
            self._clock.sleep(step)
            left -= step
        return True

    def _save(self) -> None:
        with self._store_lock:
            with self._lock:
                snapshot = {"nodes": {node: dict(s) for node, s in self._states.items()}}
            self._store(snapshot)

    def _outcome(self) -> Outcome:
        states = {node: dict(s) for node, s in self._states.items()}
        counted = foreach.tally({"nodes": states}, self.params)
        stopped = self._stopper is not None and counted.left > 0
        summary = self._summary(counted, stopped)
        result = EachResult(
            ok=counted.failed == 0 and counted.left == 0,
            summary=summary[:2000],
            nodes=states,
            succeeded=counted.succeeded,
            failed=counted.failed,
            left=counted.left,
            stopped=stopped,
            stopped_by=self._stopper if stopped else None,
        )
        return Outcome(self.action, self.params, result)

    def _summary(self, counted: foreach.Tally, stopped: bool) -> str:
        where = foreach.set_of(self.params)
        if counted.failed == 0 and counted.left == 0:
            return f"{self.action} succeeded on all {where}"
        parts = [f"{counted.succeeded} of {counted.total} succeeded"]
        if counted.failed:
            failures = "; ".join(
                f"{node}: {self._states[node]['summary']}" for node in counted.failed_nodes[:5]
            )
            more = f"; and {counted.failed - 5} more" if counted.failed > 5 else ""
            parts.append(f"{counted.failed} failed ({failures}{more})")
        if counted.left:
            parts.append(f"{counted.left} left ({foreach.names(counted.left_nodes)})")
        if stopped:
            head = f"{self.action} on {where} stopped by {self._stopper}"
        elif counted.left and self._cancelled.is_set():
            head = f"{self.action} on {where} cancelled (its step timed out)"
        elif counted.left:
            head = f"{self.action} on {where} stopped at the first failure"
        else:
            head = f"{self.action} on {where} failed"
        return f"{head}: {', '.join(parts)}"

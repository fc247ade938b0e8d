"""What an executor gets to work with: who, when, where to report, and the cluster.

Actions never import chat, the engine or the incident log; they report through the
callbacks here. `progress` updates whoever watches (the CLI prints it, the chat card will
edit itself); `record` writes a structured event to the incident's log when there is one.
A long action reports how far it is with `report(Reading(...))`: the reading's line goes to
`progress`, and the reading itself to `measure` when someone draws it (the CLI's bar of
pods left, the BMC's power states one after the other).

`cancelled` is set by whoever waits for the action when it stops waiting (the step timed
out): `checkpoint`, called before every Kubernetes and BMC call and before the circuit
breaker's check and the patch after it, then raises `ActionCancelled`, so an action that
outlived its step does nothing more on its behalf. `breaker_lock` is the lock, across
processes, that the breaker's count and the patch after it are held under (the database's,
given by whoever has the database; `bot.actions.breaker_lock`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from bot.clock import Clock, SystemClock
from bot.config import Settings
from bot.errors import ActionCancelled

Progress = Callable[[str], None]
Measure = Callable[["Reading"], None]
Record = Callable[[str, str, dict[str, Any]], None]
AlertHistory = Callable[[str, datetime], list[dict[str, Any]]]
"""(node, since) -> the alerts recorded on that node since then, across incidents: dicts
with incident (number), alertname, labels, starts_at (datetime), status."""
BreakerLock = Callable[[], AbstractContextManager[None]]
"""Enter to hold the circuit breaker's lock across processes (the bot's database)."""


@dataclass(frozen=True)
class Allowance:
    """What one approval that named its count lets a step over many nodes take out of
    service (`for_each`): these nodes, `count` of them, of `domain` ("row/a"; None for an
    incident of no domain). The circuit breaker admits them up to its global cap."""

    nodes: frozenset[str]
    count: int
    domain: str | None = None


@dataclass(frozen=True)
class Reading:
    """How far a long action is: `text`, the line `progress` gets ("3/10 evicted"), and
    what it counts: `done` of `total` `unit` (a drain's pods evicted of its "pods"), or the
    `state` it
    waits to change (a power cycle's BMC power state: on, off, on)."""

    text: str
    done: int | None = None
    total: int | None = None
    unit: str = ""
    state: str | None = None

    @property
    def left(self) -> int | None:
        return None if self.done is None or self.total is None else self.total - self.done


def _ignore_progress(message: str) -> None:
    return None


def _ignore_record(kind: str, summary: str, data: dict[str, Any]) -> None:
    return None


@dataclass
class ActionContext:
    """One run of one action on behalf of `actor` (a person's id, or `runbook-bot`)."""

    actor: str
    settings: Settings
    # Timestamps, and every wait and deadline of the action (polls, backoff, timeouts).
    clock: Clock = field(default_factory=SystemClock)
    incident: str | None = None
    dry_run: bool = False
    admin_override: bool = False
    # An admin override past the global cap names how many nodes it lets out (None: any).
    override_count: int | None = None
    # Set for a run of a `for_each` step whose approval named its count.
    allowance: Allowance | None = None
    progress: Progress = _ignore_progress
    record: Record = _ignore_record
    # Who draws readings (the CLI); None: their lines go to `progress` as any other.
    measure: Measure | None = None
    # Built on first use, so read-only runs of other kinds never touch the cluster.
    kube_factory: Callable[[], Any] | None = None
    # The incident store's memory of earlier alerts, given by whoever has the database.
    alert_history: AlertHistory | None = None
    # Set when nobody waits for this run any more (its step timed out): see `checkpoint`.
    cancelled: threading.Event = field(default_factory=threading.Event)
    # None: the breaker serialises within this process only (no database at hand).
    breaker_lock: BreakerLock | None = None
    _kube: Any = field(default=None, repr=False)

    def checkpoint(self, what: str) -> None:
        """Raise `ActionCancelled` if this run was cancelled: `what` is not done."""
        if self.cancelled.is_set():
            where = f" of {self.incident}" if self.incident else ""
            raise ActionCancelled(
                f"{what} not done: this run{where} was cancelled (its step timed out and "
                "moved on), so the action stops here; look at the step's state and decide "
                "again"
            )

    def report(self, reading: Reading) -> None:
        """Say how far the action is: to `measure` when someone draws readings, else its
        line to `progress`."""
        if self.measure is not None:
            self.measure(reading)
        else:
            self.progress(reading.text)

    def kube(self) -> Any:
        """The `kubernetes.client.ApiClient` for this run (every Kubernetes call gets it
        here, so a cancelled run makes no more of them)."""
        self.checkpoint("the Kubernetes call")
        if self._kube is None:
            if self.kube_factory is None:
                from bot.actions.cluster import connect

                self._kube = connect(self.settings)
            else:
                self._kube = self.kube_factory()
        return self._kube

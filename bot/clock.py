"""Time, injectable: every timestamp is timezone-aware UTC and comes from a `Clock`.

Production code takes a clock argument where time matters (timestamps with `now`, waits
with `sleep` and `monotonic`); tests pass a `FrozenClock` and move it, so no test
monkeypatches `time` or waits for real. `FrozenClock.call_later` makes something happen
when the clock passes a moment (a node comes back 12 s into a wait). A `ScaledClock` keeps
pace with a simulator run at a `time_scale`, for waits on what the simulator does in its
own time (a pod's grace period, a machine's boot).
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Protocol


class Clock(Protocol):
    def now(self) -> datetime:
        """The current time, timezone-aware UTC."""
        ...

    def monotonic(self) -> float:
        """Seconds on a clock that never goes back, for deadlines and durations."""
        ...

    def sleep(self, seconds: float) -> None:
        """Wait `seconds` (a negative or zero wait returns at once)."""
        ...


class SystemClock:
    """The wall clock, in UTC."""

    def now(self) -> datetime:
        return datetime.now(UTC)

    def monotonic(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            time.sleep(seconds)


class FrozenClock:
    """A clock that stands still until a test moves it: `advance`, `set`, or a `sleep`,
    which returns at once having moved the clock by that much (both `now` and
    `monotonic`). `slept` lists every sleep, in order, for tests that assert pacing.

    `call_later(seconds, fn)` runs `fn` when the clock has moved that far: the `sleep` (or
    `advance`, `set`) that passes the moment runs it, on its own thread, with the clock
    showing that moment, and then goes on to where it was going."""

    def __init__(self, start: datetime | None = None) -> None:
        self._now = start or datetime(2026, 1, 1, tzinfo=UTC)
        if self._now.tzinfo is None:
            raise ValueError("FrozenClock needs a timezone-aware start time")
        self._mono = 0.0
        self._lock = threading.Lock()
        self._due: list[tuple[float, int, Callable[[], object]]] = []
        self._order = itertools.count()
        self.slept: list[float] = []

    def now(self) -> datetime:
        with self._lock:
            return self._now

    def monotonic(self) -> float:
        with self._lock:
            return self._mono

    def sleep(self, seconds: float) -> None:
        with self._lock:
            self.slept.append(seconds)
        self._move(timedelta(seconds=max(seconds, 0.0)))

    def advance(self, delta: timedelta) -> datetime:
        self._move(delta)
        return self.now()

    def set(self, when: datetime) -> None:
        with self._lock:
            moved = when.astimezone(UTC) - self._now
        self._move(moved)

    def call_later(self, seconds: float, fn: Callable[[], object]) -> None:
        """Run `fn` once the clock has moved `seconds` further (at the next move if <= 0)."""
        with self._lock:
            heapq.heappush(self._due, (self._mono + seconds, next(self._order), fn))

    def _move(self, delta: timedelta) -> None:
        """Move `now` by `delta` and `monotonic` by as much (never back), running what
        falls due on the way, each at its moment."""
        with self._lock:
            start_now, start_mono = self._now, self._mono
            end_now, end_mono = start_now + delta, start_mono + max(delta.total_seconds(), 0.0)
        while True:
            with self._lock:
                if not self._due or self._due[0][0] > end_mono:
                    # A callback may have slept past our end: the clock never goes back.
                    if self._mono <= end_mono:
                        self._now, self._mono = end_now, end_mono
                    return
                at, _, fn = heapq.heappop(self._due)
                if at > self._mono:
                    self._now = start_now + timedelta(seconds=at - start_mono)
                    self._mono = at
            fn()


class ScaledClock:
    """A clock whose seconds each last `scale` real seconds, as the simulator's do when it
    runs at `time_scale=scale`: an action's 5 s poll takes 0.1 s at 0.02, and a wait for a
    pod's 30 s grace period ends when the simulator ends it. `now` is `timeline`'s (the
    wall clock unless given) and sleeps do not move it, so a test's frozen incident
    timeline stays where the test puts it."""

    def __init__(self, scale: float, *, timeline: Clock | None = None) -> None:
        if not scale > 0:
            raise ValueError("ScaledClock needs a positive scale (real seconds per second)")
        self.scale = scale
        self.timeline: Clock = timeline or SystemClock()

    def now(self) -> datetime:
        return self.timeline.now()

    def monotonic(self) -> float:
        return time.monotonic() / self.scale

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            time.sleep(seconds * self.scale)


def as_utc(value: datetime) -> datetime:
    """Return `value` in UTC; a naive value is taken to be UTC already (SQLite drops zones)."""
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value.astimezone(UTC)

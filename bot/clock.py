"""Time, injectable: every timestamp is timezone-aware UTC and comes from a `Clock`.

Production code takes a clock argument where time matters (timestamps with `now`, waits
with `sleep` and `monotonic`); tests pass a `FrozenClock` and move it, so no test
monkeypatches `time` or waits for real.
"""

from __future__ import annotations

import threading
import time
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
    `monotonic`). `slept` lists every sleep, in order, for tests that assert pacing."""

    def __init__(self, start: datetime | None = None) -> None:
        self._now = start or datetime(2026, 1, 1, tzinfo=UTC)
        if self._now.tzinfo is None:
            raise ValueError("FrozenClock needs a timezone-aware start time")
        self._mono = 0.0
        self._lock = threading.Lock()
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
            if seconds > 0:
                self._now += timedelta(seconds=seconds)
                self._mono += seconds

    def advance(self, delta: timedelta) -> datetime:
        with self._lock:
            self._now += delta
            self._mono += max(delta.total_seconds(), 0.0)
            return self._now

    def set(self, when: datetime) -> None:
        with self._lock:
            moved = (when.astimezone(UTC) - self._now).total_seconds()
            self._now = when.astimezone(UTC)
            self._mono += max(moved, 0.0)


def as_utc(value: datetime) -> datetime:
    """Return `value` in UTC; a naive value is taken to be UTC already (SQLite drops zones)."""
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value.astimezone(UTC)

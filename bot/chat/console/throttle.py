"""Failed console logins per user name and client address, in a bounded LRU that never
forgets a count before its window ends.

Each (name, client) keeps its last `FAILURES` failure times; a key whose last failure is
older than `WINDOW` is dropped. Keys are kept in order of their last failure, so the
oldest are dropped first and cheaply. When `size` keys are tracked and none has expired,
a login under a new (name, client) is refused until one does: a flood of invented names
can then hold new logins off for one window, but never clears the count of a name already
being guessed (the old table was cleared when full, giving the guesser fresh tries).
In memory: a replica counts its own.
"""

from __future__ import annotations

import threading
from collections import OrderedDict, deque
from datetime import datetime, timedelta

from bot.errors import BotError

FAILURES = 5
"""Failed logins allowed per user and client within WINDOW."""
WINDOW = timedelta(minutes=15)

Key = tuple[str, str]
"""(user name, client address)."""


class LoginThrottled(BotError):
    """Too many failed logins for this user from this client (or from everywhere)."""


class Throttle:
    def __init__(self, size: int) -> None:
        self.size = size
        self._lock = threading.Lock()
        self._failures: OrderedDict[Key, deque[datetime]] = OrderedDict()

    def check(self, key: Key, now: datetime) -> None:
        """LoginThrottled when `key` may not try now."""
        with self._lock:
            self._expire(now)
            recent = [at for at in self._failures.get(key, ()) if now - at < WINDOW]
            if len(recent) >= FAILURES:
                raise LoginThrottled(
                    f"too many failed logins for {key[0]} from your address; wait "
                    f"{_minutes(recent[0] + WINDOW - now)} min and try again, or ask an admin "
                    "to check your password"
                )
            if key not in self._failures and len(self._failures) >= self.size:
                oldest = next(iter(self._failures.values()))[-1]
                raise LoginThrottled(
                    f"the console has seen failed logins for {self.size} user names within "
                    f"{int(WINDOW.total_seconds() // 60)} min and takes no new ones; wait "
                    f"{_minutes(oldest + WINDOW - now)} min and try again"
                )

    def failed(self, key: Key, now: datetime) -> None:
        """Count a failure of `key` (checked first, so the table has room for it)."""
        with self._lock:
            times = self._failures.get(key)
            if times is None:
                if len(self._failures) >= self.size:
                    return  # refused by check(): nothing to count
                times = self._failures[key] = deque(maxlen=FAILURES)
            times.append(now)
            self._failures.move_to_end(key)

    def forget(self, key: Key) -> None:
        with self._lock:
            self._failures.pop(key, None)

    def tracked(self) -> int:
        with self._lock:
            return len(self._failures)

    def _expire(self, now: datetime) -> None:
        while self._failures:
            key, times = next(iter(self._failures.items()))
            if now - times[-1] < WINDOW:
                return  # the rest failed later still
            del self._failures[key]


def _minutes(left: timedelta) -> int:
    return max(1, int(left.total_seconds() // 60) + 1)

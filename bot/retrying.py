"""Bounded retries, and the one reading of a `Retry-After` header.

Everything that talks to a remote system retries through `call` (tenacity underneath):
a fixed number of attempts, a predicate saying which failures are worth another try (the
error's class, never its text), a wait computed from the failure (a Retry-After it
carried, else a backoff), and a `sleep` the caller gives, so an action waits on its
injected clock and a test never sleeps. The last failure is raised as it was: what it
means for the caller (a step error, a failed page) stays the caller's to say.

`retry_after` reads the header in both forms HTTP allows (delay-seconds or an HTTP-date),
bounded, so a server cannot hold a sender for a day, nor make it hammer with 0.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import TypeVar, overload

import tenacity

__all__ = ["MAX_RETRY_AFTER", "Wait", "backoff", "call", "immediately", "retry_after"]

T = TypeVar("T")
Wait = Callable[[BaseException, int], float]
"""Seconds to wait after `attempt` (1-based) failed with the exception."""
MAX_RETRY_AFTER = 300.0
"""The longest Retry-After honoured: past it, a caller waits this long and tries again."""


def call(
    fn: Callable[[], T],
    *,
    attempts: int,
    retry_if: Callable[[BaseException], bool],
    wait: Wait,
    sleep: Callable[[float], None] = time.sleep,
    before_sleep: Callable[[BaseException, int, float], None] | None = None,
) -> T:
    """`fn()` until it returns, fails in a way `retry_if` refuses, or `attempts` ran out;
    then the last failure is raised. `before_sleep(exc, attempt, seconds)` can log it."""

    def waiting(state: tenacity.RetryCallState) -> float:
        return max(0.0, wait(_failure(state), state.attempt_number))

    def noting(state: tenacity.RetryCallState) -> None:
        if before_sleep is not None:
            seconds = state.next_action.sleep if state.next_action is not None else 0.0
            before_sleep(_failure(state), state.attempt_number, seconds)

    retrying = tenacity.Retrying(
        stop=tenacity.stop_after_attempt(max(1, attempts)),
        retry=tenacity.retry_if_exception(retry_if),
        wait=waiting,
        sleep=lambda seconds: sleep(seconds) if seconds > 0 else None,
        before_sleep=noting,
        reraise=True,
    )
    return retrying(fn)


def immediately(_exc: BaseException, _attempt: int) -> float:
    """No wait: for a lost race (a 409 Conflict, a unique key taken meanwhile), where the
    next attempt reads what the winner wrote and nothing is gained by waiting."""
    return 0.0


def backoff(first: float, most: float, factor: float = 2.0) -> Wait:
    """`first`, then `factor` times longer after each failure, never more than `most`."""
    return lambda _exc, attempt: min(first * factor ** (attempt - 1), most)


@overload
def retry_after(
    value: str | None,
    *,
    default: float,
    least: float = 0.0,
    most: float = MAX_RETRY_AFTER,
    now: datetime | None = None,
) -> float: ...


@overload
def retry_after(
    value: str | None,
    *,
    default: None = None,
    least: float = 0.0,
    most: float = MAX_RETRY_AFTER,
    now: datetime | None = None,
) -> float | None: ...


def retry_after(
    value: str | None,
    *,
    default: float | None = None,
    least: float = 0.0,
    most: float = MAX_RETRY_AFTER,
    now: datetime | None = None,
) -> float | None:
    """Seconds a `Retry-After` header asks for, within [`least`, `most`]; `default` when
    there is none or it is neither a number of seconds nor an HTTP-date."""
    text = (value or "").strip()
    seconds: float | None
    try:
        seconds = float(text)
    except ValueError:
        seconds = _until(text, now)
    if seconds is None or seconds != seconds:  # absent, unreadable, NaN
        return default
    return min(max(seconds, least), most)


def _until(text: str, now: datetime | None) -> float | None:
    if not text:
        return None
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:  # an HTTP-date is GMT; a date without a zone is taken as UTC
        when = when.replace(tzinfo=UTC)
    return (when - (now or datetime.now(UTC))).total_seconds()


def _failure(state: tenacity.RetryCallState) -> BaseException:
    outcome = state.outcome
    exc = outcome.exception() if outcome is not None else None
    if exc is None:  # tenacity retries only on exceptions here
        raise AssertionError("a retry without a failure")
    return exc

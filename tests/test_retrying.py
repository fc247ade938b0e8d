"""The one retry helper and the one Retry-After reading (bot/retrying.py)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from bot import retrying

NOW = datetime(2026, 12, 2, 7, 0, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        ("7", 7.0),
        (" 2.5 ", 2.5),
        ("Wed, 02 Dec 2026 07:00:30 GMT", 30.0),  # an HTTP-date: the seconds until it
        ("Wed, 02 Dec 2026 06:59:00 GMT", 0.0),  # in the past: now
        ("-3", 0.0),
        ("86400", retrying.MAX_RETRY_AFTER),  # a day: bounded
        ("inf", retrying.MAX_RETRY_AFTER),
        ("nan", None),
        ("soon", None),
        ("", None),
        (None, None),
    ],
)
def test_retry_after_reads_seconds_or_an_http_date_within_bounds(
    header: str | None, expected: float | None
) -> None:
    assert retrying.retry_after(header, now=NOW) == expected


def test_retry_after_gives_the_default_and_the_floor_the_caller_asks_for() -> None:
    assert retrying.retry_after("soon", default=5.0) == 5.0
    assert retrying.retry_after("0", default=1.0, least=1.0) == 1.0


def test_call_retries_only_what_the_predicate_allows_and_sleeps_on_the_given_clock() -> None:
    slept: list[float] = []
    calls: list[int] = []

    def flaky() -> str:
        calls.append(1)
        if len(calls) < 3:
            raise TimeoutError("no answer")
        return "ok"

    wait = retrying.backoff(0.5, 1.0)
    got = retrying.call(
        flaky, attempts=4, retry_if=lambda e: isinstance(e, TimeoutError), wait=wait,
        sleep=slept.append,
    )  # fmt: skip
    assert (got, len(calls), slept) == ("ok", 3, [0.5, 1.0])

    def refused() -> str:
        calls.append(1)
        raise PermissionError("no")

    calls.clear()
    with pytest.raises(PermissionError):
        retrying.call(refused, attempts=4, retry_if=lambda e: isinstance(e, TimeoutError),
                      wait=wait, sleep=slept.append)  # fmt: skip
    assert len(calls) == 1


def test_call_raises_the_last_failure_when_the_attempts_run_out() -> None:
    seen: list[tuple[int, float]] = []

    def silent() -> None:
        raise TimeoutError(f"try {len(seen) + 1}")

    with pytest.raises(TimeoutError, match="try 3"):
        retrying.call(
            silent, attempts=3, retry_if=lambda e: True, wait=lambda e, n: float(n),
            sleep=lambda s: None, before_sleep=lambda e, n, s: seen.append((n, s)),
        )  # fmt: skip
    assert seen == [(1, 1.0), (2, 2.0)]


def test_a_lost_race_is_tried_again_at_once_without_sleeping() -> None:
    slept: list[float] = []
    tries: list[int] = []

    def conflicted() -> str:
        tries.append(1)
        if len(tries) < 3:
            raise LookupError("409 Conflict")
        return "written"

    result = retrying.call(
        conflicted,
        attempts=5,
        retry_if=lambda exc: isinstance(exc, LookupError),
        wait=retrying.immediately,
        sleep=slept.append,
    )
    assert (result, len(tries), slept) == ("written", 3, [])

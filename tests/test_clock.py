"""The injectable clocks: a FrozenClock moved by sleeps runs what falls due on the way, at
its moment; a ScaledClock keeps a simulator's pace under a timeline it never moves."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import pytest

from bot.clock import FrozenClock, ScaledClock

START = datetime(2026, 11, 29, 22, 10, tzinfo=UTC)


def test_a_sleep_runs_what_falls_due_at_its_moment_in_order_then_ends_where_it_was_going() -> None:
    clock = FrozenClock(START)
    seen: list[tuple[str, float, datetime]] = []
    clock.call_later(7, lambda: seen.append(("b", clock.monotonic(), clock.now())))
    clock.call_later(2, lambda: seen.append(("a", clock.monotonic(), clock.now())))
    clock.call_later(30, lambda: seen.append(("later", clock.monotonic(), clock.now())))

    clock.sleep(10)

    assert seen == [
        ("a", 2.0, START + timedelta(seconds=2)),
        ("b", 7.0, START + timedelta(seconds=7)),
    ]
    assert (clock.monotonic(), clock.now(), clock.slept) == (
        10.0,
        START + timedelta(seconds=10),
        [10],
    )


def test_advance_and_set_run_what_falls_due_but_a_move_back_runs_nothing() -> None:
    clock = FrozenClock(START)
    ran: list[float] = []
    clock.call_later(5, lambda: ran.append(clock.monotonic()))
    clock.call_later(65, lambda: ran.append(clock.monotonic()))

    clock.advance(timedelta(seconds=-30))
    assert (ran, clock.monotonic()) == ([], 0.0)
    clock.advance(timedelta(seconds=40))  # now 10 s past START, monotonic 40
    assert ran == [5.0]
    clock.set(START + timedelta(minutes=1))
    assert (ran, clock.now(), clock.monotonic()) == (
        [5.0, 65.0],
        START + timedelta(minutes=1),
        90.0,
    )


def test_what_is_due_already_runs_at_the_next_move_and_a_callback_may_schedule_another() -> None:
    clock = FrozenClock(START)
    ran: list[str] = []

    def first() -> None:
        ran.append("first")
        clock.call_later(1, lambda: ran.append("second"))

    clock.call_later(0, first)
    assert ran == []

    clock.sleep(0)
    assert ran == ["first"]
    clock.sleep(5)
    assert (ran, clock.monotonic()) == (["first", "second"], 5.0)


def test_a_callback_that_sleeps_past_the_end_never_moves_the_clock_back() -> None:
    clock = FrozenClock(START)
    clock.call_later(1, lambda: clock.sleep(10))

    clock.sleep(2)

    assert clock.monotonic() == 11.0
    assert clock.slept == [2, 10]


def test_a_scaled_clock_tells_the_timelines_time_and_its_sleeps_never_move_it() -> None:
    timeline = FrozenClock(START)
    clock = ScaledClock(0.001, timeline=timeline)

    clock.sleep(5)  # 5 ms of real time

    assert clock.now() == START
    assert timeline.slept == []


def test_a_scaled_clocks_seconds_are_real_seconds_divided_by_its_scale() -> None:
    clock = ScaledClock(0.02)

    before = time.monotonic()
    seconds = clock.monotonic()
    after = time.monotonic()

    assert before / 0.02 <= seconds <= after / 0.02


@pytest.mark.parametrize("scale", [0, -1])
def test_a_scaled_clock_refuses_a_scale_that_is_not_positive(scale: float) -> None:
    with pytest.raises(ValueError, match="ScaledClock needs a positive scale"):
        ScaledClock(scale)


def test_a_frozen_clock_refuses_a_naive_start() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        FrozenClock(datetime(2026, 1, 1))

"""Bounded waiting for the simulator's tests: no test waits without a deadline."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

import pytest

T = TypeVar("T")

# The simulator runs 50x faster in tests: a 5 s grace period takes 0.1 s, a 2 s pod start
# 0.04 s.
TIME_SCALE = 0.02


def eventually(check: Callable[[], T | None], *, timeout: float = 5.0, what: str = "it") -> T:
    """Poll `check` until it returns something truthy; fail the test after `timeout` s."""
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.02)

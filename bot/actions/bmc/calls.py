"""Talking to a BMC patiently: one open connection per action, bounded retries.

A BMC is a small, slow computer that drops UDP packets and answers 503 while busy. Reads
and idempotent requests are retried `bmc.attempts` times with a short pause when the
BMC does not answer (`TemporaryActionError`); a refusal (`PermanentActionError`) is final.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

from bot import retrying
from bot.actions.bmc import inventory
from bot.actions.bmc.protocol import Bmc
from bot.actions.context import ActionContext
from bot.errors import TemporaryActionError

T = TypeVar("T")
PAUSE_FIRST, PAUSE_MAX = 0.5, 4.0


@contextmanager
def session(ctx: ActionContext, node: str) -> Iterator[Bmc]:
    ctx.checkpoint(f"opening the BMC of {node}")
    bmc = inventory.open_bmc(ctx, node)
    try:
        yield bmc
    finally:
        bmc.close()


def retried(ctx: ActionContext, fn: Callable[[], T], *, attempts: int | None = None) -> T:
    """`fn()`, tried up to `attempts` (default `bmc.attempts`) times while the BMC is silent."""
    tries = attempts or ctx.settings.bmc.attempts

    def attempt() -> T:
        ctx.checkpoint("the BMC call")
        return fn()

    try:
        return retrying.call(
            attempt,
            attempts=tries,
            retry_if=lambda exc: isinstance(exc, TemporaryActionError),
            wait=retrying.backoff(PAUSE_FIRST, PAUSE_MAX),
            sleep=time.sleep,
        )
    except TemporaryActionError as exc:
        if tries > 1:
            raise TemporaryActionError(f"{exc} (tried {tries} times)", delay=exc.delay) from exc
        raise

"""The lock the circuit breaker's count and the patch after it are held under, across
processes (DESIGN invariant 6).

Counting the nodes the bot holds and then cordoning one are two calls; two workers (or a
worker and `runbook-bot action run`) doing both at once would each count below the limit
and both cordon. `across(db)` serialises them on the bot's database: on PostgreSQL a
transaction-scoped advisory lock (`pg_advisory_xact_lock` on one fixed key) in a short
transaction of its own, released when the patch is done or failed (or when the session
dies, so a killed worker never leaves it held); its wait is bounded by the session's
`lock_timeout`. SQLite is one machine's file: an exclusive `flock` on a file beside it keeps
processes apart without holding SQLite's own write lock (which every request needs) across
the Kubernetes calls; threads of one process queue on `breaker.PROCESS_LOCK` before it.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

from sqlalchemy import text
from sqlalchemy.engine import make_url

from bot.actions import breaker
from bot.clock import Clock
from bot.db import Database
from bot.errors import StorageUnavailable, TemporaryActionError

__all__ = ["KEY", "across", "lock_file"]

KEY = 0x7262_6F74_6272_6B72
"""The advisory lock's key ('rbotbrkr', a positive bigint); one per bot's database."""
FILE_POLL = 0.05
"""Seconds between two tries at the SQLite lock file."""


@contextlib.contextmanager
def across(db: Database, clock: Clock, *, wait: float) -> Iterator[None]:
    """Hold the breaker's lock on `db` for the body (at most `wait` seconds to get it)."""
    if db.is_postgres:
        with _advisory(db):
            yield
        return
    path = lock_file(db.url)
    with breaker.process_lock(wait):
        if path is None:  # an in-memory database: one process by definition
            yield
            return
        with _flock(path, clock, wait):
            yield


@contextlib.contextmanager
def _advisory(db: Database) -> Iterator[None]:
    held = False
    try:
        with db.transaction() as session:
            session.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": KEY})
            held = True
            yield
    except StorageUnavailable as exc:
        if held:
            raise
        raise TemporaryActionError(
            "the circuit breaker's lock is held by another worker for longer than its "
            f"lock_timeout, or the database cannot take it ({exc}); the step is tried "
            "again later",
            delay=10,
        ) from exc


@contextlib.contextmanager
def _flock(path: Path, clock: Clock, wait: float) -> Iterator[None]:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        deadline = clock.monotonic() + wait
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if clock.monotonic() >= deadline:
                    raise TemporaryActionError(
                        f"the circuit breaker's lock ({path}) is held by another process "
                        f"for more than {wait:.0f} s; the step is tried again later",
                        delay=10,
                    ) from None
                clock.sleep(FILE_POLL)
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def lock_file(url: str) -> Path | None:
    """The SQLite database's breaker lock file (beside it), None for an in-memory one."""
    database = make_url(url).database
    if not database or database == ":memory:" or database.startswith("file::memory:"):
        return None
    return Path(database).with_name(Path(database).name + ".breaker-lock")

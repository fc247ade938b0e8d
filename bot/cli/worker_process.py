"""The worker `serve` runs beside its webhook, in a child process it supervises.

A child process, not a thread: proposing steps and running actions is Python work, and in
the webhook's own interpreter it would share one GIL with ingest. During an alert storm
that doubled the webhook's p99 (docs/performance.md); in its own process the worker uses
another core and the webhook keeps its latency.

The child is started with `spawn` (no fork of a threaded parent) and gets the settings and
two shared events: `wake`, set by the webhook after it opened an incident or committed an
approval, and `stop`. A child that dies (a crash, the OOM killer, kill -9) is started again
after a backoff of 1 s doubling to 30 s; nothing is lost, because a step it was running
has a lease that runs out and is then offered to people again. A child whose parent died
(serve was killed) stops by itself within a second instead of running on unsupervised.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import signal
import threading
import time
from multiprocessing.context import SpawnProcess
from multiprocessing.synchronize import Event

from bot.config import Settings

logger = logging.getLogger(__name__)

BACKOFF_FIRST, BACKOFF_MAX = 1.0, 30.0
HEALTHY_AFTER = 60.0
"""A child that ran this long before dying restarts after the first backoff again."""


class WorkerProcess:
    """Start, wake, supervise and stop the worker's child process."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._context = multiprocessing.get_context("spawn")
        self._wake: Event = self._context.Event()
        self._stop: Event = self._context.Event()
        self._closing = threading.Event()
        self._process: SpawnProcess | None = None
        self._supervisor: threading.Thread | None = None
        self.starts = 0

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    def wake(self) -> None:
        """Look for work now: an incident opened or an approval was committed."""
        self._wake.set()

    def start(self) -> None:
        self._spawn()
        self._supervisor = threading.Thread(
            target=self._supervise, name="worker-supervisor", daemon=True
        )
        self._supervisor.start()

    def stop(self, timeout: float) -> None:
        """Ask the child to finish its current step (up to `timeout`), then end it."""
        self._closing.set()
        self._stop.set()
        self._wake.set()
        process = self._process
        if process is not None:
            process.join(timeout)
            if process.is_alive():
                logger.warning(
                    "worker process %s did not stop in %.0f s; killing it", process.pid, timeout
                )
                process.kill()
                process.join(5)
        if self._supervisor is not None:
            self._supervisor.join(5)

    def _spawn(self) -> None:
        process = self._context.Process(
            target=_child,
            args=(self.settings, self._wake, self._stop, os.getpid()),
            name="runbook-bot-worker",
        )
        process.start()
        self._process = process
        self.starts += 1
        logger.info("worker process %s started", process.pid)

    def _supervise(self) -> None:
        backoff = BACKOFF_FIRST
        while not self._closing.is_set():
            process = self._process
            assert process is not None
            started = time.monotonic()
            process.join()
            if self._closing.is_set():
                return
            backoff = BACKOFF_FIRST if time.monotonic() - started > HEALTHY_AFTER else backoff
            logger.error(
                "worker process %s exited with code %s; starting another in %.0f s "
                "(steps it was running are offered again when their lease runs out)",
                process.pid,
                process.exitcode,
                backoff,
            )
            if self._closing.wait(backoff):
                return
            self._spawn()
            backoff = min(backoff * 2, BACKOFF_MAX)


def _child(settings: Settings, wake: Event, stop: Event, parent: int) -> None:
    """The child's main: the same worker as `runbook-bot worker`, woken by the webhook."""
    from bot.cli import common
    from bot.clock import SystemClock
    from bot.worker import Worker

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches serve, which stops us

    def terminate(*_: object) -> None:
        stop.set()
        wake.set()

    signal.signal(signal.SIGTERM, terminate)
    common.configure_logging(settings)
    threading.Thread(target=_orphaned, args=(parent, stop, wake), daemon=True).start()
    with common.database(settings) as db:
        Worker(db, settings, SystemClock(), wake=wake).run_forever(stop)


def _orphaned(parent: int, stop: Event, wake: Event) -> None:
    """Stop when `serve` is gone (killed without a chance to stop us)."""
    while not stop.wait(1.0):
        if os.getppid() != parent:
            logging.getLogger(__name__).error(
                "serve (pid %s) is gone; the worker process stops", parent
            )
            stop.set()
            wake.set()
            return

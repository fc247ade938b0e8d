"""The worker `serve` runs beside its webhook, in a child process it supervises.

A child process, not a thread: proposing steps and running actions is Python work, and in
the webhook's own interpreter it would share one GIL with ingest. During an alert storm
that tripled the webhook's p99 (docs/performance.md); in its own process the worker uses
another core and the webhook keeps its latency.

The child is started with `spawn` (no fork of a threaded parent). The webhook wakes it by
writing a byte to a pipe, never blocking: a full pipe already holds a wake-up. (A
`multiprocessing.Event` would not do: its `set` waits for the sleeping process to
acknowledge, which stalls the event loop, and forever if that process was killed.) A
child that dies (a crash, the OOM killer, kill -9) is started again after a backoff of
1 s doubling to 30 s; nothing is lost, because a step it was running has a lease that
runs out and is then offered to people again. `stop` sends SIGTERM: the child records the
steps that ended, cancels the ones in hand (written interrupted, for people to decide again)
and exits within seconds. A child whose parent died (serve was killed) stops by itself
within a second instead of running on unsupervised.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import os
import select
import signal
import threading
import time
from multiprocessing.connection import Connection
from multiprocessing.context import SpawnProcess

from bot.config import Settings

logger = logging.getLogger(__name__)

STEPS, CHAT = b"s", b"c"
"""What a byte on the wake pipe wakes: the step worker or the chat sender."""
BACKOFF_FIRST, BACKOFF_MAX = 1.0, 30.0
CLEAN_EXIT_GRACE = 2.0
"""After the worker stopped as asked, how long to wait for serve's own stop before
starting another."""
HEALTHY_AFTER = 60.0
"""A child that ran this long before dying restarts after the first backoff again."""


class WorkerProcess:
    """Start, wake, supervise and stop the worker's child process."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._context = multiprocessing.get_context("spawn")
        # The pipe outlives each child: a new one reads wake-ups left by the last.
        self._reader, self._writer = self._context.Pipe(duplex=False)
        os.set_blocking(self._writer.fileno(), False)
        self._closing = threading.Event()
        self._lock = threading.Lock()
        self._process: SpawnProcess | None = None
        self._supervisor: threading.Thread | None = None

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    def wake(self) -> None:
        """Look for steps now: a runbook was frozen or a decision committed. Never blocks."""
        self._send(STEPS)

    def wake_chat(self) -> None:
        """Send to chat now: an incident's log grew. Never blocks."""
        self._send(CHAT)

    def _send(self, topic: bytes) -> None:
        # A full pipe already holds wake-ups the worker has yet to read.
        with contextlib.suppress(BlockingIOError):
            os.write(self._writer.fileno(), topic)

    def start(self) -> None:
        self._spawn()
        self._supervisor = threading.Thread(
            target=self._supervise, name="worker-supervisor", daemon=True
        )
        self._supervisor.start()

    def stop(self, timeout: float) -> None:
        """Stop the child: it cancels the steps in hand (up to `timeout` s), then it is ended."""
        with self._lock:
            self._closing.set()
            process = self._process
        if process is not None and process.exitcode is None:
            process.terminate()
        # Only the supervisor waits for the child: two threads reaping one process race,
        # and the loser would think a child that exited is still running.
        if self._supervisor is not None:
            self._supervisor.join(timeout)
            if self._supervisor.is_alive() and process is not None:
                logger.warning(
                    "worker process %s did not stop in %.0f s; killing it", process.pid, timeout
                )
                process.kill()
                self._supervisor.join(5)
        self._reader.close()
        self._writer.close()

    def _spawn(self) -> None:
        """Start a child; the caller holds `_lock` (or nothing else runs yet)."""
        process = self._context.Process(
            target=_child,
            args=(self.settings, self._reader, os.getpid()),
            name="runbook-bot-worker",
        )
        process.start()
        self._process = process
        logger.info("worker process %s started", process.pid)

    def _supervise(self) -> None:
        backoff = BACKOFF_FIRST
        while not self._closing.is_set():
            process = self._process
            assert process is not None
            started = time.monotonic()
            process.join()
            # Exiting 0 or on SIGTERM is a stop that was asked for: SIGTERM to the whole
            # process group (systemd, `timeout`) reaches the worker as serve stops it.
            asked = process.exitcode in (0, -signal.SIGTERM)
            grace = CLEAN_EXIT_GRACE if asked else 0.0
            if self._closing.wait(grace):
                return
            if time.monotonic() - started > HEALTHY_AFTER:
                backoff = BACKOFF_FIRST
            logger.error(
                "worker process %s exited with code %s; starting another in %.0f s "
                "(steps it was running are offered again when their lease runs out)",
                process.pid,
                process.exitcode,
                backoff,
            )
            if self._closing.wait(backoff):
                return
            with self._lock:
                if self._closing.is_set():
                    return
                self._spawn()
            backoff = min(backoff * 2, BACKOFF_MAX)


def _child(settings: Settings, reader: Connection, parent: int) -> None:
    """The child's main: what `runbook-bot worker` runs, woken through the pipe."""
    from bot.cli import common

    stop = threading.Event()
    wakes = {STEPS: threading.Event(), CHAT: threading.Event()}

    def terminate(*_: object) -> None:
        stop.set()
        for event in wakes.values():
            event.set()

    signal.signal(signal.SIGTERM, terminate)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches serve, which stops us
    common.configure_logging(settings)
    listener = threading.Thread(
        target=_listen, args=(reader, parent, stop, wakes), name="wake-pipe", daemon=True
    )
    listener.start()
    common.run_workers(settings, stop, wake=wakes[STEPS], wake_chat=wakes[CHAT])


def _listen(
    reader: Connection, parent: int, stop: threading.Event, wakes: dict[bytes, threading.Event]
) -> None:
    """Turn bytes on the pipe into wake-ups; stop when `serve` is gone."""
    fd = reader.fileno()
    while not stop.is_set():
        readable, _, _ = select.select([fd], [], [], 1.0)
        if readable:
            data = os.read(fd, 4096)
            for topic, event in wakes.items():
                if topic in data:
                    event.set()
        if os.getppid() != parent:
            logger.error("serve (pid %s) is gone; the worker process stops", parent)
            stop.set()
            for event in wakes.values():
                event.set()
            return

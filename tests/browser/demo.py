"""`runbook-bot demo` as a subprocess, the way a person starts it, for the browser tests.

`running()` starts the demo on a port the kernel picks, reads its stdout until the
`console: URL` line and the four `login:` lines, and at the end stops it with SIGTERM and
checks that it exits 0 (the demo contract: Ctrl-C / SIGTERM stops everything cleanly).
Every wait is bounded; a failure message carries the tail of the demo's output.
"""

from __future__ import annotations

import contextlib
import os
import queue
import re
import secrets
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.support.databases import IN_CI

COMMAND = Path(sys.executable).with_name("runbook-bot")
USERS = ("oncall", "second", "admin", "viewer")
START_SECONDS = 60.0
STOP_SECONDS = 30.0
CONSOLE_LINE = re.compile(r"^console: (http://\S+/)$")
LOGIN_LINE = re.compile(r"^login: (\S+) (\S+) \((.*)\)$")


def require(what: str, ok: bool, how: str) -> None:
    """Skip locally, fail in CI, when a part the browser tests need is missing."""
    if ok:
        return
    message = f"{what} ({how})"
    if IN_CI:
        pytest.fail(message + " (CI must run every test)", pytrace=False)
    pytest.skip(message)


def require_demo() -> None:
    try:
        probe = subprocess.run(
            [str(COMMAND), "demo", "--help"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    except FileNotFoundError:
        require(f"{COMMAND} not found", False, "pip install -e '.[test]' in the venv")
        return
    require(
        f"`runbook-bot demo` is not available: {(probe.stderr.strip().splitlines() or [''])[-1]}",
        probe.returncode == 0,
        "the demo command has not landed in bot/cli yet",
    )


@dataclass
class Demo:
    """A running demo: the console's base URL (ending in /) and the printed logins."""

    url: str
    passwords: dict[str, str]
    roles: dict[str, str]
    process: subprocess.Popen[str]
    output: list[str] = field(default_factory=list)
    stderr_path: Path | None = None
    reader: threading.Thread | None = None

    def at(self, path: str) -> str:
        return self.url + path.lstrip("/")

    def tail(self) -> str:
        err = self.stderr_path.read_text(errors="replace") if self.stderr_path else ""
        return (
            "--- demo stdout (tail)\n"
            + "".join(self.output[-30:])
            + "--- demo stderr (tail)\n"
            + "\n".join(err.splitlines()[-40:])
        )


def _pump(stream: subprocess.Popen[str], lines: queue.Queue[str | None], seen: list[str]) -> None:
    assert stream.stdout is not None
    for line in stream.stdout:
        seen.append(line)
        lines.put(line)
    lines.put(None)


def _next_line(demo: Demo, lines: queue.Queue[str | None], deadline: float, wanted: str) -> str:
    try:
        line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
    except queue.Empty:
        pytest.fail(
            f"runbook-bot demo: no {wanted} within {START_SECONDS:.0f}s\n{demo.tail()}",
            pytrace=False,
        )
    if line is None:  # stdout ended: the demo is exiting; its code follows in a moment
        with contextlib.suppress(subprocess.TimeoutExpired):
            demo.process.wait(timeout=10)
        pytest.fail(
            f"runbook-bot demo exited (code {demo.process.returncode}) before printing "
            f"{wanted}\n{demo.tail()}",
            pytrace=False,
        )
    return line.rstrip("\n")


@contextmanager
def running(
    workdir: Path, *, scenario: str = "xid79", delay: str = "3s", password: str | None = None
) -> Iterator[Demo]:
    """Start the demo in `workdir` (its SQLite file stays there for a look after a failure)."""
    password = password or secrets.token_urlsafe(12)
    stderr_path = workdir / "demo-stderr.log"
    argv = [
        str(COMMAND),
        "demo",
        "--host",
        "127.0.0.1",
        "--port",
        "0",
        "--scenario",
        scenario,
        "--delay",
        delay,
        "--dir",
        str(workdir / "demo"),
        f"--password={password}",  # a random one may start with "-"
    ]
    with stderr_path.open("w") as stderr:
        process = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
            env={**os.environ, "NO_COLOR": "1"},
        )
    demo = Demo(url="", passwords={}, roles={}, process=process, stderr_path=stderr_path)
    lines: queue.Queue[str | None] = queue.Queue()
    demo.reader = threading.Thread(target=_pump, args=(process, lines, demo.output), daemon=True)
    demo.reader.start()
    try:
        _read_banner(demo, lines, password)
    except BaseException:
        _halt(demo)  # the failure at hand says what went wrong; no second one on top
        raise
    try:
        yield demo
    finally:
        _stop(demo)


def _read_banner(demo: Demo, lines: queue.Queue[str | None], password: str) -> None:
    """Wait for the `console: URL` line, then the four `login:` lines after it."""
    deadline = time.monotonic() + START_SECONDS
    while not demo.url:
        match = CONSOLE_LINE.match(_next_line(demo, lines, deadline, "`console: URL` line"))
        demo.url = match.group(1) if match else ""
    while set(demo.passwords) != set(USERS):
        line = _next_line(demo, lines, deadline, "`login: USER PASSWORD (ROLE)` lines")
        match = LOGIN_LINE.match(line)
        if match is None:
            pytest.fail(
                f"runbook-bot demo: expected a login line for each of {USERS} right after "
                f"the console line, got {line!r}\n{demo.tail()}",
                pytrace=False,
            )
        user, secret, role = match.groups()
        demo.passwords[user], demo.roles[user] = secret, role
    assert demo.passwords == dict.fromkeys(USERS, password), "--password is for all four"


def _halt(demo: Demo) -> int | None:
    """SIGTERM (then SIGKILL) the demo if it still runs; its exit code, None if it hung."""
    process = demo.process
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
    try:
        code: int | None = process.wait(timeout=STOP_SECONDS)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=10)
        code = None
    if demo.reader is not None:
        demo.reader.join(timeout=10)  # EOF follows the exit; then the pipe can be closed
    if process.stdout is not None and not (demo.reader and demo.reader.is_alive()):
        process.stdout.close()
    return code


def _stop(demo: Demo) -> None:
    """Stop the demo as a person would (SIGTERM) and hold it to a clean exit."""
    died = demo.process.poll()
    if died is not None:
        pytest.fail(
            f"runbook-bot demo died (exit {died}) during the tests\n{demo.tail()}", pytrace=False
        )
    code = _halt(demo)
    if code is None:
        pytest.fail(
            f"runbook-bot demo did not stop within {STOP_SECONDS:.0f}s of SIGTERM\n{demo.tail()}",
            pytrace=False,
        )
    assert code == 0, f"runbook-bot demo exited {code} after SIGTERM\n{demo.tail()}"

"""`runbook-bot demo` as a subprocess, the way a person starts it, for the browser tests.

`running()` starts the demo on a port the kernel picks, reads its stdout until the
`console: URL` line, the four `login:` lines and the rest of its banner (up to "Ctrl-C
stops the demo."), and at the end stops it with SIGTERM and checks that it exits 0 (the
demo contract: Ctrl-C / SIGTERM stops everything cleanly). The demo keeps its files in
`Demo.folder` (the webhook token, the kubeconfig, the BMC password) for tests that read
the bot's API or the simulator. Every wait is bounded; a failure message carries the tail
of the demo's output.
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

from tests.support.ci import skip_or_fail

COMMAND = Path(sys.executable).with_name("runbook-bot")
USERS = ("oncall", "second", "admin", "viewer")
START_SECONDS = 60.0
STOP_SECONDS = 30.0
CONSOLE_LINE = re.compile(r"^console: (http://\S+/)$")
LOGIN_LINE = re.compile(r"^login: (\S+) (\S+) \((.*)\)$")
LAST_LINE = "Ctrl-C stops the demo."
TIME_SCALE = "0.1"
"""The simulator's pace in these demos: a power cycle, a boot and dcgmi diag ten times
faster. The bot's own waits (a node Ready for a minute before it counts) stay real."""


def require(what: str, ok: bool, how: str) -> None:
    """Skip locally, fail in CI, when a part the browser tests need is missing."""
    if ok:
        return
    skip_or_fail(what, install=how)


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
    folder: Path
    banner: list[str] = field(default_factory=list)
    output: list[str] = field(default_factory=list)
    stderr_path: Path | None = None
    reader: threading.Thread | None = None

    def at(self, path: str) -> str:
        return self.url + path.lstrip("/")

    def said(self, prefix: str) -> str:
        """The value of the banner's line `prefix: value`."""
        for line in self.banner:
            if line.startswith(prefix + ": "):
                return line.removeprefix(prefix + ": ")
        raise AssertionError(f"the demo printed no {prefix!r} line: {self.banner}")

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
    workdir: Path,
    *,
    scenario: str = "xid79",
    delay: str = "3s",
    password: str | None = None,
    time_scale: str = TIME_SCALE,
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
        "--time-scale",
        time_scale,
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
    demo = Demo(
        url="",
        passwords={},
        roles={},
        process=process,
        folder=workdir / "demo",
        stderr_path=stderr_path,
    )
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
    """Wait for the `console: URL` line, the four `login:` lines after it, then the rest of
    the banner."""
    deadline = time.monotonic() + START_SECONDS
    while not demo.url:
        match = CONSOLE_LINE.match(_next_line(demo, lines, deadline, "`console: URL` line"))
        demo.url = match.group(1) if match else ""
    demo.banner.append(f"console: {demo.url}")
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
        demo.banner.append(line)
    assert demo.passwords == dict.fromkeys(USERS, password), "--password is for all four"
    while demo.banner[-1] != LAST_LINE:
        demo.banner.append(_next_line(demo, lines, deadline, f"the banner's {LAST_LINE!r}"))


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

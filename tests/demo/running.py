"""`runbook-bot demo` as a real subprocess: started from the repository root, its printed
console URL and logins read, stopped with a signal."""

from __future__ import annotations

import queue
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support import people

REPO = Path(__file__).resolve().parents[2]
RUNBOOK_BOT = Path(sys.executable).parent / "runbook-bot"
PASSWORD = "demo-Pw-2026"
STARTUP = 60.0
"""Seconds the demo may take to print its console line (it takes a few on a laptop)."""
CONSOLE = re.compile(r"^console: (http://127\.0\.0\.1:(\d+)/)$")


@dataclass
class Demo:
    process: subprocess.Popen[str]
    url: str
    lines: list[str]
    stderr: Path
    more: queue.Queue[str] = field(default_factory=queue.Queue)

    def said(self, prefix: str) -> str:
        """The value of the first printed line `prefix: value`."""
        for line in self.lines:
            if line.startswith(prefix + ": "):
                return line.removeprefix(prefix + ": ")
        pytest.fail(f"the demo printed no {prefix!r} line: {self.lines}")

    @property
    def folder(self) -> Path:
        return Path(self.said("database")).parent

    @property
    def token(self) -> str:
        return (self.folder / "webhook-token").read_text().strip()

    def decide_as(self, person: str) -> dict[str, str]:
        """The `Authorization` header of a personal API token of the demo user `person`,
        made in the demo's database as `runbook-bot tokens create` makes it."""
        url = f"sqlite:///{self.said('database')}"
        return people.bearer_at(url, person, roles={person: ["responder"]})

    def client(self) -> httpx.Client:
        return httpx.Client(
            base_url=self.url, timeout=10, headers={"Authorization": f"Bearer {self.token}"}
        )

    def stop(self, sig: int = signal.SIGTERM) -> int:
        self.process.send_signal(sig)
        try:
            return self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            pytest.fail(f"the demo did not stop on {signal.Signals(sig).name} within 30 s")


def _read(stream: Any, into: queue.Queue[str]) -> None:
    for line in stream:
        into.put(line.rstrip("\n"))


@contextmanager
def demo(tmp_path: Path, *args: str) -> Iterator[Demo]:
    """Start `runbook-bot demo --port 0 --password PASSWORD *args`; yield once it printed
    its console line and plan; kill it if the test leaves it running."""
    stderr = tmp_path / "demo.stderr"
    with stderr.open("w") as errors:
        process = subprocess.Popen(
            [str(RUNBOOK_BOT), "demo", "--port", "0", "--password", PASSWORD, *args],
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=errors,
            text=True,
        )
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=_read, args=(process.stdout, lines), daemon=True).start()
    try:
        printed: list[str] = []
        deadline = time.monotonic() + STARTUP
        while not printed or printed[-1] != "Ctrl-C stops the demo.":
            try:
                printed.append(lines.get(timeout=max(deadline - time.monotonic(), 0.01)))
            except queue.Empty:
                pytest.fail(
                    f"the demo printed {printed} in {STARTUP:.0f} s; stderr:\n"
                    + stderr.read_text()[-3000:]
                )
        match = CONSOLE.match(printed[0])
        assert match, printed
        yield Demo(process, match.group(1), printed, stderr, lines)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=10)
        if process.stdout is not None:
            process.stdout.close()

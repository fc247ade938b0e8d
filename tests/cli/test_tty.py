"""The real `runbook-bot` process on a real terminal (a pseudo-terminal of a set size)
and on a pipe: colour and the terminal's width only on the terminal, with no COLUMNS or
FORCE_COLOR to tell it."""

from __future__ import annotations

import fcntl
import os
import pty
import struct
import subprocess
import sys
import termios
from pathlib import Path

import pytest

from tests.cli.conftest import ANSI, plain

ROOT = Path(__file__).resolve().parents[2]


def _environment() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "NO_COLOR")}
    env.pop("FORCE_COLOR", None)
    env.pop("TTY_COMPATIBLE", None)
    env.update(TERM="xterm-256color", PYTHONPATH=str(ROOT))
    return env


def _on_a_terminal(columns: int, *argv: str) -> str:
    """What the command wrote to a terminal `columns` wide."""
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
    process = subprocess.Popen(
        [sys.executable, "-m", "bot.cli", *argv],
        stdin=follower,
        stdout=follower,
        stderr=follower,
        env=_environment(),
        close_fds=True,
    )
    os.close(follower)
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # EIO: the command exited and the terminal closed
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(leader)
    assert process.wait(timeout=60) == 0
    return b"".join(chunks).decode().replace("\r\n", "\n")


@pytest.mark.parametrize("columns", [80, 40])
def test_on_a_terminal_the_table_is_as_wide_as_it_and_coloured(columns: int) -> None:
    piped = subprocess.run(
        [sys.executable, "-m", "bot.cli", "actions"],
        capture_output=True,
        text=True,
        env=_environment(),
        timeout=60,
        check=True,
    ).stdout

    shown = _on_a_terminal(columns, "actions")

    assert ANSI.search(shown), "bold headers on a terminal"
    assert not ANSI.search(piped)
    assert max(len(line) for line in plain(shown).splitlines()) <= columns
    assert max(len(line) for line in piped.splitlines()) > 100  # a pipe: a row a line
    assert set(plain(shown).split()) >= {"k8s.drain", "bmc.power_cycle", "disruptive"}
    assert _on_a_terminal(columns, "--no-color", "actions").count("\x1b[3") == 0  # no colours

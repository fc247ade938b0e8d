"""`runbook-bot console hash-password`: a password read from a pipe (or twice from a
terminal) becomes the hash a console user's `password_hash` setting holds."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest

from bot.chat.console.passwords import verify
from bot.console_settings import ConsoleUser

RUNBOOK_BOT = Path(sys.executable).parent / "runbook-bot"


def _hash(stdin: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(RUNBOOK_BOT), "console", "hash-password"],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_a_piped_password_is_printed_as_a_hash_the_console_accepts() -> None:
    done = _hash("correct horse battery\n")

    assert (done.returncode, done.stderr) == (0, "")
    printed = done.stdout.strip()
    assert verify("correct horse battery", printed)
    assert not verify("correct horse", printed)
    assert "correct horse" not in done.stdout
    assert ConsoleUser(password_hash=printed).password_hash == printed


def test_an_empty_password_is_refused() -> None:
    done = _hash("\n")

    assert (done.returncode, done.stdout) == (2, "")
    assert "the password is empty" in done.stderr


@pytest.mark.timeout(60)
def test_on_a_terminal_the_password_is_asked_twice_and_must_match() -> None:
    def typed(first: str, second: str) -> tuple[int, str]:
        pid, fd = pty.fork()
        if pid == 0:  # the child: runbook-bot on the terminal
            os.execv(str(RUNBOOK_BOT), [str(RUNBOOK_BOT), "console", "hash-password"])
        output = b""
        for answer in (first, second):
            while b": " not in output.rsplit(b"\n", 1)[-1]:
                output += os.read(fd, 1024)
            os.write(fd, answer.encode() + b"\n")
            output += b"\n"
        while True:
            try:
                chunk = os.read(fd, 1024)
            except OSError:  # the child closed the terminal
                break
            if not chunk:
                break
            output += chunk
        _, status = os.waitpid(pid, 0)
        return os.waitstatus_to_exitcode(status), output.decode()

    code, output = typed("s3cret-pw", "s3cret-pw")
    assert code == 0
    assert "Password: " in output and "Again: " in output
    assert "s3cret-pw" not in output  # getpass does not echo
    (line,) = [x for x in output.splitlines() if x.startswith("scrypt$")]
    assert verify("s3cret-pw", line.strip())

    code, output = typed("s3cret-pw", "other-pw")
    assert code == 2
    assert "the two passwords differ" in output

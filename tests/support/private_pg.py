"""A private PostgreSQL cluster for tests that stop and restart the server itself.

The machine's PostgreSQL on 127.0.0.1:5432 is shared by every test and session, so it is
never restarted. `running()` initdb's a throw-away cluster (as the `postgres` user when run
as root: initdb refuses root), serves it on a free loopback port with fsync off, and lets a
test `stop()`, `start()` and `restart()` it with Debian's pg_ctl. Every command is bounded.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest

from tests.support.alertmanager import free_port
from tests.support.ci import skip_or_fail

COMMAND_SECONDS = 60


def _bindir() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"))
    return Path(found[-1]).parent if found else None


def require() -> Path:
    """Debian's PostgreSQL binaries; skip locally, fail in CI, when they are missing."""
    bindir = _bindir()
    if bindir is not None and (os.geteuid() != 0 or shutil.which("runuser")):
        return bindir
    skip_or_fail("PostgreSQL server binaries not found", install="apt-get install postgresql")


@dataclass
class PrivatePostgres:
    bindir: Path
    datadir: Path
    port: int
    log: Path

    def _run(self, *argv: str, check: bool = True) -> None:
        command = [str(self.bindir / argv[0]), *argv[1:]]
        if os.geteuid() == 0:
            command = ["runuser", "-u", "postgres", "--", *command]
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=COMMAND_SECONDS, check=False
        )
        if check and done.returncode != 0:
            pytest.fail(
                f"{' '.join(argv[:2])} failed ({done.returncode}): {done.stderr.strip()}\n"
                + self.log_tail(),
                pytrace=False,
            )

    def log_tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no server log)"

    def start(self) -> None:
        options = (
            f"-p {self.port} -c listen_addresses=127.0.0.1 -k {self.datadir.parent} "
            "-c fsync=off -c full_page_writes=off -c max_connections=200"
        )
        self._run(
            "pg_ctl", "-D", str(self.datadir), "-l", str(self.log), "-o", options, "-w", "start"
        )

    def stop(self, mode: str = "fast") -> None:
        """`fast` disconnects every client and shuts down cleanly; `immediate` is a crash."""
        self._run("pg_ctl", "-D", str(self.datadir), "-m", mode, "-w", "stop")

    def url(self, name: str = "postgres") -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/{name}"

    def create_database(self, name: str) -> str:
        admin = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"
        with psycopg.connect(admin, autocommit=True, connect_timeout=5) as conn:
            conn.execute(f"CREATE DATABASE {name}")  # type: ignore[arg-type]
        return self.url(name)


@contextmanager
def running() -> Iterator[PrivatePostgres]:
    """initdb, start; always stop and remove the cluster afterwards."""
    bindir = require()
    # Not under pytest's tmp_path: its directories are 0700 root's, out of postgres' reach.
    root = Path(tempfile.mkdtemp(prefix="rbb-pg-"))
    if os.geteuid() == 0:
        entry = pwd.getpwnam("postgres")
        os.chown(root, entry.pw_uid, entry.pw_gid)
    server = PrivatePostgres(bindir, root / "data", free_port(), root / "server.log")
    started = False
    try:
        server._run("initdb", "-D", str(server.datadir), "-A", "trust", "-U", "postgres",
                    "--no-sync", "-E", "UTF8")  # fmt: skip
        server.start()
        started = True
        yield server
    finally:
        if started:  # it may be stopped already (by the test): then this does nothing
            server._run("pg_ctl", "-D", str(server.datadir), "-m", "immediate", "stop", check=False)
        shutil.rmtree(root, ignore_errors=True)

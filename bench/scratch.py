"""The scratch PostgreSQL databases a benchmark measures on: refused unless their names end
in `_bench`, dropped and created before the run, dropped after it, and the last lines of
the processes' log printed whatever happened.

    result = scratch.measured([url], lambda log: measure(args, env, log), FAILURES)
    return 1 if result is None else report(args, result)
"""

from __future__ import annotations

import contextlib
import sys
import tempfile
from collections.abc import Callable, Sequence
from typing import IO, TypeVar

import psycopg
from psycopg import sql
from sqlalchemy.engine import make_url

T = TypeVar("T")
SUFFIX = "_bench"


def refused(url: str) -> bool:
    """True (and why printed) when `url` names a database a benchmark must not recreate."""
    if (make_url(url).database or "").endswith(SUFFIX):
        return False
    print(f"refusing to drop and recreate {url}: its name must end in {SUFFIX}", file=sys.stderr)
    return True


def admin(url: str, template: str) -> None:
    """Run `template` (`{}`: the database of `url`, quoted) on the server's `postgres`
    database, outside a transaction (CREATE/DROP DATABASE)."""
    target = make_url(url).set(drivername="postgresql", database="postgres")
    with psycopg.connect(target.render_as_string(hide_password=False), connect_timeout=5) as conn:
        conn.autocommit = True
        conn.execute(sql.SQL(template).format(sql.Identifier(make_url(url).database or "")))


def measured(
    urls: Sequence[str],
    measure: Callable[[IO[bytes]], T],
    failures: tuple[type[BaseException], ...],
    *,
    label: str = "log",
) -> T | None:
    """`measure(log)` on fresh databases `urls`; None, with the failure printed, when it
    raised one of `failures`. The log's last 10 lines are printed either way (`label:`)
    and the databases dropped."""
    with tempfile.TemporaryFile() as log:
        try:
            for url in urls:
                admin(url, "DROP DATABASE IF EXISTS {} WITH (FORCE)")
                admin(url, "CREATE DATABASE {}")
            return measure(log)
        except failures as exc:
            print(f"benchmark failed: {exc}", file=sys.stderr)
            return None
        finally:
            log.seek(0)
            for line in log.read().decode(errors="replace").splitlines()[-10:]:
                print(f"{label}: {line}", file=sys.stderr)
            for url in urls:
                with contextlib.suppress(*failures, psycopg.Error):
                    admin(url, "DROP DATABASE IF EXISTS {} WITH (FORCE)")

"""Run a benchmark on each backend: a SQLite file, then PostgreSQL at 127.0.0.1:5432 in a
database of its own, created before and dropped after (skipped, saying why, when
PostgreSQL does not answer)."""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path

from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url


def on_each(pg_url: str, run: Callable[[str, str], bool]) -> bool:
    """`run(name, database_url)` on SQLite, then on PostgreSQL; whether all passed."""
    with tempfile.TemporaryDirectory() as tmp:
        ok = run("sqlite", f"sqlite:///{Path(tmp) / 'bench.db'}")
    url = make_url(pg_url)
    admin = create_engine(url.set(database="postgres"), isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{url.database}" WITH (FORCE)'))
            conn.execute(text(f'CREATE DATABASE "{url.database}"'))
    except Exception as exc:  # no PostgreSQL here: SQLite's figures stand alone
        print(f"postgresql  skipped: {exc.__class__.__name__}: {str(exc).splitlines()[0]}")
        return ok
    try:
        return run("postgresql", pg_url) and ok
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{url.database}" WITH (FORCE)'))
        admin.dispose()

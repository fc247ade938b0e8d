"""The database: engine, sessions, the declarative base and UTC timestamps.

One `Database` per process wraps the SQLAlchemy engine and session factory. SQLite (the
embedded default) runs in WAL mode with `synchronous=FULL` (an alert answered 200 survives
a power loss) and takes its write lock at BEGIN, so concurrent writers queue on the busy
timeout instead of failing half-way; PostgreSQL gets a pool with a connect timeout and
recycling, and every session a `lock_timeout` and a `statement_timeout`, so a table locked
by someone else, or a statement stuck behind it, fails in seconds instead of hanging the
request. `transaction()` is the unit of work; driver errors that mean "the database is not
there, locked, or too slow" become `StorageUnavailable`, which the web layer answers with
503 so Alertmanager retries.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Any, Literal, TypeVar

from sqlalchemy import (
    JSON,
    ColumnElement,
    DateTime,
    Engine,
    String,
    Table,
    TextClause,
    create_engine,
    event,
    exc,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.engine import Dialect
from sqlalchemy.orm import DeclarativeBase, Session, sessionmaker
from sqlalchemy.types import TypeDecorator

from bot.clock import as_utc
from bot.errors import StorageUnavailable

JsonType = JSON().with_variant(JSONB(), "postgresql")

Synchronous = Literal["full", "normal"]
"""SQLite's `synchronous` pragma in WAL mode: `full` syncs the WAL at every commit (a
committed alert survives a power loss), `normal` only at checkpoints (faster; the last
commits before a power loss may be lost)."""

READY_LOCK_WAIT = timedelta(seconds=1)
"""How long the readiness probe waits for the tables' write locks (`probe_writes`)."""

LOCK_NOT_AVAILABLE, QUERY_CANCELED = "55P03", "57014"
"""PostgreSQL's SQLSTATEs for lock_timeout and statement_timeout."""


class UTCDateTime(TypeDecorator[datetime]):
    """A timestamp that is always timezone-aware UTC in Python, whatever the backend."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime given to the database; use an aware UTC time")
        value = value.astimezone(UTC)
        # SQLite has no time zones: store naive UTC, re-attach UTC on the way out.
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        return None if value is None else as_utc(value)


E = TypeVar("E", bound=StrEnum)


class EnumText(TypeDecorator[E]):
    """A `StrEnum` stored as its value in a plain string column: the database holds the
    same strings it always did (no migration, no database enum type), Python gets the enum
    back, and a string that is no member is refused before it is written."""

    impl = String
    cache_ok = True

    def __init__(self, enum: type[E], length: int) -> None:
        super().__init__(length)
        self.enum = enum

    def process_bind_param(self, value: E | str | None, dialect: Dialect) -> str | None:
        return None if value is None else self.enum(value).value

    def process_result_value(self, value: str | None, dialect: Dialect) -> E | None:
        return None if value is None else self.enum(value)


class Base(DeclarativeBase):
    type_annotation_map = {datetime: UTCDateTime(), dict[str, Any]: JsonType}


class Database:
    """The engine and session factory for one database URL."""

    def __init__(
        self,
        url: str,
        *,
        connect_timeout: timedelta = timedelta(seconds=5),
        lock_timeout: timedelta = timedelta(seconds=3),
        statement_timeout: timedelta = timedelta(seconds=5),
        synchronous: Synchronous = "full",
        log_key: bytes | None = None,
    ) -> None:
        """`lock_timeout` and `statement_timeout` bound each statement on PostgreSQL;
        `synchronous` is SQLite's pragma; `log_key`, the incident log's HMAC key, rides
        in every session's `info` (`bot.incidents.log.key_of`)."""
        self.url = url
        self.lock_timeout, self.statement_timeout = lock_timeout, statement_timeout
        self.engine = _make_engine(url, connect_timeout, synchronous)
        if self.engine.dialect.name == "postgresql":
            _postgres_timeouts(self.engine, lock_timeout, statement_timeout)
        self.log_key = log_key
        info = {"log_key": log_key} if log_key is not None else {}
        self.sessions = sessionmaker(self.engine, expire_on_commit=False, info=info)
        # Reads see one snapshot: under READ COMMITTED each statement sees the latest
        # commit, so an incident read before an ingest committed and its alerts read after
        # would disagree. SQLite's reads already serialize at BEGIN.
        snapshot = (
            self.engine.execution_options(isolation_level="REPEATABLE READ")
            if self.engine.dialect.name == "postgresql"
            else self.engine
        )
        self._reads = sessionmaker(snapshot, expire_on_commit=False, info=info)

    @property
    def is_postgres(self) -> bool:
        return self.engine.dialect.name == "postgresql"

    @contextmanager
    def transaction(self) -> Iterator[Session]:
        """A session inside one transaction: committed on success, rolled back on error."""
        with storage_errors(self.engine), self.sessions.begin() as session:
            yield session

    @contextmanager
    def session(self) -> Iterator[Session]:
        """A session for reads, all from one consistent snapshot of the database."""
        with storage_errors(self.engine), self._reads() as session:
            yield session

    def ping(self) -> None:
        with storage_errors(self.engine), self.engine.connect() as conn:
            conn.exec_driver_sql("SELECT 1")

    def probe_writes(self) -> None:
        """Raise `StorageUnavailable` unless every table could take a write now.

        On PostgreSQL, take each table's ROW EXCLUSIVE lock (the one INSERT and UPDATE
        take; it conflicts only with SHARE and stronger: a `LOCK TABLE`, an ALTER, a
        CREATE INDEX), waiting at most `READY_LOCK_WAIT`, then roll back: no row is
        written. SQLite's one writer queues on the busy timeout, which requests see too."""
        if self.engine.dialect.name != "postgresql":
            return
        names = ", ".join(f'"{table.name}"' for table in Base.metadata.sorted_tables)
        wait = max(1, int(READY_LOCK_WAIT.total_seconds() * 1000))
        with storage_errors(self.engine), self.engine.connect() as conn:
            probe = conn.begin()
            try:
                conn.exec_driver_sql(f"SET LOCAL lock_timeout = {wait}")
                conn.exec_driver_sql(f"LOCK TABLE {names} IN ROW EXCLUSIVE MODE")
            finally:
                probe.rollback()

    def dispose(self) -> None:
        self.engine.dispose()

    def describe(self) -> str:
        """The URL without its password, for messages."""
        return self.engine.url.render_as_string(hide_password=True)


@contextmanager
def storage_errors(engine: Engine) -> Iterator[None]:
    """Translate 'database unreachable / locked / too slow' driver errors into
    `StorageUnavailable` (psycopg's LockNotAvailable and QueryCanceled are operational
    errors: lock_timeout and statement_timeout)."""
    try:
        yield
    except (exc.OperationalError, exc.InterfaceError, exc.TimeoutError) as err:
        where = engine.url.render_as_string(hide_password=True)
        reason = str(getattr(err, "orig", None) or err).strip().splitlines()[0]
        state = getattr(getattr(err, "orig", None), "sqlstate", None)
        if state == LOCK_NOT_AVAILABLE:
            raise StorageUnavailable(
                f"database {where} is busy: a table this request writes is locked by another "
                f"session ({reason}); retry later, and look in pg_locks for the session that "
                "holds the lock"
            ) from err
        if state == QUERY_CANCELED:
            raise StorageUnavailable(
                f"database {where} is too slow: a statement ran past statement_timeout "
                f"({reason}); retry later, and check the database's load and locks"
            ) from err
        raise StorageUnavailable(
            f"database {where} is unavailable ({reason}); check that it is running and "
            "reachable, then retry"
        ) from err


def _postgres_timeouts(engine: Engine, lock: timedelta, statement: timedelta) -> None:
    """Set both timeouts on every new PostgreSQL session (a SET, so it also works through
    a session-pooling proxy that refuses startup options)."""
    settings = {
        "lock_timeout": int(lock.total_seconds() * 1000),
        "statement_timeout": int(statement.total_seconds() * 1000),
    }

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        with dbapi_conn.cursor() as cursor:
            for name, millis in settings.items():
                cursor.execute(f"SET {name} = {millis}")
        dbapi_conn.commit()  # psycopg opened a transaction for the SETs


def _make_engine(url: str, connect_timeout: timedelta, synchronous: Synchronous) -> Engine:
    seconds = max(1, int(connect_timeout.total_seconds()))
    serializer = {
        "json_serializer": lambda obj: json.dumps(obj, ensure_ascii=False),
    }
    if url.startswith("sqlite"):
        engine = create_engine(
            url,
            connect_args={"timeout": seconds, "check_same_thread": False},
            **serializer,
        )
        _sqlite_pragmas(engine, seconds, synchronous)
        return engine
    return create_engine(
        url,
        # No ping per checkout (a round trip per webhook): a connection that died fails
        # its one request with 503, which Alertmanager retries, and SQLAlchemy then
        # replaces every pooled connection older than the failure.
        pool_size=10,
        max_overflow=10,
        pool_recycle=1800,
        pool_timeout=seconds,
        connect_args={"connect_timeout": seconds},
        **serializer,
    )


def _sqlite_pragmas(engine: Engine, busy_seconds: int, synchronous: Synchronous) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        # Let SQLAlchemy, not pysqlite, decide when transactions begin (see "begin" below).
        dbapi_conn.isolation_level = None
        cursor = dbapi_conn.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute(f"PRAGMA synchronous={synchronous.upper()}")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute(f"PRAGMA busy_timeout={busy_seconds * 1000}")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Any) -> None:
        # Take the write lock up front: a deferred transaction that reads then writes can
        # fail with "database is locked" half-way; an immediate one waits its turn.
        conn.exec_driver_sql("BEGIN IMMEDIATE")


def insert_new(
    session: Session,
    table: Table,
    values: dict[str, Any],
    *,
    index_elements: list[str],
    index_where: ColumnElement[bool] | TextClause | None = None,
) -> bool:
    """INSERT ... ON CONFLICT DO NOTHING on PostgreSQL and SQLite; whether a row was added."""
    if session.get_bind().dialect.name == "postgresql":
        stmt: Any = postgresql.insert(table).values(values)
    else:
        stmt = sqlite.insert(table).values(values)
    stmt = stmt.on_conflict_do_nothing(index_elements=index_elements, index_where=index_where)
    # RETURNING, not rowcount: psycopg reports -1 for this statement.
    added = session.execute(stmt.returning(table.c[index_elements[0]])).first()
    return added is not None

"""The schema, changed only through Alembic: upgrade, current revision, pending check;
and what the runtime database role may do with it (`grant_runtime`).

The migration scripts live in `alembic/` at the repository root; an installed wheel
carries them as `bot/_alembic`. So does `runtime_grants.sql`, the one statement of the
runtime role's privileges.
"""

from __future__ import annotations

from pathlib import Path

from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection

from alembic import command
from bot.db import Database, storage_errors
from bot.errors import ConfigInvalid, MigrationsPending

GRANTS_FILE = "runtime_grants.sql"


def script_location() -> Path:
    here = Path(__file__).resolve().parent
    for candidate in (here / "_alembic", here.parent / "alembic"):
        if (candidate / "env.py").is_file():
            return candidate
    raise FileNotFoundError("alembic migration scripts not found next to the bot package")


def _config() -> Config:
    config = Config()
    config.set_main_option("script_location", str(script_location()))
    return config


def head() -> str:
    revision = ScriptDirectory.from_config(_config()).get_current_head()
    assert revision is not None, "the alembic directory has no revisions"
    return revision


def current(db: Database) -> str | None:
    with storage_errors(db.engine), db.engine.connect() as conn:
        return MigrationContext.configure(conn).get_current_revision()


def upgrade(db: Database, revision: str = "head") -> None:
    config = _config()
    with db.engine.begin() as conn:
        _unbounded(conn)
        config.attributes["connection"] = conn
        command.upgrade(config, revision)


def downgrade(db: Database, revision: str) -> None:
    """Back to `revision`: each migration's downgrade restores the older layout and data."""
    config = _config()
    with db.engine.begin() as conn:
        _unbounded(conn)
        config.attributes["connection"] = conn
        command.downgrade(config, revision)


def _unbounded(conn: Connection) -> None:
    """A migration may rewrite a big table and must wait for its locks: the request
    path's timeouts do not apply to it (its Job's deadline does)."""
    if conn.dialect.name == "postgresql":
        conn.exec_driver_sql("SET LOCAL lock_timeout = 0")
        conn.exec_driver_sql("SET LOCAL statement_timeout = 0")


def check(db: Database) -> None:
    """Raise `MigrationsPending` unless the database is at the code's head revision."""
    have, want = current(db), head()
    if have != want:
        raise MigrationsPending(
            f"database {db.describe()} is at schema revision {have or 'none (empty)'}, "
            f"this version needs {want}; run `runbook-bot db upgrade` first"
        )


def owns_log(db: Database) -> bool:
    """Whether the role `db` connects as owns `incident_log` (PostgreSQL): then it could
    disable the log's triggers, and the database roles are not set up apart."""
    if not db.is_postgres:
        return False
    with storage_errors(db.engine), db.engine.connect() as conn:
        owner = conn.exec_driver_sql(
            "SELECT tableowner = current_user FROM pg_tables "
            "WHERE schemaname = current_schema() AND tablename = 'incident_log'"
        ).scalar()
    return bool(owner)


def grant_runtime(db: Database, role: str) -> None:
    """Give `role` exactly what `runtime_grants.sql` says, on the schema `db` migrates
    (PostgreSQL; connected as the owner). Refuse a runtime role that owns the log: an
    owner can disable its triggers, whatever it is granted."""
    quote = db.engine.dialect.identifier_preparer.quote
    text = (script_location() / GRANTS_FILE).read_text(encoding="utf-8")
    with storage_errors(db.engine), db.engine.begin() as conn:
        schema = conn.exec_driver_sql("SELECT current_schema()").scalar_one()
        owner = conn.exec_driver_sql(
            "SELECT tableowner FROM pg_tables WHERE schemaname = current_schema() "
            "AND tablename = 'incident_log'"
        ).scalar()
        if owner == role:
            raise ConfigInvalid(
                f"database role {role} (the user of database_url) owns the tables, so it "
                "could disable the incident log's triggers; make the migration role the "
                f"owner (as a superuser: REASSIGN OWNED BY {role} TO <owner role>), then "
                "run `runbook-bot db upgrade` again (docs/security.md)"
            )
        statements = _statements(text.format(schema=quote(schema), role=quote(role)))
        for statement in statements:
            conn.exec_driver_sql(statement)


def _statements(text: str) -> list[str]:
    lines = [line for line in text.splitlines() if not line.lstrip().startswith("--")]
    return [part.strip() for part in "\n".join(lines).split(";") if part.strip()]

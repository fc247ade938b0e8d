"""Read what the database holds, for assertions about effects."""

from __future__ import annotations

from sqlalchemy import func, select

from bot.db import Database
from bot.incidents import log
from bot.incidents.models import Alert, Incident, LogEntry


def counts(db: Database) -> dict[str, int]:
    with db.session() as session:
        return {
            "incidents": session.scalar(select(func.count()).select_from(Incident)) or 0,
            "alerts": session.scalar(select(func.count()).select_from(Alert)) or 0,
            "log": session.scalar(select(func.count()).select_from(LogEntry)) or 0,
        }


def log_types(db: Database, number: int) -> list[str]:
    with db.session() as session:
        return [entry.type for entry in log.entries(session, number)]


def verifies(db: Database, number: int) -> bool:
    with db.session() as session:
        incident = session.get(Incident, number)
        assert incident is not None
        return log.verify(incident, log.entries(session, number)) is None

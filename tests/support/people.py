"""Personal API tokens for tests, made through the people room's own service (what
`runbook-bot tokens create` does), for the database a server under test reads."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from bot.config import Settings, load_settings
from bot.db import Database
from bot.people import Directory, tokens


def token(db: Database, settings: Settings, person: str, name: str = "test") -> str:
    """A new token deciding as `person` (who must be in `settings`)."""
    with db.transaction() as session:
        _, secret = tokens.create(
            session,
            directory=Directory(settings),
            person=person,
            name=name,
            now=datetime.now(UTC),
        )
    return secret


def bearer(db: Database, settings: Settings, person: str) -> dict[str, str]:
    """The `Authorization` header of a new token of `person`."""
    return {"Authorization": f"Bearer {token(db, settings, person)}"}


def bearer_at(url: str, person: str, **settings: Any) -> dict[str, str]:
    """`bearer` for the database at `url` (a bot in another process reads it), with the
    settings that name `person` (`roles`, `people`)."""
    database = Database(url)
    try:
        return bearer(database, load_settings(database_url=url, **settings), person)
    finally:
        database.dispose()

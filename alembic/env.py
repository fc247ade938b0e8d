"""Alembic environment: runs migrations on the connection runbook-bot hands over."""

from __future__ import annotations

from alembic import context
from bot.chat import models as chat_models  # noqa: F401
from bot.db import Base
from bot.incidents import models  # noqa: F401  (registers the tables)
from bot.people import models as people_models  # noqa: F401
from bot.runbooks import models as runbook_models  # noqa: F401

connection = context.config.attributes.get("connection")
if connection is None:
    raise RuntimeError("run migrations through `runbook-bot db upgrade`")

context.configure(connection=connection, target_metadata=Base.metadata)
with context.begin_transaction():
    context.run_migrations()

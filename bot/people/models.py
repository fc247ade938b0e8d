"""ORM classes of the people room: personal API tokens.

A token is shown once, when it is made; the table holds only the SHA-256 of its secret (32
random bytes: a fast hash is enough, there is nothing to guess), so reading the database
gives no token. A revoked token stays, with when it was revoked, for the record.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from bot.db import Base


class ApiToken(Base):
    __tablename__ = "api_tokens"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    person: Mapped[str] = mapped_column(String(64), index=True)
    name: Mapped[str] = mapped_column(String(100))
    secret_hash: Mapped[str] = mapped_column(String(64), unique=True)
    created_at: Mapped[datetime]
    revoked_at: Mapped[datetime | None]

"""Personal API tokens: made for one person, shown once, stored as a hash, revocable.

A token is `rbt_` and 43 URL-safe characters (32 random bytes). The table keeps the
SHA-256 of the whole token; a request's token is hashed, looked up by that hash and
compared again in constant time. The header is bounded before anything is hashed. A
token whose person has left `people` (or the older `roles`/console users) decides
nothing.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import secrets
from collections.abc import Mapping
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from bot.errors import BotError, PersonUnknown, Unauthorized
from bot.people.directory import Decider, Directory
from bot.people.models import ApiToken

logger = logging.getLogger(__name__)

PREFIX = "rbt_"
MAX_HEADER = 256
"""An `Authorization` header longer than this is refused unread (a token is 47 bytes)."""
NAME = 100
ASK = (
    "make one with `runbook-bot tokens create --person YOU` and send "
    "`Authorization: Bearer rbt_...`"
)


def _hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def create(
    session: Session, *, directory: Directory, person: str, name: str, now: datetime
) -> tuple[ApiToken, str]:
    """A new token for `person` (who must be known) and its secret, the one time it is
    shown."""
    if directory.get(person) is None:
        known = ", ".join(sorted(p.id for p in directory.people)) or "nobody: add people first"
        raise PersonUnknown(f"no person {person!r} in the settings; known: {known}")
    name = name.strip()
    if not name or len(name) > NAME:
        raise BotError(f"name the token (1 to {NAME} characters), e.g. --name laptop")
    secret = PREFIX + secrets.token_urlsafe(32)
    row = ApiToken(person=person, name=name, secret_hash=_hash(secret), created_at=now)
    session.add(row)
    session.flush()
    return row, secret


def listed(session: Session) -> list[ApiToken]:
    return list(session.scalars(select(ApiToken).order_by(ApiToken.id)))


def revoke(session: Session, *, token_id: int, now: datetime) -> ApiToken:
    """Revoke token `token_id`; revoking twice keeps the first time."""
    row = session.get(ApiToken, token_id, with_for_update=True)
    if row is None:
        raise BotError(f"no token #{token_id}; `runbook-bot tokens list` shows them")
    if row.revoked_at is None:
        row.revoked_at = now
    return row


def bearer(headers: Mapping[str, str]) -> str:
    """The personal token a request carries; Unauthorized when there is none."""
    header = headers.get("authorization", "")
    if len(header) > MAX_HEADER:
        raise Unauthorized(f"the Authorization header is longer than {MAX_HEADER} bytes; {ASK}")
    scheme, _, credentials = header.partition(" ")
    token = credentials.strip()
    if scheme.lower() != "bearer" or not token.startswith(PREFIX):
        raise Unauthorized(f"deciding needs a personal API token: {ASK}")
    return token


def authenticate(session: Session, *, directory: Directory, token: str) -> Decider:
    """Who `token` (from `bearer`) decides as; Unauthorized for an unknown, revoked or
    orphaned token (one answer for all: which it was is logged, not told)."""
    digest = _hash(token)
    row = session.scalars(select(ApiToken).where(ApiToken.secret_hash == digest)).first()
    valid = row is not None and hmac.compare_digest(row.secret_hash, digest)
    if row is None or not valid:
        logger.warning("refused an unknown API token")
        raise Unauthorized(f"that API token is unknown or revoked: {ASK}")
    if row.revoked_at is not None:
        logger.warning("refused API token #%d (%s's): revoked", row.id, row.person)
        raise Unauthorized(f"that API token is unknown or revoked: {ASK}")
    person = directory.get(row.person)
    if person is None:
        logger.warning("refused API token #%d: %s is no longer in the settings", row.id, row.person)
        raise Unauthorized(
            f"that API token belongs to {row.person}, who is no longer in the settings "
            "(`people`); an admin adds them back or revokes the token"
        )
    return Decider(person, "api", f"token {row.id} ({row.name})")

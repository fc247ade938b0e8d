"""`bot.chat.Chat` for the web console, and the chat that reaches both surfaces.

The console has no sender: a page or a message for a console user is an `OutboxMessage`
row in channel `console`, written already `sent`, and the console shows it to that user
(the `#paged` banner, the messages on the incident list). It is written in the caller's
transaction, so a page exists if and only if what decided it commits.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import or_, select
from sqlalchemy.orm import Session

from bot.chat import Chat
from bot.chat.models import OutboxMessage
from bot.chat.outbox import MESSAGE, PAGE, PRIORITY
from bot.incidents.models import ACTIVE_STATUSES, Incident

CHANNEL = "console"
EVERYONE = "*"
"""The `dm` of a message to everyone (the weekly digest)."""


class ConsoleChat:
    """Pages and messages stored for the console to show."""

    def page(self, session: Session, incident: int, person: str, text: str, now: datetime) -> None:
        _store(session, PAGE, {"who": person, "text": text}, incident, now)

    def tell(self, session: Session, person: str, text: str, now: datetime) -> None:
        _store(session, MESSAGE, {"text": text, "dm": person}, None, now)

    def post(self, session: Session, text: str, now: datetime) -> None:
        _store(session, MESSAGE, {"text": text, "dm": EVERYONE}, None, now)


class BothChats:
    """Slack ids (`slack:U…`) through Slack, everyone else through the console; posts to
    the incidents channel go to both."""

    def __init__(self, slack: Chat | None, console: Chat) -> None:
        self.slack = slack
        self.console = console

    def _for(self, person: str) -> Chat | None:
        return self.slack if person.startswith("slack:") else self.console

    def page(self, session: Session, incident: int, person: str, text: str, now: datetime) -> None:
        chat = self._for(person)
        if chat is not None:
            chat.page(session, incident, person, text, now)

    def tell(self, session: Session, person: str, text: str, now: datetime) -> None:
        chat = self._for(person)
        if chat is not None:
            chat.tell(session, person, text, now)

    def post(self, session: Session, text: str, now: datetime) -> None:
        if self.slack is not None:
            self.slack.post(session, text, now)
        self.console.post(session, text, now)


@dataclass(frozen=True)
class Paged:
    """An incident a console user was paged to: the banner's one line."""

    incident: Incident
    text: str
    """The latest page's text (its title, severity and why: shown on demand, not twice)."""
    at: datetime
    """When that page was stored."""


def paged(session: Session, person: str) -> list[Paged]:
    """Active incidents `person` was paged to and nobody acknowledged since (a first
    approver paging the second line now pages after the acknowledgment), newest first,
    each with its latest page."""
    stmt = (
        select(OutboxMessage, Incident)
        .join(Incident, Incident.number == OutboxMessage.incident_number)
        .where(
            OutboxMessage.channel == CHANNEL,
            OutboxMessage.kind == PAGE,
            Incident.status.in_(ACTIVE_STATUSES),
            or_(
                Incident.acknowledged_at.is_(None),
                OutboxMessage.created_at > Incident.acknowledged_at,
            ),
        )
        .order_by(OutboxMessage.id.desc())
    )
    found: dict[int, Paged] = {}
    for row, incident in session.execute(stmt):
        if row.payload.get("who") == person and incident.number not in found:
            text = str(row.payload.get("text", ""))
            found[incident.number] = Paged(incident, text, row.created_at)
    return sorted(found.values(), key=lambda one: -one.incident.number)


def messages(session: Session, person: str, limit: int = 10) -> list[tuple[datetime, str]]:
    """The newest messages to `person` (and to everyone), newest first."""
    stmt = (
        select(OutboxMessage)
        .where(OutboxMessage.channel == CHANNEL, OutboxMessage.kind == MESSAGE)
        .order_by(OutboxMessage.id.desc())
        .limit(200)
    )
    found = [
        (row.created_at, str(row.payload.get("text", "")))
        for row in session.scalars(stmt)
        if row.payload.get("dm") in (person, EVERYONE)
    ]
    return found[:limit]


def _store(
    session: Session, kind: str, payload: dict[str, Any], incident: int | None, now: datetime
) -> None:
    session.add(
        OutboxMessage(
            incident_number=incident,
            channel=CHANNEL,
            kind=kind,
            priority=PRIORITY[kind],
            payload=payload,
            state="sent",
            attempts=0,
            created_at=now,
            sent_at=now,
            error="",
        )
    )

"""What the console's pages show, read from the database in one session each: the
incident list, an incident's card, log, follow-ups, and the pages and messages of the
logged-in user. Cards and log lines are `bot.chat.cards` views, as Slack renders."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy.orm import Session

from bot.chat import cards
from bot.chat.console import chat, waiting
from bot.chat.views import CardView, LogLine
from bot.config import Settings
from bot.errors import RequestRejected
from bot.incidents import filters
from bot.incidents import service as incidents
from bot.incidents.models import Incident
from bot.people import Decider
from bot.postmortem import followups
from bot.postmortem.models import Followup

STATUSES = tuple(filters.STATUSES)
"""The list's status words: `active`, `all` and each stored status (the API's too)."""
SEVERITIES = tuple(filters.SEVERITIES)
LIST_LIMIT = 200
LOG_TAIL = 300
"""Log entries an incident page shows unless asked for all: a storm's incident has
thousands, and a phone at 3 a.m. needs the latest."""
LAST_SEQ = 2**31 - 1
"""The largest sequence number (the column is a 32-bit integer on PostgreSQL)."""


@dataclass(frozen=True)
class Filters:
    status: str = "active"
    severity: str = "all"

    @classmethod
    def parse(cls, status: str | None, severity: str | None) -> Filters:
        status, severity = status or "active", severity or "all"
        if status not in STATUSES:
            raise RequestRejected(f"status must be one of {', '.join(STATUSES)}, not {status!r}")
        if severity not in SEVERITIES:
            raise RequestRejected(
                f"severity must be one of {', '.join(SEVERITIES)}, not {severity!r}"
            )
        return cls(status, severity)

    def statuses(self) -> tuple[str, ...]:
        return filters.STATUSES[self.status]

    def severities(self) -> tuple[str, ...]:
        return filters.SEVERITIES[self.severity]


@dataclass(frozen=True)
class ListPage:
    incidents: list[Incident]
    """In the order of what needs the viewer (`waiting.ordered`)."""
    waiting: dict[int, waiting.Waiting]
    """What waits on each incident, as the viewer sees it (absent: nothing waits)."""
    paged: list[chat.Paged]
    messages: list[tuple[datetime, str]]


@dataclass(frozen=True)
class IncidentPage:
    card: CardView
    log: list[LogLine]
    followups: list[Followup]
    paged: list[chat.Paged]
    log_total: int
    """Entries in the whole log (`log` may be its last LOG_TAIL)."""


def incident_list(session: Session, filters: Filters, viewer: Decider) -> ListPage:
    found = incidents.list_incidents(
        session, status=filters.statuses(), severity=filters.severities(), limit=LIST_LIMIT
    )
    waits = waiting.of_incidents(session, [i.number for i in found], viewer)
    return ListPage(
        waiting.ordered(found, waits),
        waits,
        chat.paged(session, viewer.id),
        chat.messages(session, viewer.id),
    )


def incident(
    session: Session,
    number: int,
    user: str,
    now: datetime,
    settings: Settings,
    *,
    whole_log: bool = False,
) -> IncidentPage:
    card = cards.card(session, number, now, settings=settings)
    total = incidents.get(session, number).log_seq
    first = 1 if whole_log else max(1, total - LOG_TAIL + 1)
    return IncidentPage(
        card,
        cards.log_lines(session, number, first, LAST_SEQ),
        followups.of_incident(session, number),
        chat.paged(session, user),
        total,
    )


def card(session: Session, number: int, now: datetime, settings: Settings) -> CardView:
    """The card alone (the page refreshes it in place), naming the second line."""
    return cards.card(session, number, now, settings=settings)


def log_after(session: Session, number: int, seq: int) -> list[LogLine]:
    incidents.get(session, number)  # IncidentNotFound for a wrong number
    return cards.log_lines(session, number, seq + 1, LAST_SEQ)

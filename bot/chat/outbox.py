"""Queue chat calls as rows, and turn new incident-log entries into card and thread rows.

`project` is how chat follows incidents without anyone calling it: every change to an
incident is a log entry, so the log is the feed. For each incident whose log has entries
chat has not taken (`log_seq > announced_seq`, a partial index keeps that list as short
as the backlog) it queues one card row (post or update; at most one pending per incident,
so a burst of changes is one `chat.update`) and one thread row naming the new entries, and
moves `announced_seq` on, in one transaction. Incidents are taken with `FOR UPDATE SKIP
LOCKED` on PostgreSQL, so several replicas project each entry once.

Incidents that were already over before chat was configured get no card.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, cast

from sqlalchemy import Table, select, text
from sqlalchemy.orm import Session

from bot.chat.models import ChatCard, ChatChannel, OutboxMessage
from bot.db import insert_new
from bot.incidents.lifecycle import Status
from bot.incidents.models import Incident

CARD, THREAD, MESSAGE, EPHEMERAL, PAGE = "card", "thread", "message", "ephemeral", "page"
FILE = "file"
"""A text file shared in the incident card's thread (the postmortem draft)."""
PRIORITY = {CARD: 1, EPHEMERAL: 0, PAGE: 0, THREAD: 2, MESSAGE: 2, FILE: 2}
"""Within a channel, lower first: answers to a click and pages; then cards (a new card,
`NEW_CARD`, before updates of cards already there); then the story in threads. At about a
message a second per channel a storm backs the channel up: what is new is seen first."""
NEW_CARD = 0
URGENT = 0
"""Rows of this priority may take the channel's last token (`ChatChannel`)."""
BURST = 3.0
"""Messages a quiet channel may send at once (Slack tolerates short bursts)."""
PROJECT_BATCH = 10
"""Incidents per projection transaction: their rows stay locked until it commits, and
ingest waits on them, so it is kept short."""
_OUTBOX = cast(Table, OutboxMessage.__table__)
_CHANNELS = cast(Table, ChatChannel.__table__)
_PENDING_CARD = text("kind = 'card' AND state = 'pending'")


def project(session: Session, channel: str, now: datetime) -> int:
    """Queue card and thread rows for new log entries of up to PROJECT_BATCH incidents;
    how many incidents were taken."""
    stmt = (
        select(Incident)
        .where(Incident.log_seq > Incident.announced_seq)
        .order_by(Incident.number)
        .limit(PROJECT_BATCH)
    )
    if _postgres(session):
        stmt = stmt.with_for_update(skip_locked=True)
    taken = 0
    for incident in session.scalars(stmt).all():
        taken += 1
        first, last = incident.announced_seq + 1, incident.log_seq
        incident.announced_seq = last
        card = session.get(ChatCard, incident.number)
        if card is None:
            if not Status(incident.status).active:
                continue  # over before chat knew of it
            card = ChatCard(incident_number=incident.number, channel=channel, thread_seq=0)
            session.add(card)
            session.flush()
        queue_card(session, incident.number, card.channel, now, new=card.ts is None)
        enqueue(
            session,
            channel=card.channel,
            kind=THREAD,
            payload={"first": first, "last": last},
            incident=incident.number,
            now=now,
        )
    return taken


def queue_card(
    session: Session, number: int, channel: str, now: datetime, *, new: bool = False
) -> None:
    """Ask for the card to be posted (`new`) or updated; nothing new if a request is
    pending."""
    values = _row(channel, CARD, {}, number, now)
    if new:
        values["priority"] = NEW_CARD
    insert_new(
        session, _OUTBOX, values, index_elements=["incident_number"], index_where=_PENDING_CARD
    )
    _channel(session, channel, now)


def enqueue(
    session: Session,
    *,
    channel: str,
    kind: str,
    payload: dict[str, Any],
    now: datetime,
    incident: int | None = None,
) -> None:
    """Queue one chat call, in the caller's transaction."""
    session.execute(_OUTBOX.insert().values(_row(channel, kind, payload, incident, now)))
    _channel(session, channel, now)


def _row(
    channel: str, kind: str, payload: dict[str, Any], incident: int | None, now: datetime
) -> dict[str, Any]:
    return {
        "incident_number": incident,
        "channel": channel,
        "kind": kind,
        "priority": PRIORITY[kind],
        "payload": payload,
        "state": "pending",
        "attempts": 0,
        "created_at": now,
        "error": "",
    }


def _channel(session: Session, channel: str, now: datetime) -> None:
    values = {"channel": channel, "next_at": now, "low_at": now, "tokens": BURST, "tokens_at": now}
    insert_new(session, _CHANNELS, values, index_elements=["channel"])


def _postgres(session: Session) -> bool:
    return session.get_bind().dialect.name == "postgresql"


class OutboxChat:
    """`bot.chat.Chat` over the outbox: what Slack (and later other surfaces) send."""

    def __init__(self, channel: str) -> None:
        self.channel = channel

    def page(self, session: Session, incident: int, person: str, text: str, now: datetime) -> None:
        card = session.get(ChatCard, incident)
        channel = card.channel if card is not None else self.channel
        enqueue(
            session,
            channel=channel,
            kind=PAGE,
            payload={"who": person, "text": text},
            incident=incident,
            now=now,
        )

    def tell(self, session: Session, person: str, text: str, now: datetime) -> None:
        """A direct message, paced with the channel's other messages."""
        user = person.removeprefix("slack:")
        enqueue(
            session, channel=self.channel, kind=MESSAGE, payload={"text": text, "dm": user},
            now=now,
        )  # fmt: skip

    def post(self, session: Session, text: str, now: datetime) -> None:
        """A message to the incidents channel, paced with its other messages."""
        enqueue(session, channel=self.channel, kind=MESSAGE, payload={"text": text}, now=now)

"""Queue chat calls as rows, and turn new incident-log entries into card and thread rows.

`project` is how chat follows incidents without anyone calling it: every change to an
incident is a log entry, so the log is the feed. For each incident whose log has entries
chat has not taken (`log_seq > announced_seq`, a partial index keeps that list as short
as the backlog) it queues one card row (post or update; at most one pending per incident,
so a burst of changes is one `chat.update`) and one thread row naming the new entries, and
moves `announced_seq` on, in one transaction. Incidents are taken with `FOR UPDATE SKIP
LOCKED` on PostgreSQL, so several replicas project each entry once.

Rows go out by priority, then age (`PRIORITY`): a critical incident's new card with the
answers to clicks and the pages, then the new cards of other severities, then card
updates, then the story in threads. A flood of one pattern below critical is capped
(`bot.chat.floods`): past the cap an incident is counted in one summary message instead
of getting a card and a thread.

Incidents that were already over before chat was configured get no card.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, cast

from sqlalchemy import Table, case, select, text
from sqlalchemy.orm import Session

from bot.chat import floods
from bot.chat.floods import FloodCap
from bot.chat.models import ChatCard, ChatChannel, ChatSummary, OutboxMessage
from bot.db import insert_new
from bot.incidents.lifecycle import Severity, Status
from bot.incidents.models import Incident

CARD, THREAD, MESSAGE, EPHEMERAL, PAGE = "card", "thread", "message", "ephemeral", "page"
FILE = "file"
"""A text file shared in the incident card's thread (the postmortem draft)."""
SUMMARY = "summary"
"""The "N more warning incidents" message of a flood (`bot.chat.floods`)."""
CRITICAL_CARD, NEW_CARD, UPDATE, STORY = 0, 1, 2, 3
PRIORITY = {
    EPHEMERAL: CRITICAL_CARD,
    PAGE: CRITICAL_CARD,
    CARD: UPDATE,
    SUMMARY: UPDATE,
    THREAD: STORY,
    MESSAGE: STORY,
    FILE: STORY,
}
"""Within a channel, lower first, then oldest first: answers to a click, pages and the new
card of a critical incident; then new cards of other severities (and a new flood
summary); then updates of cards already there; then the story in threads. At about a
message a second per channel a storm backs the channel up: what is new and worst is seen
first, so a critical card never waits behind a flood of warnings."""
URGENT = NEW_CARD
"""Rows of this priority or lower may take the channel's last token (`ChatChannel`)."""
NO_CAP = FloodCap(0, timedelta(minutes=15))
BURST = 3.0
"""Messages a quiet channel may send at once (Slack tolerates short bursts)."""
PROJECT_BATCH = 10
"""Incidents per projection transaction: their rows stay locked until it commits, and
ingest waits on them, so it is kept short."""
_OUTBOX = cast(Table, OutboxMessage.__table__)
_CHANNELS = cast(Table, ChatChannel.__table__)
_PENDING_CARD = text("kind = 'card' AND state = 'pending'")


def project(session: Session, channel: str, now: datetime, flood: FloodCap = NO_CAP) -> int:
    """Queue card and thread rows for new log entries of up to PROJECT_BATCH incidents,
    critical ones first (a backlog of warnings is not projected before them); how many
    incidents were taken."""
    worst_first = case(
        (Incident.severity == Severity.CRITICAL.value, 0),
        (Incident.severity == Severity.WARNING.value, 1),
        else_=2,
    )
    stmt = (
        select(Incident)
        .where(Incident.log_seq > Incident.announced_seq)
        .order_by(worst_first, Incident.number)
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
            pattern = floods.pattern_of(incident)
            card = ChatCard(
                incident_number=incident.number, channel=channel, thread_seq=0, pattern=pattern
            )
            session.add(card)
            session.flush()
            summary = floods.fold(session, card, incident, now, flood)
            if summary is not None:
                _queue_summary(session, summary, now)
        if card.summary_id is not None:
            continue  # counted in a flood summary: its story is in the console
        critical = incident.severity == Severity.CRITICAL
        queue_card(
            session, incident.number, card.channel, now, new=card.ts is None, critical=critical
        )
        enqueue(
            session,
            channel=card.channel,
            kind=THREAD,
            payload={"first": first, "last": last},
            incident=incident.number,
            now=now,
        )
    return taken


def _queue_summary(session: Session, summary: ChatSummary, now: datetime) -> None:
    """One pending row renders the summary as it is when sent: a flood is one post, then
    an update now and then, never a row per incident."""
    if summary.queued:
        return
    summary.queued = True
    values = _row(summary.channel, SUMMARY, {"summary": summary.id}, None, now)
    if summary.ts is None:
        values["priority"] = NEW_CARD
    session.execute(_OUTBOX.insert().values(values))
    _channel(session, summary.channel, now)


def queue_card(
    session: Session,
    number: int,
    channel: str,
    now: datetime,
    *,
    new: bool = False,
    critical: bool = False,
) -> None:
    """Ask for the card to be posted (`new`) or updated; nothing new if a request is
    pending."""
    values = _row(channel, CARD, {}, number, now)
    if new:
        values["priority"] = CRITICAL_CARD if critical else NEW_CARD
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

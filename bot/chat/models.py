"""ORM classes of the chat room: one card per incident, the outbox, and channel pacing.

Every outbound chat call is an `OutboxMessage` row first (DESIGN invariant 8): card and
thread rows made from the committed incident log (`outbox.project`), answers to a click
queued by the handler that decided it; the sender sends rows later, one channel at a time at
about one message a second, and records what came back. A card row renders the card as it
is when sent, so several pending updates of one card are one `chat.update` (at most one
pending card row per incident, by a partial unique index). A thread row names a range of
the incident's log entries; consecutive pending ranges of one incident go out as one post.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import BigInteger, Float, ForeignKey, Index, Integer, String, Text, text
from sqlalchemy.orm import Mapped, mapped_column

from bot.db import Base

_ID = BigInteger().with_variant(Integer, "sqlite")
_PENDING_CARD = "kind = 'card' AND state = 'pending'"


class ChatCard(Base):
    """Where an incident's card lives: its channel and message timestamp (Slack's id)."""

    __tablename__ = "chat_cards"

    incident_number: Mapped[int] = mapped_column(ForeignKey("incidents.number"), primary_key=True)
    channel: Mapped[str] = mapped_column(String(64))
    ts: Mapped[str | None] = mapped_column(String(32))
    """The card message's `ts`; None until it is posted."""
    posted_at: Mapped[datetime | None]
    updated_at: Mapped[datetime | None]
    thread_seq: Mapped[int] = mapped_column(Integer, default=0)
    """The last log entry posted to the card's thread."""
    pattern: Mapped[str | None] = mapped_column(String(200))
    """What a flood of incidents has in common (their alertname): cards are capped per
    pattern and window (`bot.chat.floods`)."""
    summary_id: Mapped[int | None] = mapped_column(Integer)
    """Set when the incident got no card of its own but is counted in a flood summary."""


class ChatSummary(Base):
    """One "N more warning incidents" message standing for the cards of a flood: the
    incidents past `slack_flood_cap` of one pattern and severity in one window."""

    __tablename__ = "chat_summaries"
    __table_args__ = (
        Index("uq_chat_summaries_window", "channel", "pattern", "severity", "window", unique=True),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    channel: Mapped[str] = mapped_column(String(64))
    pattern: Mapped[str] = mapped_column(String(200))
    severity: Mapped[str] = mapped_column(String(16))
    window: Mapped[int] = mapped_column(BigInteger)
    """The window's number: seconds since the epoch // `slack_flood_window`."""
    count: Mapped[int] = mapped_column(Integer, default=0)
    first_incident: Mapped[int] = mapped_column(Integer)
    last_incident: Mapped[int] = mapped_column(Integer)
    opened_at: Mapped[datetime]
    ts: Mapped[str | None] = mapped_column(String(32))
    """The summary message's `ts`; None until it is posted, then it is updated in place."""
    queued: Mapped[bool] = mapped_column(default=False)
    """An outbox row will render it: more folded incidents need no row of their own."""


class OutboxMessage(Base):
    __tablename__ = "chat_outbox"
    __table_args__ = (
        Index(
            "ix_chat_outbox_pending",
            "channel",
            "priority",
            "id",
            postgresql_where=text("state = 'pending'"),
            sqlite_where=text("state = 'pending'"),
        ),
        Index(
            "uq_chat_outbox_pending_card",
            "incident_number",
            unique=True,
            postgresql_where=text(_PENDING_CARD),
            sqlite_where=text(_PENDING_CARD),
        ),
    )

    id: Mapped[int] = mapped_column(_ID, primary_key=True, autoincrement=True)
    incident_number: Mapped[int | None] = mapped_column(ForeignKey("incidents.number"))
    channel: Mapped[str] = mapped_column(String(64))
    kind: Mapped[str] = mapped_column(String(16))
    """`card` (post or update the incident's card), `thread` (log entries to its thread),
    `message` (a post of its own), `ephemeral` (seen by one user)."""
    priority: Mapped[int] = mapped_column(Integer, default=1)
    """Lower goes first within a channel: cards before thread posts."""
    payload: Mapped[dict[str, Any]]
    state: Mapped[str] = mapped_column(String(16), default="pending")
    """`pending`, `sent`, `failed`."""
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    not_before: Mapped[datetime | None]
    created_at: Mapped[datetime]
    sent_at: Mapped[datetime | None]
    error: Mapped[str] = mapped_column(Text, default="")


class ChatChannel(Base):
    """Pacing per channel, shared by every sender: a token bucket of `slack_rate` messages
    a second holding at most BURST, with one token kept for what is new (a new card, a
    page, an answer to a click): `next_at` is when those may go, `low_at` when the rest
    may (card updates, thread posts). A 429 holds both for its Retry-After. Only the
    sender holding the lease sends to the channel, so its messages keep their order."""

    __tablename__ = "chat_channels"

    channel: Mapped[str] = mapped_column(String(64), primary_key=True)
    next_at: Mapped[datetime]
    low_at: Mapped[datetime]
    tokens: Mapped[float] = mapped_column(Float)
    tokens_at: Mapped[datetime]
    lease_owner: Mapped[str | None] = mapped_column(String(100))
    lease_until: Mapped[datetime | None]


class SlackRequest(Base):
    """A signed Slack request already handled: the same signature again is a replay,
    refused even inside Slack's 300 s window (Bolt checks only the window)."""

    __tablename__ = "slack_requests"

    signature: Mapped[str] = mapped_column(String(80), primary_key=True)
    received_at: Mapped[datetime] = mapped_column(index=True)

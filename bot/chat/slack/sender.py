"""Send the outbox to Slack: one channel at a time, about one message a second each.

A round: project new log entries into rows (`outbox.project`), then claim a channel that
may send (no other sender's lease on it, a token in its bucket: `ChatChannel`) and its
first pending row (by severity, then age: answers, pages and critical incidents' new cards
first, then other new cards, then card updates, then thread posts: `outbox.PRIORITY`),
count the attempt and commit; the last token of a channel is kept for
what is new, so a new incident's card does not wait behind the story of older ones.
Then call Slack outside any transaction, and record the answer in a second transaction.
What is sent is rendered at claim time from the database, so a card row always shows the
incident as it is now, and a thread row carries every pending entry of its incident that
fits in one post.

Failures: a 429 holds the whole channel for its Retry-After (the row keeps its place); a
5xx or timeout retries the row with backoff (at least 5 s, doubling, at most 5 min,
up to MAX_ATTEMPTS); a refusal (bad token, bot not in the channel) fails the row at once and the
bot's log says what to fix. A card whose post reached Slack but whose ts was never
recorded (the process died in between) is found again by its message metadata before it
is posted a second time: one card per incident. An answer that comes back while the
database is away is kept and recorded first thing once it is back: until then the channel
stays leased to this sender, so were it dropped the channel would wait out the whole lease
after the outage, and the row would be sent again (a thread post or a page twice). The
lease lasts one delivery (its Slack calls' timeouts and a little): a sender killed in the
middle of one holds its channel that long, not more.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import partial
from typing import Any, Literal

from sqlalchemy import exists, func, select
from sqlalchemy.orm import Session

from bot.chat import cards, outbox
from bot.chat.floods import FloodCap
from bot.chat.models import ChatCard, ChatChannel, ChatSummary, OutboxMessage
from bot.chat.slack import blocks
from bot.chat.slack.client import SlackApi
from bot.clock import Clock
from bot.config import Settings
from bot.db import Database
from bot.errors import BotError, ChatRefused, ChatUnavailable, StorageUnavailable
from bot.people import Directory

logger = logging.getLogger(__name__)

MAX_ATTEMPTS = 10
LEASE_CALLS = 3
"""Slack calls one delivery makes at most (a page: its post, opening the DM, the DM; a
file: three calls of files.uploadV2): the channel's lease covers that many timeouts."""
LEASE_SPARE = timedelta(seconds=5)
"""Beyond the calls' timeouts, for the claim and the record around them."""
BACKOFF_MAX = 300.0


@dataclass
class Delivery:
    """One claimed outbox row and what to send for it."""

    row_id: int
    channel: str
    kind: str
    incident: int | None
    attempts: int
    text: str
    blocks: list[dict[str, Any]]
    ts: str | None = None
    """The card's ts: update it (card rows) or post into its thread (thread rows)."""
    user: str | None = None
    """Ephemeral rows: who sees it."""
    consumed: tuple[int, ...] = ()
    """Thread rows whose entries this post carries (all sent with it)."""
    rest: tuple[int, int] | None = None
    """The entries (first, last) of the last consumed row that did not fit."""
    last_seq: int = 0
    since: datetime | None = None
    """Card rows: when the card was first asked for (to find a post we lost)."""
    summary: int | None = None
    """Summary rows: the flood summary's id."""


class SlackSender:
    def __init__(
        self, db: Database, settings: Settings, clock: Clock, api: SlackApi, owner: str = ""
    ) -> None:
        self.db = db
        self.settings = settings
        self.directory = Directory(settings)
        self.clock = clock
        self.api = api
        self.channel = settings.slack_channel or ""
        self.owner = owner or f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
        self.lease = LEASE_CALLS * settings.slack_timeout + LEASE_SPARE
        """How long a claimed channel is this sender's: one delivery, no more, so that a
        channel whose sender was killed mid-delivery waits that long after the restart."""
        self.flood = FloodCap(settings.slack_flood_cap, settings.slack_flood_window)
        self._unrecorded: Callable[[], None] | None = None
        """Recording what Slack answered to the last delivery, while the database could
        not take it: done before anything else."""

    def run_forever(self, stop: threading.Event, wake: threading.Event) -> None:
        logger.info("Slack sender %s started (channel %s)", self.owner, self.channel)
        while not stop.is_set():
            try:
                worked = self.run_once()
            except BotError as exc:
                logger.warning("Slack sender: %s", exc)
                worked = False
            except Exception:
                logger.exception("Slack sender: unexpected error; going on")
                worked = False
            if not worked:
                wake.wait(self._idle())
                wake.clear()

    def run_once(self) -> bool:
        """Record an answer the database could not take before; else project, then send
        one message if a channel is due. True if it did any of these."""
        if self._unrecorded is not None:
            self._unrecorded()  # StorageUnavailable while the database is still away
            self._unrecorded = None
            logger.info("Slack sender: the answer kept during the outage is recorded")
            return True
        with self.db.transaction() as session:
            projected = outbox.project(session, self.channel, self.clock.now(), self.flood)
        return self.send_one() or projected > 0

    def send_one(self) -> bool:
        delivery = self._claim()
        if delivery is None or delivery is False:
            return delivery is False  # False: a row was settled without a call
        record: Callable[[], None]
        try:
            ts = self._deliver(delivery)
        except ChatUnavailable as exc:
            record = partial(self._failed, delivery, exc, final=False)
        except ChatRefused as exc:
            record = partial(self._failed, delivery, exc, final=True)
        else:
            record = partial(self._sent, delivery, ts)
        try:
            record()
        except StorageUnavailable as exc:
            self._unrecorded = record
            what = f"INC-{delivery.incident}" if delivery.incident else delivery.channel
            logger.warning(
                "Slack sender: Slack answered the %s for %s but %s; the answer is kept and "
                "recorded once the database is back (channel %s waits for it)",
                delivery.kind,
                what,
                exc,
                delivery.channel,
            )
        return True

    def _idle(self) -> float:
        """Seconds until a channel may send again (at most worker_poll; the poll when the
        database does not answer: the thread must outlive an outage)."""
        poll = self.settings.worker_poll.total_seconds()
        now = self.clock.now()
        try:
            with self.db.session() as session:
                urgent = session.scalar(
                    select(func.min(ChatChannel.next_at)).where(_has_pending(now, urgent=True))
                )
                rest = session.scalar(select(func.min(ChatChannel.low_at)).where(_has_pending(now)))
        except BotError:  # the database is down: look again after a poll, never die
            return poll
        due = min((at for at in (urgent, rest) if at is not None), default=None)
        if due is None:
            return poll
        return min(poll, max(0.02, (due - now).total_seconds()))

    # --- claim -------------------------------------------------------------------------

    def _claim(self) -> Delivery | Literal[False] | None:
        with self.db.transaction() as session:
            now = self.clock.now()
            free = (ChatChannel.lease_until.is_(None)) | (ChatChannel.lease_until < now)
            stmt = (
                select(ChatChannel)
                .where(
                    free,
                    ((ChatChannel.next_at <= now) & _has_pending(now, urgent=True))
                    | ((ChatChannel.low_at <= now) & _has_pending(now)),
                )
                .order_by(ChatChannel.next_at)
                .limit(1)
            )
            if self.db.is_postgres:
                stmt = stmt.with_for_update(skip_locked=True)
            channel = session.scalars(stmt).first()
            if channel is None:
                return None
            query = select(OutboxMessage).where(
                OutboxMessage.channel == channel.channel,
                OutboxMessage.state == "pending",
                (OutboxMessage.not_before.is_(None)) | (OutboxMessage.not_before <= now),
            )
            if channel.low_at > now:  # only what is new may take the last token
                query = query.where(OutboxMessage.priority <= outbox.URGENT)
            row = session.scalars(
                query.order_by(OutboxMessage.priority, OutboxMessage.id).limit(1)
            ).first()
            if row is None:
                return None
            delivery = self._render(session, row, now)
            if delivery is None:
                return False
            row.attempts += 1
            delivery.attempts = row.attempts
            self._spend(channel, now)
            channel.lease_owner = self.owner
            channel.lease_until = now + self.lease
            return delivery

    def _spend(self, channel: ChatChannel, now: datetime) -> None:
        """Take a token from the channel's bucket and say when the next ones are there."""
        rate = self.settings.slack_rate
        saved = (now - channel.tokens_at).total_seconds() * rate
        tokens = min(outbox.BURST, channel.tokens + max(0.0, saved)) - 1.0
        channel.tokens, channel.tokens_at = tokens, now
        channel.next_at = now + timedelta(seconds=max(0.0, (1.0 - tokens) / rate))
        channel.low_at = now + timedelta(seconds=max(0.0, (2.0 - tokens) / rate))

    def _render(self, session: Session, row: OutboxMessage, now: datetime) -> Delivery | None:
        """What to send for `row`; None (and the row settled) when there is nothing."""
        d = Delivery(row.id, row.channel, row.kind, row.incident_number, row.attempts, "", [])
        if row.kind == outbox.CARD:
            assert row.incident_number is not None
            card = session.get(ChatCard, row.incident_number)
            console = self.settings.console
            link = console.public_url if console.enabled else None
            view = cards.card(
                session, row.incident_number, now, console=link, settings=self.settings
            )
            d.text, d.blocks = blocks.card(view, self.directory.slack_id)
            d.ts, d.since = (card.ts if card is not None else None), row.created_at
            return d
        if row.kind == outbox.THREAD:
            return self._thread(session, row, d, now)
        if row.kind == outbox.SUMMARY:
            return self._summary(session, row, d)
        if row.kind == outbox.PAGE:
            return self._page(session, row, d, now)
        payload = row.payload
        if row.kind == outbox.FILE:
            card = session.get(ChatCard, row.incident_number) if row.incident_number else None
            if card is not None and card.ts is None and card.summary_id is None:
                row.not_before = now + timedelta(seconds=1)  # the card goes first
                return None
            d.text, d.ts = str(payload.get("content", "")), card.ts if card else None
            d.blocks = [{"filename": payload.get("filename"), "title": payload.get("title"),
                         "comment": payload.get("comment")}]  # fmt: skip
            return d
        d.text, d.blocks = str(payload.get("text", "")), list(payload.get("blocks") or [])
        d.user, d.ts = payload.get("user") or payload.get("dm"), payload.get("thread_ts")
        return d

    def _thread(
        self, session: Session, row: OutboxMessage, d: Delivery, now: datetime
    ) -> Delivery | None:
        assert row.incident_number is not None
        card = session.get(ChatCard, row.incident_number)
        if card is None or card.ts is None:
            # Cards go first; a card that could not be posted takes its thread with it.
            failed = session.scalar(
                select(
                    exists().where(
                        OutboxMessage.incident_number == row.incident_number,
                        OutboxMessage.kind == outbox.CARD,
                        OutboxMessage.state == "failed",
                    )
                )
            )
            if failed:
                row.state, row.error = "failed", "the incident's card was never posted"
            else:
                row.not_before = now + timedelta(seconds=1)
            return None
        rows = list(
            session.scalars(
                select(OutboxMessage)
                .where(
                    OutboxMessage.incident_number == row.incident_number,
                    OutboxMessage.kind == outbox.THREAD,
                    OutboxMessage.state == "pending",
                )
                .order_by(OutboxMessage.id)
            )
        )
        first = int(rows[0].payload["first"])
        last = max(int(r.payload["last"]) for r in rows)
        lines = cards.log_lines(session, row.incident_number, first, last)
        if not lines:  # nothing left in that range
            for taken in rows:
                taken.state, taken.sent_at = "sent", now
            return None
        text, body, count = blocks.thread_message(lines, self.directory.slack_id)
        upto = lines[count - 1].seq
        consumed = tuple(r.id for r in rows if int(r.payload["last"]) <= upto)
        rest = None
        partial = next((r for r in rows if int(r.payload["last"]) > upto), None)
        if partial is not None:
            rest = (upto + 1, int(partial.payload["last"]))
            consumed += (partial.id,)
        d.text, d.blocks, d.ts = text, body, card.ts
        d.consumed, d.rest, d.last_seq = consumed, rest, upto
        return d

    def _page(
        self, session: Session, row: OutboxMessage, d: Delivery, now: datetime
    ) -> Delivery | None:
        """A mention in the card's thread (a channel post while there is no card yet) and,
        for a person, a direct message too."""
        assert row.incident_number is not None
        card = session.get(ChatCard, row.incident_number)
        if card is not None and card.ts is None and card.summary_id is None:
            row.not_before = now + timedelta(seconds=1)  # the card goes first
            return None
        who = str(row.payload.get("who", ""))
        mentions = self.directory.slack_id
        d.text, d.blocks = blocks.page(who, str(row.payload.get("text", "")), mentions)
        d.ts = card.ts if card is not None else None
        d.user = mentions(who)
        return d

    def _summary(self, session: Session, row: OutboxMessage, d: Delivery) -> Delivery | None:
        """A flood's summary as it is now; incidents folded in after this claim queue the
        next update."""
        summary = session.get(ChatSummary, int(row.payload["summary"]), with_for_update=True)
        if summary is None:
            row.state, row.error = "failed", "the flood summary is gone"
            return None
        summary.queued = False
        console = self.settings.console
        d.text, d.blocks = blocks.flood_summary(
            summary.count, summary.severity, summary.pattern, summary.first_incident,
            summary.last_incident, summary.opened_at,
            console.public_url if console.enabled else None,
        )  # fmt: skip
        d.ts, d.summary = summary.ts, summary.id
        return d

    # --- deliver and record ------------------------------------------------------------

    def _deliver(self, d: Delivery) -> str | None:
        if d.kind == outbox.CARD:
            assert d.incident is not None
            if d.ts is None and d.attempts > 1 and d.since is not None:
                d.ts = self.api.find_card(d.channel, d.incident, d.since.timestamp() - 60)
            if d.ts is None:
                return self.api.post(d.channel, d.text, d.blocks, incident=d.incident)
            self.api.update(d.channel, d.ts, d.text, d.blocks)
            return d.ts
        if d.kind == outbox.SUMMARY:
            if d.ts is None:
                return self.api.post(d.channel, d.text, d.blocks)
            self.api.update(d.channel, d.ts, d.text, d.blocks)
            return d.ts
        if d.kind == outbox.PAGE:
            ts = self.api.post(d.channel, d.text, d.blocks, thread_ts=d.ts)
            if d.user is not None:  # a person: also a direct message, which notifies
                self.api.post(self.api.open_dm(d.user), d.text, d.blocks)
            return ts
        if d.kind == outbox.EPHEMERAL:
            assert d.user is not None
            self.api.ephemeral(d.channel, d.user, d.text, d.blocks)
            return None
        if d.kind == outbox.FILE:
            meta = d.blocks[0]
            return self.api.upload(
                d.channel, str(meta["filename"]), d.text, title=str(meta["title"]),
                comment=str(meta["comment"]), thread_ts=d.ts,
            )  # fmt: skip
        if d.kind == outbox.MESSAGE and d.user is not None:  # a direct message
            return self.api.post(self.api.open_dm(d.user), d.text, d.blocks)
        return self.api.post(d.channel, d.text, d.blocks, thread_ts=d.ts)

    def _sent(self, d: Delivery, ts: str | None) -> None:
        with self.db.transaction() as session:
            now = self.clock.now()
            self._release(session, d.channel)
            if d.kind == outbox.CARD and d.incident is not None:
                card = session.get(ChatCard, d.incident)
                if card is not None:
                    if card.ts is None:
                        card.ts, card.posted_at = ts, now
                    card.updated_at = now
            if d.kind == outbox.SUMMARY and d.summary is not None:
                summary = session.get(ChatSummary, d.summary)
                if summary is not None and summary.ts is None:
                    summary.ts = ts
            if d.kind == outbox.THREAD and d.incident is not None:
                card = session.get(ChatCard, d.incident)
                if card is not None:
                    card.thread_seq = max(card.thread_seq, d.last_seq)
            for row_id in d.consumed or (d.row_id,):
                row = session.get(OutboxMessage, row_id)
                if row is None:
                    continue
                if d.rest is not None and row_id == d.consumed[-1]:
                    row.payload = {"first": d.rest[0], "last": d.rest[1]}
                    continue
                row.state, row.sent_at, row.error = "sent", now, ""

    def _failed(self, d: Delivery, exc: BotError, *, final: bool) -> None:
        with self.db.transaction() as session:
            now = self.clock.now()
            row = session.get(OutboxMessage, d.row_id)
            throttled = isinstance(exc, ChatUnavailable) and exc.throttled
            delay = exc.delay if isinstance(exc, ChatUnavailable) else 0.0
            self._release(session, d.channel, hold=timedelta(seconds=delay) if throttled else None)
            if row is None:
                return
            row.error = str(exc)[:2000]
            if throttled:
                row.attempts -= 1  # the channel waits; the row did nothing wrong
                return
            if final or row.attempts >= MAX_ATTEMPTS:
                row.state = "failed"
                logger.error(
                    "Slack %s for %s failed for good after %d attempts: %s",
                    d.kind,
                    f"INC-{d.incident}" if d.incident else d.channel,
                    row.attempts,
                    exc,
                )
                return
            backoff = min(BACKOFF_MAX, max(delay, 2.0 ** (row.attempts - 1)))
            row.not_before = now + timedelta(seconds=backoff)
            logger.warning("Slack %s: %s; attempt %d", d.kind, exc, row.attempts)

    def _release(self, session: Session, channel: str, *, hold: timedelta | None = None) -> None:
        """Give the channel back; `hold` (a 429's Retry-After): nothing before it, and the
        bucket starts empty after it. A lease that ran out (the database was away longer)
        and was taken by another sender is that sender's to give back, not this one's."""
        row = session.get(ChatChannel, channel, with_for_update=True)
        if row is None or row.lease_owner not in (None, self.owner):
            return
        row.lease_owner = row.lease_until = None
        if hold is not None:
            until = self.clock.now() + hold
            row.next_at = row.low_at = row.tokens_at = until
            row.tokens = 0.0


def _has_pending(now: datetime, *, urgent: bool = False) -> Any:
    """The channel has a row due now (`urgent`: one that may take the last token)."""
    found = exists().where(
        OutboxMessage.channel == ChatChannel.channel,
        OutboxMessage.state == "pending",
        (OutboxMessage.not_before.is_(None)) | (OutboxMessage.not_before <= now),
    )
    return found.where(OutboxMessage.priority <= outbox.URGENT) if urgent else found

"""A rig for escalation: incidents opened through the real ingest with a frozen clock, the
real worker firing timers, pages read back from the incident log and the chat outbox."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import select

from bot import escalation
from bot.alerts import ingest
from bot.alerts.payload import WebhookPayload
from bot.alerts.results import IngestResult
from bot.chat.models import OutboxMessage
from bot.chat.outbox import OutboxChat
from bot.clock import FrozenClock
from bot.config import Settings, load_settings
from bot.db import Database
from bot.escalation.models import EscalationTimer
from bot.incidents import log
from bot.incidents.models import LogEntry
from bot.runbooks import service as runbooks
from bot.worker import Worker
from tests.support.payloads import alert, notification

CHANNEL = "C0INCIDENTS"
ROLES = {
    "slack:U0ALICE": ["responder"],
    "slack:U0BOB": ["responder"],
    "slack:U0CAROL": ["second_line"],
    "dave": ["second_line"],
}
SLACK = {
    "slack_bot_token": "xoxb-test-token",
    "slack_signing_secret": "signing-secret",
    "slack_channel": CHANNEL,
    "slack_role_groups": {"second_line": ["S0SRE"]},
}


class EscRig:
    def __init__(self, db: Database, clock: FrozenClock, **overrides: Any) -> None:
        self.db = db
        self.clock = clock
        self.start = clock.now()
        self.configure(**overrides)
        self._hosts = 0

    def configure(self, **overrides: Any) -> Settings:
        """New settings (as after a restart with an edited config) and a worker using them."""
        options: dict[str, Any] = {"roles": ROLES, **SLACK}
        options.update(overrides)
        self.settings = load_settings(database_url=self.db.url, **options)
        self.chat = OutboxChat(CHANNEL)
        self.worker = Worker(self.db, self.settings, self.clock, owner="w1", chat=self.chat)
        return self.settings

    def open(self, severity: str = "critical", **labels: str) -> int:
        """Open an incident with one firing alert on a new host; its number."""
        self._hosts += 1
        host = labels.pop("host", f"gpu-node-{self._hosts:02d}")
        body = notification([alert(host=host, severity=severity, **labels)])
        return self.ingest(body).incident

    def ingest(self, body: dict[str, Any]) -> IngestResult:
        return ingest.ingest(
            self.db,
            WebhookPayload.model_validate(body),
            clock=self.clock,
            reopen_window=self.settings.reopen_window,
            escalation=escalation.frozen_policy(self.settings),
        )

    def at(self, minutes: float) -> int:
        """Move the clock to `minutes` after the rig started and let the worker fire."""
        self.clock.set(self.start + timedelta(minutes=minutes))
        return self.worker.fire()

    def walk(self, until: float, step: float = 1.0) -> None:
        """Fire minute by minute (or `step`) up to `until`."""
        minute = 0.0
        while minute <= until:
            self.at(minute)
            minute += step

    def ack(self, number: int, who: str = "slack:U0ALICE") -> None:
        with self.db.transaction() as session:
            escalation.acknowledge(session, number, actor=log.Actor.human(who), at=self.clock.now())

    def resolve(self, number: int, who: str = "slack:U0ALICE") -> None:
        runbooks.resolve(
            self.db, number, actor=log.Actor.human(who), clock=self.clock, disposition="fixed"
        )

    def silence(self, number: int, length: timedelta, who: str = "slack:U0ALICE") -> None:
        with self.db.transaction() as session:
            escalation.silence(
                session, number, length, actor=log.Actor.human(who), at=self.clock.now()
            )

    def pages(self, number: int) -> list[LogEntry]:
        """The `escalation.paged` entries of the incident, in order."""
        return self.entries(number, "escalation.paged")

    def page_minutes(self, number: int) -> list[float]:
        return [self.minute(e.at) for e in self.pages(number)]

    def minute(self, at: datetime) -> float:
        return round((at - self.start).total_seconds() / 60, 2)

    def entries(self, number: int, kind: str | None = None) -> list[LogEntry]:
        with self.db.session() as session:
            stmt = select(LogEntry).where(LogEntry.incident_number == number)
            if kind is not None:
                stmt = stmt.where(LogEntry.type == kind)
            return list(session.scalars(stmt.order_by(LogEntry.seq)))

    def chat_pages(self, number: int) -> list[str]:
        """Who chat was asked to page about the incident, in order."""
        with self.db.session() as session:
            rows = session.scalars(
                select(OutboxMessage)
                .where(OutboxMessage.incident_number == number, OutboxMessage.kind == "page")
                .order_by(OutboxMessage.id)
            )
            return [str(row.payload["who"]) for row in rows]

    def timers(self, number: int) -> list[EscalationTimer]:
        with self.db.session() as session:
            return list(
                session.scalars(
                    select(EscalationTimer)
                    .where(EscalationTimer.incident_number == number)
                    .order_by(EscalationTimer.id)
                )
            )

    def pending(self, number: int) -> list[EscalationTimer]:
        return [t for t in self.timers(number) if t.state == "pending"]

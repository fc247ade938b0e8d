"""The pager: delivers queued pages to the configured targets, each exactly as often as it
must and at least once.

A page is a `PageDelivery` row, queued in the transaction that fired its timer. A pager
thread claims one (`FOR UPDATE SKIP LOCKED` on PostgreSQL), marks it `sending` under a
lease and commits, sends it outside any transaction (the target retries what may succeed
later, within its own bounds), then records how it went: on the row and as a `page.delivered`
or `page.failed` entry in the incident's log, so the card and the postmortem say who was
reached. A pager that dies mid-send leaves a lease that runs out; another pager sends the
page again (PagerDuty folds the repeat into the same alert by its dedup key).
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import cast

from sqlalchemy import or_, select
from sqlalchemy.orm import Session

from bot.clock import Clock
from bot.db import Database
from bot.errors import BotError
from bot.escalation.ladder import BOT
from bot.escalation.models import PageDelivery
from bot.escalation.paging import Delivery, Event, Page, Severity, Target
from bot.incidents import log
from bot.incidents import service as incidents
from bot.incidents.models import Incident

logger = logging.getLogger(__name__)

LEASE = timedelta(minutes=5)
"""Longer than any target's attempts x (timeout + backoff) at their bounds in practice."""


@dataclass(frozen=True)
class Claimed:
    row: int
    target: str
    page: Page


class Pager:
    def __init__(
        self,
        db: Database,
        clock: Clock,
        targets: Mapping[str, Target],
        *,
        owner: str | None = None,
        poll: float = 1.0,
    ) -> None:
        self.db = db
        self.clock = clock
        self.targets = targets
        self.owner = owner or f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
        self.poll = poll

    def run_forever(self, stop: threading.Event, wake: threading.Event | None = None) -> None:
        wake = wake or threading.Event()
        while not stop.is_set():
            try:
                worked = self.run_once()
            except BotError as exc:
                logger.warning("pager %s: %s", self.owner, exc)
                worked = False
            except Exception:
                logger.exception("pager %s: unexpected error; going on", self.owner)
                worked = False
            if not worked:
                wake.wait(self.poll)
                wake.clear()

    def run_once(self) -> bool:
        """Deliver one due page; whether there was one."""
        claimed = self.claim()
        if claimed is None:
            return False
        target = self.targets.get(claimed.target)
        if target is None:
            detail = (
                f"no target {claimed.target!r} is configured (escalation.targets); "
                "it was removed after the page was queued"
            )
            delivery = Delivery(claimed.target, False, detail, 0)
        else:
            delivery = target.send(claimed.page)
        self.record(claimed, delivery)
        return True

    def claim(self) -> Claimed | None:
        with self.db.transaction() as session:
            now = self.clock.now()
            stmt = (
                select(PageDelivery)
                .where(
                    or_(
                        (PageDelivery.state == "pending") & (PageDelivery.due_at <= now),
                        (PageDelivery.state == "sending") & (PageDelivery.lease_until < now),
                    )
                )
                .order_by(PageDelivery.due_at, PageDelivery.id)
                .limit(1)
            )
            if self.db.is_postgres:
                stmt = stmt.with_for_update(skip_locked=True)
            row = session.scalars(stmt).first()
            if row is None:
                return None
            row.state, row.attempts = "sending", row.attempts + 1
            row.lease_owner, row.lease_until = self.owner, now + LEASE
            incident = incidents.get(session, row.incident_number)
            page = Page(
                number=incident.number,
                severity=cast(Severity, incident.severity),
                title=incident.title,
                summary=row.text,
                level=max(row.level, 0),
                event=cast(Event, row.event),
            )
            return Claimed(row.id, row.target, page)

    def record(self, claimed: Claimed, delivery: Delivery) -> None:
        with self.db.transaction() as session:
            now = self.clock.now()
            row = session.get(PageDelivery, claimed.row, with_for_update=True)
            if row is None or row.lease_owner != self.owner or row.state != "sending":
                return  # another pager took it over after our lease ran out
            row.state = "delivered" if delivery.ok else "failed"
            row.finished_at, row.lease_until = now, None
            row.detail = delivery.detail[:2000]
            incident = incidents.get(session, row.incident_number, lock=True)
            _logged(session, incident, row, delivery, now)


def _logged(
    session: Session,
    incident: Incident,
    row: PageDelivery,
    delivery: Delivery,
    now: datetime,
) -> None:
    what = "page" if row.event == "trigger" else f"{row.event} notice"
    if delivery.ok:
        kind, summary = "page.delivered", f"{what} delivered to {row.target}: {delivery.detail}"
    else:
        kind = "page.failed"
        summary = (
            f"{what} NOT delivered to {row.target} after {delivery.attempts} attempt(s): "
            f"{delivery.detail}"
        )
    data = {"target": row.target, "event": row.event, "delivery": row.id,
            "attempts": delivery.attempts}  # fmt: skip
    log.append(session, incident, at=now, actor=BOT, type=kind, summary=summary, data=data)

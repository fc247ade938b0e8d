"""Is anyone firing the timers? Workers' heartbeats and how late the timers are.

A stalled bot must itself be alerting: `/readyz` fails its `timers` check and
`runbook_bot_timers_late_seconds` rises when a pending timer is overdue by more than
`timers_late_after`, whatever the reason (no worker running, workers wedged, database
too slow). Heartbeats say which workers are alive (`runbook-bot workers`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import cast

from sqlalchemy import Table, func, select, update
from sqlalchemy.orm import Session

from bot.clock import as_utc
from bot.db import insert_new
from bot.escalation.ladder import oldest_due
from bot.escalation.models import PageDelivery, WorkerHeartbeat

_BEATS = cast(Table, WorkerHeartbeat.__table__)


@dataclass(frozen=True)
class Health:
    timers_late: float
    """Seconds the most overdue pending timer is late; 0 when none is due."""
    heartbeat_age: float | None
    """Seconds since the freshest worker heartbeat; None when no worker ever beat."""
    pages: dict[str, int]
    """Page deliveries by state."""


def beat(session: Session, owner: str, started: datetime, now: datetime) -> None:
    """Record that worker `owner` is alive."""
    values = {"owner": owner, "started_at": started, "beat_at": now}
    if not insert_new(session, _BEATS, values, index_elements=["owner"]):
        session.execute(update(_BEATS).where(_BEATS.c.owner == owner).values(beat_at=now))


def status(session: Session, now: datetime) -> Health:
    due = oldest_due(session, now)
    late = (now - as_utc(due)).total_seconds() if due is not None else 0.0
    last = session.scalar(select(func.max(WorkerHeartbeat.beat_at)))
    age = (now - as_utc(last)).total_seconds() if last is not None else None
    pages = {"pending": 0, "sending": 0, "delivered": 0, "failed": 0}
    counts = session.execute(
        select(PageDelivery.state, func.count()).group_by(PageDelivery.state)
    ).all()
    pages.update({state: count for state, count in counts})
    return Health(max(late, 0.0), age, pages)


def workers(session: Session) -> list[WorkerHeartbeat]:
    return list(session.scalars(select(WorkerHeartbeat).order_by(WorkerHeartbeat.beat_at.desc())))

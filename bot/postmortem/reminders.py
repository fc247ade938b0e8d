"""Follow-up reminders: the owner hears of an item the day before its deadline and on the
day, and when it is a week overdue the incident's owner hears too.

"What day is it" is the working-hours timezone's (`escalation.working_hours.timezone`), and
reminders go out from that day's working start (`working_hours.start`), not at midnight.
Each reminder is sent once per deadline value: the follow-up's `reminded_*` column records
the deadline it went out for, so a moved deadline reminds again. The worker sends them
(`send`) with the follow-up rows locked (`FOR UPDATE SKIP LOCKED` on PostgreSQL), and the
column is set in the transaction that queues the message, so two replicas never both send
one. An owner that is not a Slack user (`slack:U...`) cannot be reached: that is logged,
and the reminder counts as done (it is not retried every minute).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Literal

from sqlalchemy import or_, select
from sqlalchemy.orm import Session

from bot.config import Settings
from bot.escalation.ladder import ChatPager
from bot.escalation_settings import zone
from bot.incidents.models import Incident
from bot.postmortem.models import Followup

logger = logging.getLogger(__name__)

Kind = Literal["before", "due", "overdue"]
OVERDUE_AFTER = timedelta(days=7)
"""How long past its deadline an open item is escalated to the incident's owner."""
BATCH = 200
"""Follow-ups looked at per sweep (the oldest deadlines first)."""
SLACK_USER = "slack:U"
_COLUMN = {"before": "reminded_before", "due": "reminded_due", "overdue": "reminded_overdue"}


@dataclass(frozen=True)
class Reminder:
    followup: int
    incident: int
    kind: Kind
    deadline: date
    to: tuple[str, ...]
    """Who is told: the item's owner, and for `overdue` the incident's owner too."""
    text: str


def today(now: datetime, settings: Settings) -> date:
    """The date at `now` in the working-hours timezone."""
    return now.astimezone(zone(settings.escalation.working_hours.timezone)).date()


def due_reminders(
    session: Session, now: datetime, settings: Settings, *, lock: bool = False
) -> list[Reminder]:
    """The reminders due at `now` and not yet sent (with `lock`, their rows are locked and
    rows another transaction holds are passed over)."""
    hours = settings.escalation.working_hours
    local = now.astimezone(zone(hours.timezone))
    if local.time() < hours.start:
        return []
    day = local.date()
    stmt = (
        select(Followup, Incident)
        .join(Incident, Incident.number == Followup.incident_number)
        .where(
            Followup.status == "open",
            Followup.owner.is_not(None),
            Followup.deadline.is_not(None),
            or_(
                (Followup.deadline == day + timedelta(days=1))
                & Followup.reminded_before.is_distinct_from(Followup.deadline),
                (Followup.deadline <= day)
                & (Followup.deadline > day - OVERDUE_AFTER)
                & Followup.reminded_due.is_distinct_from(Followup.deadline),
                (Followup.deadline <= day - OVERDUE_AFTER)
                & Followup.reminded_overdue.is_distinct_from(Followup.deadline),
            ),
        )
        .order_by(Followup.deadline, Followup.id)
        .limit(BATCH)
    )
    if lock and session.get_bind().dialect.name == "postgresql":
        stmt = stmt.with_for_update(of=Followup, skip_locked=True)
    due = []
    for item, incident in session.execute(stmt):
        kind = _kind(item, day)
        if kind is not None:
            due.append(_reminder(item, incident, kind, day))
    return due


def send(session: Session, chat: ChatPager, now: datetime, settings: Settings) -> list[Reminder]:
    """Send the reminders due now, each once (its column is set in this transaction)."""
    sent = due_reminders(session, now, settings, lock=True)
    for reminder in sent:
        item = session.get(Followup, reminder.followup)
        assert item is not None
        setattr(item, _COLUMN[reminder.kind], reminder.deadline)
        for person in reminder.to:
            if person.startswith(SLACK_USER):
                chat.tell(session, person, reminder.text, now)
            else:
                logger.warning(
                    "follow-up #%s (INC-%s): %s is not a Slack user; the %s reminder "
                    "cannot reach them",
                    reminder.followup,
                    reminder.incident,
                    person,
                    reminder.kind,
                )
    session.flush()
    return sent


def _kind(item: Followup, day: date) -> Kind | None:
    """Which reminder is due on `day`, if not sent for this deadline yet: the day-before
    one only on that day; the deadline one on the day or, found late, until the item is
    a week overdue; then the overdue one."""
    deadline = item.deadline
    assert deadline is not None
    if day >= deadline + OVERDUE_AFTER:
        return "overdue" if item.reminded_overdue != deadline else None
    if day >= deadline:
        return "due" if item.reminded_due != deadline else None
    if day == deadline - timedelta(days=1):
        return "before" if item.reminded_before != deadline else None
    return None


def _reminder(item: Followup, incident: Incident, kind: Kind, day: date) -> Reminder:
    assert item.owner is not None and item.deadline is not None
    deadline = item.deadline
    what = f'follow-up #{item.id} "{item.title}" ({item.type}) of {incident.ref} "{incident.title}"'
    if kind == "before":
        head = f"Reminder: {what} is due tomorrow, {deadline:%Y-%m-%d}."
    elif kind == "due" and day == deadline:
        head = f"Reminder: {what} is due today, {deadline:%Y-%m-%d}."
    elif kind == "due":
        head = f"Reminder: {what} was due {deadline:%Y-%m-%d}, {(day - deadline).days}d ago."
    else:
        head = (
            f"Overdue: {what} was due {deadline:%Y-%m-%d}, more than "
            f"{OVERDUE_AFTER.days} days ago; its owner is {item.owner}."
        )
    to = [item.owner]
    if kind == "overdue" and incident.owner is not None and incident.owner != item.owner:
        to.append(incident.owner)
    how = (
        f" When it is done: `runbook-bot followup done {item.id} --as you`; if it needs "
        f"more time, move its deadline: `runbook-bot followup set {item.id} --deadline "
        f"YYYY-MM-DD --as you`."
    )
    link = f" Tracker: {item.link}" if item.link else ""
    return Reminder(item.id, incident.number, kind, deadline, tuple(to), head + how + link)

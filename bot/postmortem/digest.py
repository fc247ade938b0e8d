"""The weekly digest (seed 34.4: what does not page goes to the weekly report): posted to
the incidents channel once a week, on `digest_day` at `digest_time` in the working-hours
timezone, for the last full week (Monday to Sunday) before that day.

It lists the follow-ups still open (the overdue ones first and counted apart) and those
closed in the week, each with owner and deadline, and the incidents opened in the week,
each with severity, MTTA (acknowledged - opened) and MTTR (resolved - opened), with the
week's means and medians. The week's `Digest` row, inserted with `insert_new`, makes one
worker post it across replicas; a digest found late (the bot was down) is still posted,
once, since it is a report and not a page. Only the latest week due is posted: weeks
missed before it are not caught up. A quiet week (no incident opened, no follow-up open
or closed) posts nothing.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from typing import cast

from sqlalchemy import Table, select
from sqlalchemy.orm import Session

from bot.clock import as_utc
from bot.config import Settings
from bot.db import insert_new
from bot.durations import format_duration
from bot.escalation.ladder import ChatPager
from bot.escalation_settings import DAYS, zone
from bot.incidents.models import Incident
from bot.postmortem.models import Digest, Followup

SHOWN = 30
"""Lines per list at most (the counts are always complete)."""
LATE = timedelta(days=1)
"""A digest posted later than this after its time says so."""
_DIGESTS = cast(Table, Digest.__table__)


@dataclass(frozen=True)
class Week:
    monday: date
    starts: datetime
    """Monday 00:00 local, as UTC."""
    ends: datetime
    """The next Monday 00:00 local, as UTC."""
    due: datetime
    """When its digest is posted (UTC)."""


def due_week(now: datetime, settings: Settings) -> Week:
    """The week whose digest is due at `now`: the last full week before the latest
    digest time at or before `now`."""
    tz = zone(settings.escalation.working_hours.timezone)
    local = now.astimezone(tz)
    this_monday = local.date() - timedelta(days=local.weekday())
    day = this_monday + timedelta(days=DAYS.index(settings.digest_day))
    posting = datetime.combine(day, settings.digest_time, tz)
    if posting > local:
        posting -= timedelta(days=7)
        day -= timedelta(days=7)
    monday = day - timedelta(days=day.weekday()) - timedelta(days=7)
    starts = datetime.combine(monday, time(0), tz)
    ends = datetime.combine(monday + timedelta(days=7), time(0), tz)
    return Week(monday, as_utc(starts), as_utc(ends), as_utc(posting))


def post_due(
    session: Session, chat: ChatPager, now: datetime, settings: Settings, owner: str
) -> Week | None:
    """Post the digest due now unless it was taken already; the week taken, if any (a
    week with nothing to report is taken but not posted)."""
    week = due_week(now, settings)
    values = {"week": week.monday, "posted_at": now, "posted_by": owner}
    if not insert_new(session, _DIGESTS, values, index_elements=["week"]):
        return None
    text = digest(session, week, now, settings)
    if text is not None:
        chat.post(session, text, now)
    return week


def digest(session: Session, week: Week, now: datetime, settings: Settings) -> str | None:
    """The digest's text (Slack mrkdwn); None for a quiet week: no incident opened in it,
    no follow-up open or closed in it."""
    today = now.astimezone(zone(settings.escalation.working_hours.timezone)).date()
    quiet = (
        session.scalar(
            select(Incident.number)
            .where(Incident.opened_at >= week.starts, Incident.opened_at < week.ends)
            .limit(1)
        )
        is None
        and session.scalar(
            select(Followup.id)
            .where(
                (Followup.status == "open")
                | ((Followup.closed_at >= week.starts) & (Followup.closed_at < week.ends))
            )
            .limit(1)
        )
        is None
    )
    if quiet:
        return None
    last = week.monday + timedelta(days=6)
    head = f"*Weekly incident digest, {week.monday:%Y-%m-%d} to {last:%Y-%m-%d}*"
    if now - week.due > LATE:
        head += f" (posted late: it was due {week.due:%Y-%m-%d %H:%M} UTC)"
    lines = [head, ""]
    lines += _incidents(session, week)
    lines.append("")
    lines += _followups(session, week, today)
    return "\n".join(lines)


# --- incidents ---------------------------------------------------------------------------


def _incidents(session: Session, week: Week) -> list[str]:
    opened = list(
        session.scalars(
            select(Incident)
            .where(Incident.opened_at >= week.starts, Incident.opened_at < week.ends)
            .order_by(Incident.number)
        )
    )
    if not opened:
        return ["*Incidents opened:* none."]
    severities: dict[str, int] = {}
    for incident in opened:
        severities[incident.severity] = severities.get(incident.severity, 0) + 1
    counts = ", ".join(f"{n} {severity}" for severity, n in sorted(severities.items()))
    acks = [d for d in (_mtta(i) for i in opened) if d is not None]
    fixes = [d for d in (_mttr(i) for i in opened) if d is not None]
    lines = [
        f"*Incidents opened:* {len(opened)} ({counts})",
        f"MTTA: {_stats(acks, len(opened), 'acknowledged')}",
        f"MTTR: {_stats(fixes, len(opened), 'resolved')}",
    ]
    for incident in opened[:SHOWN]:
        mtta, mttr = _mtta(incident), _mttr(incident)
        lines.append(
            f"- {incident.ref} {incident.severity} {incident.status}: {incident.title} "
            f"(MTTA {_shown(mtta, 'not acknowledged')}, MTTR {_shown(mttr, 'not resolved')}, "
            f"owner {incident.owner or 'none'})"
        )
    if len(opened) > SHOWN:
        lines.append(f"- and {len(opened) - SHOWN} more")
    return lines


def _mtta(incident: Incident) -> timedelta | None:
    if incident.acknowledged_at is None:
        return None
    return as_utc(incident.acknowledged_at) - as_utc(incident.opened_at)


def _mttr(incident: Incident) -> timedelta | None:
    if incident.resolved_at is None:
        return None
    return as_utc(incident.resolved_at) - as_utc(incident.opened_at)


def _stats(values: list[timedelta], total: int, what: str) -> str:
    if not values:
        return f"none {what}"
    seconds = [v.total_seconds() for v in values]
    mean = timedelta(seconds=round(statistics.mean(seconds)))
    median = timedelta(seconds=round(statistics.median(seconds)))
    return (
        f"mean {format_duration(mean)}, median {format_duration(median)} "
        f"({len(values)} of {total} {what})"
    )


def _shown(value: timedelta | None, missing: str) -> str:
    return format_duration(value) if value is not None else missing


# --- follow-ups --------------------------------------------------------------------------


def _followups(session: Session, week: Week, today: date) -> list[str]:
    still_open = list(
        session.scalars(
            select(Followup)
            .where(Followup.status == "open")
            .order_by(Followup.deadline.is_(None), Followup.deadline, Followup.id)
        )
    )
    closed = list(
        session.scalars(
            select(Followup)
            .where(
                Followup.status != "open",
                Followup.closed_at >= week.starts,
                Followup.closed_at < week.ends,
            )
            .order_by(Followup.closed_at, Followup.id)
        )
    )
    overdue = [f for f in still_open if f.deadline is not None and f.deadline < today]
    rest = [f for f in still_open if f not in overdue]
    lines = [
        f"*Follow-ups:* {len(still_open)} open, {len(overdue)} of them overdue; "
        f"{len(closed)} closed this week"
    ]
    lines += _list("Overdue", overdue, today)
    lines += _list("Open", rest, today)
    lines += _list("Closed this week", closed, today)
    if still_open:
        lines.append("Close one with `runbook-bot followup done ID --as you`.")
    return lines


def _list(title: str, items: list[Followup], today: date) -> list[str]:
    if not items:
        return []
    lines = [f"{title}:"]
    for item in items[:SHOWN]:
        deadline = f"due {item.deadline:%Y-%m-%d}" if item.deadline else "no deadline"
        if item.status == "open" and item.deadline is not None and item.deadline < today:
            deadline += f", {(today - item.deadline).days}d overdue"
        if item.status != "open":
            deadline = f"{item.status}; {deadline}"
        lines.append(
            f"- #{item.id} INC-{item.incident_number} {item.title} "
            f"({item.owner or 'no owner'}, {deadline})"
        )
    if len(items) > SHOWN:
        lines.append(f"- and {len(items) - SHOWN} more")
    return lines

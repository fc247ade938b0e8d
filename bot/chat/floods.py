"""A flood of one pattern is one message, not a card per incident.

A thousand warning incidents of one alertname would queue a thousand cards, sent at about
one a second: a quarter of an hour of cards nobody reads, and what comes next waits behind
them. So below critical, a channel gets at most `slack_flood_cap` cards per pattern (the
alertname) and severity within `slack_flood_window`; each further incident of the flood
gets no card of its own but is counted in one summary message of that window ("37 more
warning incidents of GPUTempHigh"), posted once and then updated in place. The incidents
themselves are untouched: they are in the console and `/incident list`, and their pages
are still sent. Critical incidents always get their card.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import cast

from sqlalchemy import Table, func, select
from sqlalchemy.orm import Session

from bot.chat.models import ChatCard, ChatSummary
from bot.db import insert_new
from bot.incidents.lifecycle import Severity
from bot.incidents.models import Incident

_SUMMARIES = cast(Table, ChatSummary.__table__)
PATTERN_LENGTH = 200


@dataclass(frozen=True)
class FloodCap:
    cap: int
    """Cards per pattern, severity and window; 0: no cap."""
    window: timedelta


def pattern_of(incident: Incident) -> str:
    """What the incidents of one flood share: the alertname of their alerts."""
    for labels in (incident.group_labels, incident.common_labels):
        name = (labels or {}).get("alertname")
        if name:
            return str(name)[:PATTERN_LENGTH]
    return incident.title[:PATTERN_LENGTH]


def fold(
    session: Session, card: ChatCard, incident: Incident, now: datetime, cap: FloodCap
) -> ChatSummary | None:
    """The summary `card`'s incident is counted in instead of a card, or None when it is
    within the cap (or critical) and gets its card."""
    if cap.cap == 0 or incident.severity == Severity.CRITICAL:
        return None
    shown = session.scalar(
        select(func.count())
        .select_from(ChatCard)
        .join(Incident, Incident.number == ChatCard.incident_number)
        .where(
            ChatCard.channel == card.channel,
            ChatCard.pattern == card.pattern,
            ChatCard.summary_id.is_(None),
            ChatCard.incident_number != card.incident_number,
            Incident.severity == incident.severity,
            Incident.opened_at >= now - cap.window,
        )
    )
    if int(shown or 0) < cap.cap:
        return None
    key = {
        "channel": card.channel,
        "pattern": card.pattern or "",
        "severity": incident.severity,
        "window": int(now.timestamp() // cap.window.total_seconds()),
    }
    values = {
        **key,
        "count": 0,
        "first_incident": incident.number,
        "last_incident": incident.number,
        "opened_at": now,
        "queued": False,
    }
    insert_new(session, _SUMMARIES, values, index_elements=list(key))
    summary = session.scalars(select(ChatSummary).filter_by(**key).with_for_update()).one()
    summary.count += 1
    summary.first_incident = min(summary.first_incident, incident.number)
    summary.last_incident = max(summary.last_incident, incident.number)
    card.summary_id = summary.id
    return summary

"""Who is on call: the rotation in settings, unless someone took the pager (an override).

The rotation counts shifts of `every` from `start` at `handover` in wall-clock time of its
timezone, so a daily 09:00 hand-over stays at 09:00 across daylight-saving changes. An
override (`/incident oncall @user`) holds from when it is set until the next hand-over of
the rotation (or for the time given). With neither, `oncall` pages the responders
(`people`, `roles`, console users and `slack_role_groups`).

A hand-over is any change of who is on call. The worker notices it (`handover_due`) and
sends the outgoing and the incoming on-call a summary of every incident not yet closed
(seed 34.4: the hand-over walks through every open alert); the hand-over's row, keyed by
its moment, makes that happen once across replicas.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal, cast

from sqlalchemy import Table, select
from sqlalchemy.orm import Session

from bot.clock import as_utc
from bot.config import Settings
from bot.db import insert_new
from bot.errors import ConfigInvalid
from bot.escalation.models import OncallHandover, OncallOverride
from bot.escalation_settings import Rotation, zone
from bot.incidents.models import Incident
from bot.people import Directory

Source = Literal["override", "rotation", "nobody"]
DEFAULT_OVERRIDE = timedelta(hours=12)
"""How long an override lasts when there is no rotation to end it and no time was given."""
MAX_OVERRIDE = timedelta(days=28)
STALE_HANDOVER = timedelta(hours=1)
"""A hand-over found later than this (the bot was down) is recorded, not announced."""
_HANDOVERS = cast(Table, OncallHandover.__table__)


@dataclass(frozen=True)
class OnCall:
    person: str | None
    source: Source
    since: datetime | None
    until: datetime | None


def shift(rotation: Rotation, timezone: str, at: datetime) -> OnCall:
    """The rotation's shift at `at`."""
    tz = zone(rotation.timezone or timezone)
    anchor = datetime.combine(rotation.start, rotation.handover, tz)
    local = at.astimezone(tz)
    # Same tzinfo on both sides: Python subtracts wall-clock times.
    number = (local.replace(tzinfo=None) - anchor.replace(tzinfo=None)) // rotation.every
    begins = anchor + number * rotation.every
    person = rotation.people[number % len(rotation.people)]
    return OnCall(person, "rotation", as_utc(begins), as_utc(begins + rotation.every))


def current(session: Session, settings: Settings, now: datetime) -> OnCall:
    """Who is on call at `now`: the latest override in force, else the rotation."""
    override = session.scalars(
        select(OncallOverride)
        .where(OncallOverride.starts_at <= now, OncallOverride.ends_at > now)
        .order_by(OncallOverride.set_at.desc(), OncallOverride.id.desc())
        .limit(1)
    ).first()
    if override is not None:
        return OnCall(override.person, "override", as_utc(override.starts_at),
                      as_utc(override.ends_at))  # fmt: skip
    escalation = settings.escalation
    if escalation.oncall is not None:
        return shift(escalation.oncall, escalation.working_hours.timezone, now)
    return OnCall(None, "nobody", None, None)


def following(session: Session, settings: Settings, now: datetime) -> OnCall | None:
    """Who is on call when the current on-call's time ends (None: it does not end)."""
    ends = current(session, settings, now).until
    return current(session, settings, ends) if ends is not None else None


def paged(session: Session, settings: Settings, now: datetime) -> list[str]:
    """Whom `oncall` pages now: the on-call person, else every responder."""
    who = current(session, settings, now)
    if who.person is not None:
        return [who.person]
    return role_holders(settings, "responder")


def role_holders(settings: Settings, role: str) -> list[str]:
    """The people holding `role` (`people`, `roles`, console users: the people directory),
    then the Slack user groups of it (`slack:S…`)."""
    people = [person.id for person in Directory(settings).people if role in person.roles]
    groups = [f"slack:{group}" for group in settings.slack_role_groups.get(cast(Any, role), [])]
    return people + groups


def take(
    session: Session,
    settings: Settings,
    person: str,
    set_by: str,
    now: datetime,
    length: timedelta | None = None,
) -> OncallOverride:
    """Make `person` the on-call from now until the next hand-over (or for `length`)."""
    if length is not None and not timedelta(minutes=1) <= length <= MAX_OVERRIDE:
        raise ConfigInvalid("an on-call override lasts from 1m to 28d")
    if length is None:
        rotation = settings.escalation.oncall
        if rotation is not None:
            ends = shift(rotation, settings.escalation.working_hours.timezone, now).until
            assert ends is not None
        else:
            ends = now + DEFAULT_OVERRIDE
    else:
        ends = now + length
    override = OncallOverride(person=person, starts_at=now, ends_at=ends, set_by=set_by,
                              set_at=now)  # fmt: skip
    session.add(override)
    session.flush()
    return override


# --- hand-over ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Handover:
    at: datetime
    outgoing: str | None
    incoming: str
    announce: bool
    """False when it is found too late (or is the first ever): recorded, not sent."""


def handover_due(
    session: Session, settings: Settings, now: datetime, owner: str
) -> Handover | None:
    """Claim the hand-over to whoever is on call now, if it has not happened yet; once
    across workers (its row is inserted only once)."""
    who = current(session, settings, now)
    if who.person is None or who.since is None:
        return None
    last = session.scalars(
        select(OncallHandover).order_by(OncallHandover.at.desc()).limit(1)
    ).first()
    if last is not None and (as_utc(last.at) >= who.since or last.incoming == who.person):
        return None
    outgoing = last.incoming if last is not None else None
    values = {
        "at": who.since, "outgoing": outgoing, "incoming": who.person,
        "posted_at": now, "posted_by": owner, "incidents": 0,
    }  # fmt: skip
    if not insert_new(session, _HANDOVERS, values, index_elements=["at"]):
        return None
    announce = last is not None and now - who.since <= STALE_HANDOVER
    return Handover(who.since, outgoing, who.person, announce)


def unclosed(session: Session) -> list[Incident]:
    """Every incident not yet closed, oldest first (what a hand-over walks through)."""
    return list(
        session.scalars(
            select(Incident)
            .where(Incident.status.in_(("open", "acknowledged", "resolved")))
            .order_by(Incident.number)
            .limit(200)
        )
    )


def summary(incidents: list[Incident], handover: Handover, now: datetime) -> str:
    """The hand-over message: who hands to whom, then one line per unclosed incident."""
    head = (
        f"On-call hand-over at {handover.at:%Y-%m-%d %H:%M} UTC: "
        f"{handover.outgoing or 'nobody'} -> {handover.incoming}. "
    )
    if not incidents:
        return head + "No incident is open: nothing to hand over."
    lines = [head + f"{len(incidents)} incident(s) not closed:"]
    for incident in incidents:
        age = _age(now - as_utc(incident.opened_at))
        owner = incident.owner or "no owner"
        lines.append(
            f"- {incident.ref} {incident.severity} {incident.status} ({owner}, opened {age} "
            f"ago): {incident.title}"
        )
    return "\n".join(lines)


def _age(delta: timedelta) -> str:
    minutes = int(delta.total_seconds() // 60)
    if minutes < 60:
        return f"{minutes}m"
    if minutes < 48 * 60:
        return f"{minutes // 60}h{minutes % 60:02d}m"
    return f"{minutes // 1440}d"

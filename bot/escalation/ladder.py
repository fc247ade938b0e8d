"""The escalation ladder: arm, fire and stop the timers of one incident.

Every function works in the caller's transaction, so a timer is armed, replaced or
cancelled together with the change that caused it (rows are written with Core statements
on the session's connection: no autoflush of the caller's pending ORM changes, which ingest
writes in bulk itself): an incident opens (ingest arms its first
level), is acknowledged (the ladder stops; an acknowledgement timeout is armed), silenced,
resolved, reopened or raised to a higher severity (its ladder starts again).

`fire_due` is the worker's part. It takes due timers with `FOR UPDATE SKIP LOCKED` and then
each incident row with `SKIP LOCKED` too: an incident someone is acknowledging right now is
left for the next pass instead of waited for, so firing never holds a timer while waiting
for an incident that another transaction holds (which, with acknowledge locking the
incident and then its timer, would deadlock). Whichever commits first wins and the log
shows the order: a page and then the acknowledgement, or the acknowledgement and no page.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import cache, lru_cache
from typing import Any, Literal, Protocol, cast

from sqlalchemy import Table, insert, select, update
from sqlalchemy.orm import Session

from bot.clock import as_utc
from bot.config import Settings
from bot.durations import format_duration
from bot.errors import TransitionRefused
from bot.escalation import oncall
from bot.escalation.models import EscalationTimer, IncidentEscalation, PageDelivery
from bot.escalation_settings import FrozenPolicy, Policy
from bot.incidents import log
from bot.incidents.lifecycle import Status
from bot.incidents.models import Incident

logger = logging.getLogger(__name__)

BOT = log.Actor("bot", "runbook-bot", "runbook-bot")
BATCH = 25
"""Timers fired per transaction: their incidents stay locked until it commits."""
Kind = Literal["level", "ack", "resume"]
_TIMERS = cast(Table, EscalationTimer.__table__)
_LADDERS = cast(Table, IncidentEscalation.__table__)
_PAGES = cast(Table, PageDelivery.__table__)
_FIRES_WHILE = {
    "level": (Status.OPEN,),
    "ack": (Status.ACKNOWLEDGED,),
    "resume": (Status.OPEN, Status.ACKNOWLEDGED),
}


class ChatPager(Protocol):
    """What paging needs of chat (`bot.chat.Chat` has it): call a person or a user group
    to the incident, or tell a person or the incidents channel something, queued in the
    caller's transaction."""

    def page(
        self, session: Session, incident: int, person: str, text: str, now: datetime
    ) -> None: ...

    def tell(self, session: Session, person: str, text: str, now: datetime) -> None:
        """A direct message to `person` about no incident in particular (hand-overs)."""
        ...

    def post(self, session: Session, text: str, now: datetime) -> None:
        """A message to the incidents channel about no incident in particular (the weekly
        postmortem digest)."""
        ...


@lru_cache(maxsize=64)
def _parse(document: str) -> FrozenPolicy:
    return FrozenPolicy.model_validate_json(document)


def frozen_of(row: IncidentEscalation) -> FrozenPolicy:
    """The policy an incident froze (parsed once per distinct document)."""
    return _parse(json.dumps(row.policy, sort_keys=True))


# --- arming ------------------------------------------------------------------------------


def arm_new(
    session: Session, number: int, severity: str, now: datetime, frozen: dict[str, Any]
) -> datetime | None:
    """Freeze the policy onto an incident that just opened and arm its first level; when
    it will page (None: its severity never pages). Two inserts: ingest calls this."""
    session.connection().execute(
        insert(_LADDERS).values(
            incident_number=number,
            policy=frozen,
            severity=severity,
            round=0,
            level=-1,
            updated_at=now,
        )  # fmt: skip
    )
    policy = _parse(json.dumps(frozen, sort_keys=True))
    return _arm_first(session, number, policy, severity, now)


def restart(
    session: Session,
    incident: Incident,
    now: datetime,
    reason: str,
    frozen: dict[str, Any],
) -> datetime | None:
    """Start the ladder of the incident's (new) severity from its first level: it reopened,
    or a more severe alert joined it. An incident from before escalation existed freezes
    `frozen` now."""
    cancel(session, incident.number, now, reason)
    row = session.get(IncidentEscalation, incident.number)
    if row is None:
        row = IncidentEscalation(incident_number=incident.number, policy=frozen, updated_at=now)
        session.add(row)
    row.severity, row.round, row.level = incident.severity, 0, -1
    row.silenced_until, row.updated_at = None, now
    session.flush()
    return _arm_first(session, incident.number, frozen_of(row), incident.severity, now)


def _arm_first(
    session: Session, number: int, policy: FrozenPolicy, severity: str, now: datetime
) -> datetime | None:
    ladder = policy.policies.get(cast(Any, severity))
    if ladder is None or not ladder.levels:
        return None
    due = deadline(policy, ladder, now + ladder.levels[0].after)
    arm(session, number, "level", 0, 0, due, now)
    return due


def arm(
    session: Session, number: int, kind: Kind, round_: int, level: int, due: datetime,
    now: datetime,
) -> None:  # fmt: skip
    session.connection().execute(
        insert(_TIMERS).values(
            incident_number=number,
            kind=kind,
            round=round_,
            level=level,
            due_at=due,
            state="pending",
            created_at=now,
            note="",
        )  # fmt: skip
    )


def deadline(policy: FrozenPolicy, ladder: Policy, at: datetime) -> datetime:
    return policy.working_hours.next_start(at) if ladder.working_hours_only else at


def next_level(ladder: Policy, round_: int, level: int) -> tuple[int, int, timedelta] | None:
    """(round, level, wait) of the rung after `level` of `round_`; None at the top."""
    if level + 1 < len(ladder.levels):
        return round_, level + 1, ladder.levels[level + 1].after
    if round_ < ladder.repeat:
        return round_ + 1, 0, ladder.repeat_after
    return None


# --- stopping ----------------------------------------------------------------------------


def cancel(session: Session, number: int, now: datetime, reason: str) -> int:
    """Cancel the incident's pending timer; how many (0 or 1)."""
    result = session.connection().execute(
        update(_TIMERS)
        .where(_TIMERS.c.incident_number == number, _TIMERS.c.state == "pending")
        .values(state="cancelled", cancelled_at=now, note=reason[:500])
        .returning(_TIMERS.c.id)
    )
    return len(result.all())


def acknowledged(session: Session, incident: Incident, actor: log.Actor, now: datetime) -> None:
    """The incident was just acknowledged (row locked): stop the ladder, arm the
    acknowledgement timeout, tell paged targets."""
    cancel(session, incident.number, now, f"acknowledged by {actor.name}")
    row = session.get(IncidentEscalation, incident.number)
    if row is None:
        return
    ladder = frozen_of(row).policies.get(cast(Any, row.severity))
    level = max(row.level, 0)
    if row.silenced_until is not None and as_utc(row.silenced_until) > now:
        # Silenced: the silence still ends when it was set to; its end arms the timeout.
        arm(session, incident.number, "resume", row.round, level, row.silenced_until, now)
    elif ladder is not None and ladder.ack_timeout is not None:
        row.silenced_until = None
        arm(session, incident.number, "ack", row.round, level, now + ladder.ack_timeout, now)
    _follow_up(session, incident, "acknowledge", now, f"acknowledged by {actor.name}")


def stopped(session: Session, incident: Incident, now: datetime, why: str) -> None:
    """The incident is over (resolved, closed): no more pages; paged targets hear it."""
    cancel(session, incident.number, now, why)
    _follow_up(session, incident, "resolve", now, why)


def silence(
    session: Session, incident: Incident, until: datetime, actor: log.Actor, now: datetime
) -> None:
    """Page nobody about this incident until `until`; then the ladder resumes where it was
    (or, acknowledged, its acknowledgement timeout starts)."""
    if not Status(incident.status).active:
        raise TransitionRefused(f"{incident.ref} is {incident.status}: nothing to silence")
    row = session.get(IncidentEscalation, incident.number)
    cancel(session, incident.number, now, f"silenced by {actor.name}")
    if row is not None:
        row.silenced_until, row.updated_at = until, now
        arm(session, incident.number, "resume", row.round, max(row.level, 0), until, now)
    log.append(
        session,
        incident,
        at=now,
        actor=actor,
        type="escalation.silenced",
        summary=f"{actor.name} silenced paging for {incident.ref} until {until:%Y-%m-%d %H:%M} "
        f"UTC ({format_duration(until - now)})",
        data={"until": until.isoformat()},
    )


def _follow_up(session: Session, incident: Incident, event: str, now: datetime, why: str) -> None:
    """Send `event` (acknowledge, resolve) to each target that was paged about the
    incident and has not heard it yet, so PagerDuty closes its alert and robots' groups
    learn it is handled."""
    rows = session.execute(
        select(PageDelivery.target, PageDelivery.event)
        .where(PageDelivery.incident_number == incident.number)
        .order_by(PageDelivery.id)
    ).all()
    last: dict[str, str] = {}
    for target, sent in rows:
        if sent == "trigger" or target in last:
            last[target] = sent
    for target, sent in last.items():
        if sent != event:
            queue_page(session, incident.number, None, target, event, -1, why, now)


def queue_page(
    session: Session, number: int, timer: int | None, target: str, event: str, level: int,
    text: str, now: datetime,
) -> None:  # fmt: skip
    session.connection().execute(
        insert(_PAGES).values(
            incident_number=number,
            timer_id=timer,
            target=target,
            event=event,
            level=level,
            text=text[:4000],
            state="pending",
            attempts=0,
            due_at=now,
            created_at=now,
            detail="",
        )  # fmt: skip
    )


# --- firing ------------------------------------------------------------------------------


@dataclass
class Fired:
    """What one pass of `fire_due` did: lateness of each timer fired, in seconds."""

    late: list[float] = field(default_factory=list)
    skipped: int = 0


@dataclass(frozen=True)
class Paging:
    """Who a level reaches: chat people and groups, configured targets, and who could not
    be reached (with why)."""

    chat: list[str]
    targets: list[str]
    unreachable: list[str]


def fire_due(
    session: Session,
    now: datetime,
    settings: Settings,
    owner: str,
    chat: ChatPager | None,
    *,
    postgres: bool,
    limit: int = BATCH,
) -> Fired:
    """Fire up to `limit` due timers in the caller's transaction: a few statements for
    the whole batch (the timers, their incidents, their ladders; who is on call, once),
    and its writes flushed together at commit."""
    stmt = (
        select(EscalationTimer)
        .where(EscalationTimer.state == "pending", EscalationTimer.due_at <= now)
        .order_by(EscalationTimer.due_at)
        .limit(limit)
    )
    if postgres:
        stmt = stmt.with_for_update(skip_locked=True)
    fired = Fired()
    timers = session.scalars(stmt).all()
    if not timers:
        return fired
    numbers = {timer.incident_number for timer in timers}
    query = select(Incident).where(Incident.number.in_(numbers))
    if postgres:  # one held by an acknowledgement or ingest is left for the next pass
        query = query.with_for_update(skip_locked=True)
    held = {incident.number: incident for incident in session.scalars(query)}
    rows = {
        row.incident_number: row
        for row in session.scalars(
            select(IncidentEscalation).where(IncidentEscalation.incident_number.in_(held))
        )
    }
    firing = [timer for timer in timers if timer.incident_number in held]
    fired.skipped = len(timers) - len(firing)
    for timer in firing:
        timer.state, timer.fired_at, timer.fired_by = "fired", now, owner
        fired.late.append((now - timer.due_at).total_seconds())
    session.flush()  # one UPDATE; the next timers each arms must not meet these pending
    on_call = cache(lambda: oncall.paged(session, settings, now))
    with session.no_autoflush:
        for timer in firing:
            incident = held[timer.incident_number]
            _fire(session, incident, rows.get(incident.number), timer, now, settings, chat,
                  on_call)  # fmt: skip
    return fired


def _fire(
    session: Session,
    incident: Incident,
    row: IncidentEscalation | None,
    timer: EscalationTimer,
    now: datetime,
    settings: Settings,
    chat: ChatPager | None,
    on_call: Callable[[], list[str]],
) -> None:
    status = Status(incident.status)
    if row is None or status not in _FIRES_WHILE[timer.kind]:
        # Acknowledging, resolving and silencing cancel timers; this is only a safety net.
        timer.state, timer.note = "cancelled", f"{incident.ref} is {incident.status}"
        return
    policy = frozen_of(row)
    ladder = policy.policies.get(cast(Any, row.severity))
    if ladder is None or not ladder.levels:
        timer.state, timer.note = "cancelled", f"{row.severity} never pages"
        return
    row.updated_at = now
    if timer.kind == "resume":
        row.silenced_until = None
        if status == Status.ACKNOWLEDGED:
            if ladder.ack_timeout is not None:
                arm(session, incident.number, "ack", row.round, row.level,
                     now + ladder.ack_timeout, now)  # fmt: skip
            quiet = "the silence ended; the incident is acknowledged, so nobody is paged now"
            _note(session, incident, now, "escalation.resumed", quiet)
            return
    level = min(timer.level, len(ladder.levels) - 1)
    notify = ladder.levels[level].notify
    paging = recipients(
        notify, policy, settings, session, now, has_chat=chat is not None, on_call=on_call
    )
    if timer.kind == "ack":
        owner = incident.owner
        if owner and owner not in paging.chat:
            paging = Paging([owner, *paging.chat], paging.targets, paging.unreachable)
        then = None
        if ladder.ack_timeout is not None:
            then = now + ladder.ack_timeout
            arm(session, incident.number, "ack", timer.round, level, then, now)
        why = (
            f"acknowledged {format_duration(now - (incident.acknowledged_at or now))} ago by "
            f"{incident.acknowledged_by} and still not resolved"
        )
    else:
        row.round, row.level, row.paged_at = timer.round, level, now
        rung = next_level(ladder, timer.round, level)
        then = None
        if rung is not None:
            then = deadline(policy, ladder, now + rung[2])
            arm(session, incident.number, "level", rung[0], rung[1], then, now)
        opened = format_duration(now - incident.opened_at)
        why = "just opened" if level == 0 and timer.round == 0 else f"unacknowledged for {opened}"
    text = _page_text(incident, why, level, len(ladder.levels), timer.round)
    _send(session, incident, timer, paging, text, level, now, chat)
    _paged_entry(session, incident, timer, ladder, level, paging, why, then, now)


def _page_text(incident: Incident, why: str, level: int, levels: int, round_: int) -> str:
    again = f", round {round_ + 1}" if round_ else ""
    return (
        f"{incident.ref} {incident.severity}: {incident.title}. {why.capitalize()}: "
        f"escalation level {level + 1} of {levels}{again}. Acknowledge it on the card."
    )


def _send(
    session: Session,
    incident: Incident,
    timer: EscalationTimer,
    paging: Paging,
    text: str,
    level: int,
    now: datetime,
    chat: ChatPager | None,
) -> None:
    if chat is not None:
        for person in paging.chat:
            chat.page(session, incident.number, person, text, now)
    for target in paging.targets:
        queue_page(session, incident.number, timer.id, target, "trigger", level, text, now)


def _paged_entry(
    session: Session,
    incident: Incident,
    timer: EscalationTimer,
    ladder: Policy,
    level: int,
    paging: Paging,
    why: str,
    then: datetime | None,
    now: datetime,
) -> None:
    who = [*paging.chat, *(f"target {name}" for name in paging.targets)]
    what = "acknowledgement timeout" if timer.kind == "ack" else f"level {level + 1}"
    summary = f"paged {', '.join(who) or 'nobody'} ({what} of {len(ladder.levels)}: {why})"
    if paging.unreachable:
        summary += f"; not reachable: {', '.join(paging.unreachable)}"
    if then is not None:
        summary += f"; next page at {then:%H:%M} UTC unless acknowledged"
    late = (now - timer.due_at).total_seconds()
    data = {
        "timer": timer.id, "kind": timer.kind, "round": timer.round, "level": level,
        "chat": paging.chat, "targets": paging.targets, "unreachable": paging.unreachable,
        "next_at": then.isoformat() if then else None, "late_seconds": round(late, 3),
    }  # fmt: skip
    log.append(session, incident, at=now, actor=BOT, type="escalation.paged", summary=summary,
               data=data)  # fmt: skip


def _note(session: Session, incident: Incident, now: datetime, kind: str, summary: str) -> None:
    log.append(session, incident, at=now, actor=BOT, type=kind, summary=summary)


# --- who ---------------------------------------------------------------------------------


def recipients(
    notify: list[str],
    policy: FrozenPolicy,
    settings: Settings,
    session: Session,
    now: datetime,
    *,
    has_chat: bool = True,
    on_call: Callable[[], list[str]] | None = None,
) -> Paging:
    """Resolve a level's `notify` entries: the on-call of the moment, role holders (live
    settings: who holds a role is not frozen), people, user groups and targets.
    `has_chat`: whether this worker has a chat surface to page people through."""
    chat: list[str] = []
    targets: list[str] = []
    unreachable: list[str] = []

    def person(who: str, why: str) -> None:
        if console_user(settings, who):
            if not has_chat:
                unreachable.append(f"{who} (this worker was started without chat)")
            elif who not in chat:
                chat.append(who)
        elif not who.startswith("slack:"):
            unreachable.append(f"{who} ({why}: no chat address; write people as slack:U…)")
        elif not settings.slack_enabled:
            unreachable.append(f"{who} (Slack is not configured)")
        elif not has_chat:
            unreachable.append(f"{who} (this worker was started without chat)")
        elif who not in chat:
            chat.append(who)

    for entry in notify:
        if entry == "oncall":
            for who in on_call() if on_call else oncall.paged(session, settings, now):
                person(who, "on call")
        elif entry == "vendor":
            if not policy.vendor:
                unreachable.append("vendor (no vendor/IDC target: set escalation.vendor)")
            targets.extend(name for name in policy.vendor if name not in targets)
        elif entry.startswith("role:"):
            holders = oncall.role_holders(settings, entry.removeprefix("role:"))
            if not holders:
                unreachable.append(
                    f"{entry} (nobody holds it: people, roles, console users, slack_role_groups)"
                )
            for who in holders:
                person(who, entry)
        elif entry.startswith("target:"):
            name = entry.removeprefix("target:")
            if name not in targets:
                targets.append(name)
        else:
            person(entry, "named")
    return Paging(chat, targets, unreachable)


def console_user(settings: Settings, who: str) -> bool:
    """Whether `who` is reached through the web console: one of its users (or `admin`
    when an admin token is set) while the console is on."""
    console = settings.console
    if not console.enabled:
        return False
    has_token = console.admin_token is not None or console.admin_token_file is not None
    return who in console.users or (who == "admin" and has_token)


def reachable(settings: Settings, who: str) -> bool:
    """Whether chat can reach `who` at all: a console user, or a Slack id with Slack on."""
    return console_user(settings, who) or (who.startswith("slack:") and settings.slack_enabled)


# --- queries for the card, the CLI and /readyz -----------------------------------------------


@dataclass(frozen=True)
class Standing:
    """Where an incident's escalation stands, for its card."""

    level: int
    levels: int
    round: int
    paged_at: datetime | None
    next_kind: str | None
    next_at: datetime | None
    next_level: int | None
    next_round: int | None
    silenced_until: datetime | None
    working_hours_only: bool


def standing(session: Session, number: int) -> Standing | None:
    row = session.get(IncidentEscalation, number)
    if row is None:
        return None
    ladder = frozen_of(row).policies.get(cast(Any, row.severity))
    if ladder is None or not ladder.levels:
        return None
    timer = session.scalars(
        select(EscalationTimer).where(
            EscalationTimer.incident_number == number, EscalationTimer.state == "pending"
        )
    ).first()
    return Standing(
        level=row.level,
        levels=len(ladder.levels),
        round=row.round,
        paged_at=row.paged_at,
        next_kind=timer.kind if timer else None,
        next_at=timer.due_at if timer else None,
        next_level=timer.level if timer else None,
        next_round=timer.round if timer else None,
        silenced_until=row.silenced_until,
        working_hours_only=ladder.working_hours_only,
    )


def oldest_due(session: Session, now: datetime) -> datetime | None:
    """The due time of the most overdue pending timer (None: none is due)."""
    return session.scalars(
        select(EscalationTimer.due_at)
        .where(EscalationTimer.state == "pending", EscalationTimer.due_at <= now)
        .order_by(EscalationTimer.due_at)
        .limit(1)
    ).first()


def next_due(session: Session) -> datetime | None:
    return session.scalars(
        select(EscalationTimer.due_at)
        .where(EscalationTimer.state == "pending")
        .order_by(EscalationTimer.due_at)
        .limit(1)
    ).first()

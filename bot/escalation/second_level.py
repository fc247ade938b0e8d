"""The second line: who the next level of an incident's escalation (level 2 of its
policy) reaches, when that level was last paged, and paging it now.

A first responder who approved a step that needs two people is waiting for a second
person; the card says who that is ("second line: Bob, paged 03:14:07 UTC") and offers
to page them now instead of waiting for the ladder. `page_now` pages exactly as the ladder
would when the level's timer fires (chat people through `ChatPager`, configured targets
through the pager's queue), in the caller's transaction, and writes an
`escalation.paged` entry (`data.kind` = `now`, who asked and why). On an open incident
the ladder moves to that level, so its timer does not page the same people again.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, cast

from sqlalchemy import select
from sqlalchemy.orm import Session

from bot.config import Settings
from bot.errors import TransitionRefused
from bot.escalation import ladder
from bot.escalation.models import IncidentEscalation
from bot.escalation_settings import FrozenPolicy, Policy
from bot.incidents import log
from bot.incidents import service as incidents
from bot.incidents.lifecycle import Status
from bot.incidents.models import Incident, LogEntry
from bot.people import Directory

SECOND = 1
"""The second level's index in a policy's `levels`."""
PAGED = "escalation.paged"


@dataclass(frozen=True)
class SecondLine:
    """Who the second level pages (display names, in the policy's order), its 1-based
    level, and when it was last paged for this incident (None: not yet)."""

    names: tuple[str, ...]
    level: int
    paged_at: datetime | None


def second_line(
    session: Session, settings: Settings, number: int, now: datetime
) -> SecondLine | None:
    """Who level 2 reaches beyond level 1 (all it reaches when level 1 has them all).
    None when the incident does not page (its severity's ladder is empty, or it froze
    no policy) or its policy has no second level."""
    found = _ladder(session, number)
    if found is None:
        return None
    policy, rungs = found
    paging = _reach(session, settings, policy, rungs, now)
    first = ladder.recipients(rungs.levels[0].notify, policy, settings, session, now)
    beyond = ladder.Paging(
        [who for who in paging.chat if who not in first.chat],
        [name for name in paging.targets if name not in first.targets],
        paging.unreachable,
    )
    if beyond.chat or beyond.targets:  # the second line proper, not the on-call again
        paging = beyond
    return SecondLine(_names(settings, paging), SECOND + 1, _paged_at(session, number))


def page_now(
    session: Session,
    settings: Settings,
    number: int,
    *,
    actor: log.Actor,
    now: datetime,
    why: str,
    chat: ladder.ChatPager | None = None,
) -> SecondLine:
    """Page the second level now, as its timer would (the person asking is not paged);
    refused when the incident is over or its policy has no second level."""
    incident = incidents.get(session, number, lock=True)
    if not Status(incident.status).active:
        raise TransitionRefused(
            f"{incident.ref} is {incident.status}: nobody needs paging about it any more"
        )
    found = _ladder(session, number)
    if found is None:
        raise TransitionRefused(
            f"{incident.ref}'s escalation policy has no second level to page; "
            "call the person you need directly, or add a second level to the "
            f"{incident.severity} policy (escalation.policies)"
        )
    policy, rungs = found
    reached = _reach(session, settings, policy, rungs, now, has_chat=chat is not None)
    paging = ladder.Paging(
        [who for who in reached.chat if who != actor.id], reached.targets, reached.unreachable
    )
    reason = " ".join(why.split())[:300] or "a decision waits for a second person"
    text = (
        f"{incident.ref} {incident.severity}: {incident.title}. {actor.name} asks for the "
        f"second line now: {reason}. Open it on the card."
    )
    if chat is not None:
        for person in paging.chat:
            chat.page(session, number, person, text, now)
    for target in paging.targets:
        ladder.queue_page(session, number, None, target, "trigger", SECOND, text, now)
    row = session.get(IncidentEscalation, number)
    assert row is not None  # `_ladder` found it
    moved = _move_up(session, incident, row, policy, rungs, now, actor)
    _log(session, incident, actor, paging, len(rungs.levels), reason, moved, now)
    return SecondLine(_names(settings, paging), SECOND + 1, now)


def _ladder(session: Session, number: int) -> tuple[FrozenPolicy, Policy] | None:
    row = session.get(IncidentEscalation, number)
    if row is None:
        return None
    policy = ladder.frozen_of(row)
    rungs = policy.policies.get(cast(Any, row.severity))
    if rungs is None or len(rungs.levels) <= SECOND:
        return None
    return policy, rungs


def _reach(
    session: Session,
    settings: Settings,
    policy: FrozenPolicy,
    rungs: Policy,
    now: datetime,
    *,
    has_chat: bool = True,
) -> ladder.Paging:
    return ladder.recipients(
        rungs.levels[SECOND].notify, policy, settings, session, now, has_chat=has_chat
    )


def _names(settings: Settings, paging: ladder.Paging) -> tuple[str, ...]:
    directory = Directory(settings)
    names: list[str] = []
    for who in paging.chat:
        person = directory.get(who)
        if person is not None:
            names.append(person.name)
        elif who.startswith("slack:S"):
            names.append(f"user group {who.removeprefix('slack:')}")
        else:
            names.append(who)
    names += [f"target {name}" for name in paging.targets]
    return tuple(dict.fromkeys(names))


def _paged_at(session: Session, number: int) -> datetime | None:
    """When the second level was last paged (by its timer or by someone asking)."""
    entries = session.scalars(
        select(LogEntry)
        .where(LogEntry.incident_number == number, LogEntry.type == PAGED)
        .order_by(LogEntry.seq.desc())
    )
    for entry in entries:
        data = entry.data or {}
        if data.get("kind") in ("level", "now") and data.get("level") == SECOND:
            return entry.at
    return None


def _move_up(
    session: Session,
    incident: Incident,
    row: IncidentEscalation,
    policy: FrozenPolicy,
    rungs: Policy,
    now: datetime,
    actor: log.Actor,
) -> datetime | None:
    """An open incident below the second level climbs to it: its pending level timer is
    replaced by the rung after it (so the ladder does not page the second line twice);
    when that next page is due. Acknowledged, the ladder is stopped already: unchanged."""
    if incident.status != Status.OPEN or row.level >= SECOND:
        return None
    ladder.cancel(session, incident.number, now, f"second line paged now by {actor.name}")
    row.level, row.paged_at, row.updated_at = SECOND, now, now
    rung = ladder.next_level(rungs, row.round, SECOND)
    if rung is None:
        return None
    due = ladder.deadline(policy, rungs, now + rung[2])
    ladder.arm(session, incident.number, "level", rung[0], rung[1], due, now)
    return due


def _log(
    session: Session,
    incident: Incident,
    actor: log.Actor,
    paging: ladder.Paging,
    levels: int,
    why: str,
    then: datetime | None,
    now: datetime,
) -> None:
    who = [*paging.chat, *(f"target {name}" for name in paging.targets)]
    summary = (
        f"{actor.name} paged the second line now: {', '.join(who) or 'nobody'} "
        f"(level {SECOND + 1} of {levels}: {why})"
    )
    if paging.unreachable:
        summary += f"; not reachable: {', '.join(paging.unreachable)}"
    if then is not None:
        summary += f"; next page at {then:%H:%M:%S} UTC unless acknowledged"
    data = {
        "timer": None, "kind": "now", "round": 0, "level": SECOND, "chat": paging.chat,
        "targets": paging.targets, "unreachable": paging.unreachable,
        "next_at": then.isoformat() if then else None, "why": why,
    }  # fmt: skip
    log.append(
        session, incident, at=now, actor=actor, type=PAGED, summary=summary,
        data=actor.stamped(data),
    )  # fmt: skip

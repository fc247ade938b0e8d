"""Escalation as plain functions for the rooms above: acknowledge and silence an incident
with its timers, and the policy a new incident freezes.

Resolving stops the ladder too; `runbooks.service.resolve` (which also cancels the steps)
and ingest (an incident that resolved itself) call `ladder.stopped` in their transaction.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from sqlalchemy.orm import Session

from bot.config import Settings
from bot.errors import TransitionRefused
from bot.escalation import ladder
from bot.incidents import log
from bot.incidents import service as incidents
from bot.incidents.models import Incident

MAX_SILENCE = timedelta(days=7)
DECIDING = {
    "approve": "approving",
    "skip": "skipping",
    "done": "marking done",
    "stop": "stopping the rest of",
    "repropose": "proposing again",
    "own": "taking ownership",
}
"""The decisions that acknowledge an open incident, as the log words them."""
_frozen: list[tuple[object, dict[str, Any]]] = []


def frozen_policy(settings: Settings) -> dict[str, Any]:
    """What an incident opening now freezes (computed once per settings object)."""
    if not _frozen or _frozen[0][0] is not settings.escalation:
        _frozen[:] = [(settings.escalation, settings.escalation.frozen())]
    return _frozen[0][1]


def acknowledge(
    session: Session,
    number: int,
    *,
    actor: log.Actor,
    at: datetime,
    note: str | None = None,
    by: str | None = None,
    decision: dict[str, Any] | None = None,
) -> Incident:
    """Acknowledge the incident and stop its ladder in the same transaction; its
    acknowledgement timeout starts. A repeat changes nothing. `by` and `decision`: the
    decision on it that acknowledges it (`incidents.acknowledge`)."""
    incident = incidents.get(session, number, lock=True)
    if incident.status == "acknowledged":
        return incident
    incidents.acknowledge(session, number, actor=actor, at=at, note=note, by=by, decision=decision)
    ladder.acknowledged(session, incident, actor, at)
    return incident


def acknowledge_by_deciding(
    session: Session,
    number: int,
    *,
    actor: log.Actor,
    at: datetime,
    decision: str,
    step: str | None = None,
) -> bool:
    """A person with a role decided on an OPEN incident (approved, skipped, marked done,
    stopped or proposed again a step; took ownership): that is responding, so it is
    acknowledged in the same transaction and its ladder stops. Whether it was."""
    incident = incidents.get(session, number, lock=True)
    if incident.status != "open":
        return False
    by = DECIDING[decision] + (f" step {step}" if step else "")
    acknowledge(
        session, number, actor=actor, at=at, by=by,
        decision={"decision": decision, **({"step": step} if step else {})},
    )  # fmt: skip
    return True


def own(
    session: Session,
    number: int,
    owner: str,
    *,
    actor: log.Actor,
    at: datetime,
    acknowledge: bool = True,
    decides: bool = True,
) -> Incident:
    """Make `owner` the incident's owner (taking ownership: `owner` is the actor); with
    `acknowledge`, a person who `decides` (holds a role) then acknowledges an open
    incident by it, in the same transaction (the owner first, so the log says who owns
    it whoever acknowledged)."""
    incident = incidents.assign_owner(session, number, owner, actor=actor, at=at)
    if acknowledge and decides:
        acknowledge_by_deciding(session, number, actor=actor, at=at, decision="own")
    return incident


def silence(
    session: Session, number: int, length: timedelta, *, actor: log.Actor, at: datetime
) -> Incident:
    """Page nobody about the incident for `length` (1m to 7d); then its ladder resumes."""
    if not timedelta(minutes=1) <= length <= MAX_SILENCE:
        raise TransitionRefused("silence an incident for 1m to 7d, e.g. 2h")
    incident = incidents.get(session, number, lock=True)
    ladder.silence(session, incident, at + length, actor, at)
    return incident

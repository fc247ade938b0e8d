"""What waits for whom, for the incident list: a row says whether a step waits for the
person looking (`you`), only for someone else now that they approved (`second`: a
two-person step), or nothing they can decide (`none`), and the list puts what needs them
first: waiting for their decision, then critical, then the rest."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from sqlalchemy import select
from sqlalchemy.orm import Session

from bot.incidents.models import Incident
from bot.people import Decider
from bot.runbooks import approvals
from bot.runbooks.models import StepRun
from bot.runbooks.steps import StepState

Who = Literal["you", "second", "none"]


@dataclass(frozen=True)
class Waiting:
    """One row's answer to "does a decision wait, and for whom?"."""

    who: Who
    words: str
    """`your decision: cordon`, `approved by you, waiting for one more: drain`,
    `no decision waits`."""


NOTHING = Waiting("none", "no decision waits")


def of_incidents(session: Session, numbers: Sequence[int], viewer: Decider) -> dict[int, Waiting]:
    """Each of `numbers` that has a step waiting for a person, as `viewer` sees it; the
    others are absent (nothing waits: NOTHING)."""
    if not numbers:
        return {}
    stmt = (
        select(StepRun)
        .where(
            StepRun.incident_number.in_(numbers),
            StepRun.state == StepState.AWAITING_APPROVAL,
        )
        .order_by(StepRun.incident_number, StepRun.id)
    )
    runs: dict[int, list[StepRun]] = {}
    for run in session.scalars(stmt):
        runs.setdefault(run.incident_number, []).append(run)
    return {number: _waiting(session, found, viewer) for number, found in runs.items()}


def _waiting(session: Session, runs: list[StepRun], viewer: Decider) -> Waiting:
    if not viewer.roles:
        return Waiting("none", "a decision waits for a responder (you may look, not decide)")
    second: StepRun | None = None
    for run in runs:
        given = [a.approver for a in approvals.approvals_of(session, run)]
        if viewer.id not in given:
            if given:
                return Waiting("you", f"one more approval waits for you: {run.step_id}")
            return Waiting("you", f"your decision waits: {run.step_id}")
        second = second or run
    assert second is not None
    return Waiting("second", f"approved by you, waiting for one more: {second.step_id}")


def ordered(incidents: Sequence[Incident], waiting: dict[int, Waiting]) -> list[Incident]:
    """Waiting for the viewer's decision first, then critical, then the rest; newest first
    within each (critical first among those waiting for them)."""

    def key(incident: Incident) -> tuple[int, int, int]:
        yours = waiting.get(incident.number, NOTHING).who == "you"
        return (0 if yours else 1, 0 if incident.severity == "critical" else 1, -incident.number)

    return sorted(incidents, key=key)

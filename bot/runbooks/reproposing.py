"""Proposing a step again: a person with a role gives a step whose newest run was skipped,
failed, timed out, expired or was cancelled a new attempt (issue 21: one tap on Skip
must not end the runbook for good).

The step's run is voided as `replan` voids a skip (a new attempt recorded as expired,
logged as `step.reproposed`), and `advance` proposes it again at once: its `when` and
`with` are judged against what is known now, and its approvals start again. Every later
step the bot skipped by `when` (it may have read the step) is decided again in its turn,
and every later proposal that has not started is superseded, so steps still run in
order. Runs already running, and steps people decided on, are left alone.

Locks are taken in the engine's order (the incident's runs, then the incident); the runs
are read again under the incident's lock, so two people proposing the same step again at
once make one new attempt, and the second is told it waits for a decision.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from bot.config import Settings
from bot.errors import ApprovalRefused, StepNotFound
from bot.incidents import log
from bot.incidents import service as incidents
from bot.people import Decider
from bot.runbooks import approvals, engine, replan
from bot.runbooks.models import StepRun
from bot.runbooks.steps import StepState

S = StepState
REPROPOSABLE = frozenset({S.SKIPPED, S.FAILED, S.TIMED_OUT, S.EXPIRED, S.CANCELLED})
"""A step whose newest run ended in one of these may be proposed again."""


def refusal(run: StepRun) -> str | None:
    """Why the step of `run` (its newest run) cannot be proposed again; None: it can."""
    state, step = StepState(run.state), run.step_id
    if state in REPROPOSABLE:
        return None
    if state in (S.PROPOSED, S.AWAITING_APPROVAL):
        what = "mark it done or skip it" if run.kind == "manual" else "approve or skip it"
        return f"step {step} is waiting for a decision now: {what}"
    if state == S.APPROVED:
        return f"step {step} is approved and about to run: there is nothing to propose again"
    if state == S.RUNNING:
        return f"step {step} is running now: if it fails, propose it again then"
    if state == S.SUCCEEDED:
        return f"step {step} already succeeded: there is nothing to propose again"
    return f"step {step} was interrupted and is proposed again on its own"


def repropose(
    session: Session,
    number: int,
    step_id: str,
    who: Decider,
    now: datetime,
    settings: Settings,
    note: str | None = None,
) -> StepRun:
    """See the module docstring; the step's new attempt (awaiting approval, or approved
    when it needs none). Refusals raise and write nothing."""
    person, role = who.id, approvals.role_of(who)
    note = (note or "").strip() or None
    locked = select(StepRun).where(StepRun.incident_number == number).with_for_update()
    list(session.scalars(locked))  # run rows before the incident row (engine's order)
    incident = incidents.get(session, number, lock=True)
    _, runbook = engine.frozen_runbook(session, number)
    step = engine.frozen_step(runbook, step_id)
    history: dict[str, list[StepRun]] = {}
    for earlier in engine.runs_of(session, number):  # read again: what committed meanwhile
        history.setdefault(earlier.step_id, []).append(earlier)
    if step_id not in history:
        raise StepNotFound(
            f"step {step_id} of {incident.ref} has not been proposed yet; it comes in its turn"
        )
    run = history[step_id][-1]
    refused = refusal(run)
    if refused is not None:
        raise ApprovalRefused(refused)
    if not engine.running(incident):
        raise ApprovalRefused(
            f"{incident.ref} is {incident.status}: its steps no longer run; reopen it to "
            "act on it again"
        )
    why = f": {note}" if note else ""
    was = run.state.replace("_", " ")
    actor = log.Actor.deciding(who)
    replan.void(
        session,
        incident,
        step,
        run,
        now,
        summary=f"proposed again by {person}{why}",
        logged=f"{person} ({role}) proposed step {step_id} again (it was {was}){why}; "
        "its approvals start again",
        actor=actor,
        kind="step.reproposed",
        data={"from": run.state, "note": note, "role": role},
    )
    cause = f"step {step_id} is proposed again by {person}"
    index = [s.id for s in runbook.steps].index(step_id)
    for later in runbook.steps[index + 1 :]:
        runs = history.get(later.id)
        if not runs:
            continue
        last = runs[-1]
        if last.state in (S.AWAITING_APPROVAL, S.APPROVED):
            replan.supersede(session, incident, last, now, cause)
        elif replan.skipped_by_when(last):
            replan.void(
                session,
                incident,
                later,
                last,
                now,
                summary=f"decided again in its turn: {cause}",
                logged=f"step {later.id} will be decided again in its turn: it was skipped "
                f"by `when: {later.when}` after step {step_id} was {was}",
            )
    engine.advance(session, number, now, settings)
    new = approvals.current_run(session, number, step_id, lock=False)
    if new.state == S.SKIPPED:
        raise ApprovalRefused(
            f"step {step_id} does not apply now ({new.summary.removeprefix('skipped: ')}): "
            "it would be skipped again"
        )
    if new.state == S.FAILED:
        raise ApprovalRefused(f"step {step_id} cannot be proposed again: {new.summary}")
    return new

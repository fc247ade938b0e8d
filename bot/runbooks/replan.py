"""Re-planning after an incident grew (into its domain's, or by more nodes of its domain):
what the planner decided about a node, or a few, may be wrong about the many.

`replan` walks the frozen steps as `advance` does, against the context as it is now
(`incident.scope` is `domain`, `incident.nodes` many). The first step the bot skipped
because its `when` was false, and whose `when` is true now, is decided again: its skip is
voided (a new attempt recorded as expired, logged), and so is every later step the bot
skipped by `when` (its `when` may read the steps before it, which now run), and every later
proposal that has not started is superseded (it expires); `advance` then proposes each
again in its turn, so steps still run in order and each `when` is judged when it is due. A
proposal whose parameters render differently now is superseded the same way: its new
attempt asks for approvals again, since an approval binds to the exact parameters. Runs
already running are left alone. Everything is logged.

Steps over many nodes (`for_each`) are left to the planner's own check of their node list
(`advance`, which `replan` calls last), since an approval binds to that list.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from bot.config import Settings
from bot.errors import BotError
from bot.incidents import log
from bot.incidents import service as incidents
from bot.incidents.models import Incident
from bot.runbooks import engine, templates, versions
from bot.runbooks.models import IncidentRunbook, StepRun
from bot.runbooks.schema import Step
from bot.runbooks.steps import StepState

S = StepState
NOT_STARTED = (S.AWAITING_APPROVAL, S.APPROVED)


def replan(session: Session, number: int, now: datetime, settings: Settings) -> int:
    """See the module docstring; how many runs it changed."""
    stmt = (
        select(StepRun)
        .where(StepRun.incident_number == number)
        .order_by(StepRun.step_id, StepRun.attempt)
        .with_for_update()
    )
    history: dict[str, list[StepRun]] = {}
    for run in session.scalars(stmt):  # run rows before the incident row (engine's order)
        history.setdefault(run.step_id, []).append(run)
    incident = incidents.get(session, number, lock=True)
    frozen = session.get(IncidentRunbook, number)
    if frozen is None or not engine.running(incident):
        return 0
    runbook = versions.runbook(session, frozen.runbook_digest)
    context = engine.context_of(session, incident, frozen, settings)
    changed = 0
    reopened = False  # an earlier step was proposed again: later proposals wait their turn
    for step in runbook.steps:
        runs = history.get(step.id, [])
        if not runs:
            break
        run = runs[-1]
        state = StepState(run.state)
        if reopened:
            if state in NOT_STARTED:
                _supersede(session, incident, run, now, "an earlier step is proposed again")
                changed += 1
            elif skipped_by_when(run):
                _void(session, incident, step, run, now)
                changed += 1
            continue
        if _now_applies(step, run, context):
            _void(session, incident, step, run, now)
            changed += 1
            reopened = True
            continue
        if state in NOT_STARTED and _params_changed(step, run, context):
            _supersede(session, incident, run, now, "its parameters render differently now")
            run = engine._propose(session, incident, step, context, now, settings, run.attempt + 1)
            changed += 1
            state = StepState(run.state)
        context["steps"][step.id] = engine.seen(state, run.result, run.summary)
        if not state.terminal and not reopened:
            break
    # What comes due now (a superseded step proposed again), and the planner's own checks
    # of open proposals (a step over many nodes whose node list changed).
    engine.advance(session, number, now, settings)
    return changed


def skipped_by_when(run: StepRun) -> bool:
    """A run the bot skipped because its `when` was false (not one a person skipped)."""
    return (
        run.state == S.SKIPPED
        and run.actor in (None, engine.BOT.id)
        and run.summary.startswith("skipped: `when:")
    )


def _now_applies(step: Step, run: StepRun, context: dict[str, object]) -> bool:
    """A step the bot skipped by `when` whose `when` is true now."""
    if step.when is None or not skipped_by_when(run):
        return False
    try:
        return bool(templates.evaluate(step.when, context))
    except templates.TemplateError:
        return False


def _params_changed(step: Step, run: StepRun, context: dict[str, object]) -> bool:
    if step.action is None or step.for_each is not None:
        return False
    try:
        raw = templates.render_params(step.with_, context)
    except BotError:
        return False  # the new attempt would fail to render; keep the one people see
    return engine.params_hash(raw) != run.params_hash


def _supersede(session: Session, incident: Incident, run: StepRun, now: datetime, why: str) -> None:
    cause = f"{incident.ref} grew ({_scope(incident)}); {why}"
    supersede(session, incident, run, now, cause, why=why)


def supersede(
    session: Session,
    incident: Incident,
    run: StepRun,
    now: datetime,
    cause: str,
    *,
    why: str | None = None,
) -> None:
    """End an open proposal that has not started (it expires, marked superseded, logged
    with `cause`); `advance` proposes the step again in its turn, asking for approvals
    again. Also what proposing an earlier step again does (`reproposing`)."""
    run.summary = f"superseded: {cause}"
    run.finished_at = now
    engine.transition(
        session,
        incident,
        run,
        S.EXPIRED,
        now=now,
        actor=engine.BOT,
        summary=f"step {run.step_id} proposal superseded: {cause} "
        "(a new attempt asks for approval again)",
        data={"superseded": True, "why": why or cause},
    )


def _void(session: Session, incident: Incident, step: Step, run: StepRun, now: datetime) -> None:
    void(
        session,
        incident,
        step,
        run,
        now,
        summary=f"decided again in its turn: {incident.ref} grew ({_scope(incident)})",
        logged=f"step {step.id} will be decided again in its turn: it was skipped by "
        f"`when: {step.when}` before {incident.ref} became "
        f"{incident.domain or 'a larger'}'s incident",
    )


def void(
    session: Session,
    incident: Incident,
    step: Step,
    run: StepRun,
    now: datetime,
    *,
    summary: str,
    logged: str,
    actor: log.Actor = engine.BOT,
    kind: str = "runbook.replanned",
    data: dict[str, Any] | None = None,
) -> StepRun:
    """Void the bot's decision on `step` (a skip by `when`, or a run that ended): a new
    attempt, recorded as expired, that `advance` proposes again (judging its `when`
    afresh) when the step's turn comes; logged as `kind`."""
    voided = StepRun(
        incident_number=incident.number,
        step_id=step.id,
        attempt=run.attempt + 1,
        state=S.EXPIRED,
        kind=run.kind,
        action=run.action,
        params={},
        params_hash=engine.params_hash({}),
        approvals_required=0,
        proposed_at=now,
        finished_at=now,
        actor=engine.BOT.id,
        summary=summary,
    )
    session.add(voided)
    session.flush()
    log.append(
        session,
        incident,
        at=now,
        actor=actor,
        type=kind,
        summary=logged,
        data={
            "step": step.id, "attempt": voided.attempt, "run": voided.id, "when": step.when,
            **(data or {}),
        },
    )  # fmt: skip
    return voided


def _scope(incident: Incident) -> str:
    return f"now {incident.domain}'s incident" if incident.domain else "more nodes"

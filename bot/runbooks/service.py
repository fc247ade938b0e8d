"""The runbook engine for callers that hold a database, not a session: the CLI and the API.

Each function is one transaction (two for an expired approval: the refusal writes
nothing, then the expiry and the new proposal commit on their own). `step_rows` is what
`runbook-bot steps` and `GET /api/incidents/{n}/steps` show. `resolve` resolves an
incident and cancels its steps that have not started, together. A person's decision
on a step (approve, skip, done, stop, propose again) acknowledges an open incident in
its transaction unless they pass `acknowledge=False`: deciding is responding.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from bot import escalation
from bot.clock import Clock
from bot.config import Settings
from bot.db import Database
from bot.errors import ApprovalExpired, ProposalSuperseded
from bot.escalation import ladder
from bot.incidents import log
from bot.incidents import service as incidents
from bot.incidents.models import Incident
from bot.people import Decider
from bot.runbooks import approvals, dependents, engine, foreach, reproposing
from bot.runbooks.models import StepRun


@dataclass(frozen=True)
class StepRow:
    """One step of an incident's runbook as people see it."""

    step: str
    title: str
    state: str
    attempt: int
    kind: str
    action: str | None
    params: dict[str, Any]
    params_hash: str
    approvals: int
    approvals_required: int
    approvers: list[str]
    expires_at: str | None
    not_before: str | None
    """A retry waits until then (the failure said when to try again)."""
    actor: str | None
    summary: str
    run_id: int | None = None
    """The newest attempt's id: what chat buttons carry."""
    progress: dict[str, Any] | None = None
    """A step over many nodes (`foreach`): its set and its nodes counted (`progress_of`)."""
    dependents: tuple[str, ...] = ()
    """Later steps that read this one (`bot.runbooks.dependents`): skipping it skips them."""

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def step_rows(db: Database, number: int) -> tuple[str, list[StepRow]]:
    """(runbook id and version, one row per step; `not_reached` for steps not proposed)."""
    with db.session() as session:
        incidents.get(session, number)
        return rows_in(session, number)


def rows_in(session: Session, number: int) -> tuple[str, list[StepRow]]:
    """`step_rows` inside the caller's session (the chat card reads them with the rest)."""
    frozen, runbook = engine.frozen_runbook(session, number)
    latest = engine.latest_runs(session, number)
    rows = []
    for step in runbook.steps:
        run = latest.get(step.id)
        row = _row(session, step.id, engine.text(step.title), step.action, run)
        rows.append(replace(row, dependents=dependents.dependents(runbook, step.id)))
    return f"{frozen.runbook_id} v{frozen.runbook_version}", rows


def _row(
    session: Session, step: str, title: str, action: str | None, run: StepRun | None
) -> StepRow:
    if run is None:
        return StepRow(
            step, title, "not_reached", 0, "", action, {}, "", 0, 0, [], None, None, None, ""
        )
    given = approvals.approvals_of(session, run)
    return StepRow(
        step=step,
        title=title,
        state=run.state,
        attempt=run.attempt,
        kind=run.kind,
        action=run.action,
        params=dict(run.params),
        params_hash=run.params_hash,
        approvals=len(given),
        approvals_required=run.approvals_required,
        approvers=[a.approver for a in given],
        expires_at=run.expires_at.isoformat() if run.expires_at else None,
        not_before=run.not_before.isoformat() if run.not_before else None,
        actor=run.actor,
        summary=run.summary,
        run_id=run.id,
        progress=progress_of(run),
    )


def progress_of(run: StepRun) -> dict[str, Any] | None:
    """A `for_each` run's set and nodes counted, while it runs and after; None for a run
    of one action."""
    if not foreach.is_for_each(run.params):
        return None
    counted = foreach.tally(run.progress, run.params)
    states = dict((run.progress or {}).get("nodes") or {})
    left = {"state": "left", "summary": ""}
    nodes = {node: dict(states.get(node) or left) for node in foreach.nodes_of(run.params)}
    return {
        "set": foreach.set_of(run.params),
        "total": counted.total,
        "succeeded": counted.succeeded,
        "running": counted.running,
        "failed": counted.failed,
        "left": counted.left,
        "failed_nodes": counted.failed_nodes,
        "nodes": nodes,
        "stopped_by": run.stop_requested_by,
    }


def approve(
    db: Database,
    number: int,
    step_id: str,
    *,
    who: Decider,
    clock: Clock,
    settings: Settings,
    params_hash: str | None = None,
    count: int | None = None,
    override: int | None = None,
    acknowledge: bool = True,
) -> StepRun:
    """`who` approves; with `count`, the node count of a step over many nodes, and with
    `override` (an admin), how many of them may pass the breaker's global cap. Approving
    acknowledges an open incident in the same transaction, unless `acknowledge` is False."""
    try:
        with db.transaction() as session:
            now = clock.now()
            if acknowledge:
                _acknowledge(session, number, who, now, "approve", step_id)
            return approvals.approve(
                session, number, step_id, who, now, settings, params_hash, count, override
            )
    except ApprovalExpired:
        with db.transaction() as session:
            approvals.expire(session, number, step_id, clock.now(), settings)
        raise
    except ProposalSuperseded:
        with db.transaction() as session:
            engine.advance(session, number, clock.now(), settings)  # proposes it again
        raise


def stop(
    db: Database,
    number: int,
    step_id: str,
    *,
    who: Decider,
    clock: Clock,
    settings: Settings,
    note: str | None = None,
    acknowledge: bool = True,
) -> StepRun:
    return _decide(
        approvals.stop, "stop", db, number, step_id, who, clock, settings, note, acknowledge
    )


def skip(
    db: Database,
    number: int,
    step_id: str,
    *,
    who: Decider,
    clock: Clock,
    settings: Settings,
    note: str | None = None,
    acknowledge: bool = True,
) -> StepRun:
    """A step later steps read is skipped only with a `note` saying why."""
    return _decide(
        approvals.skip, "skip", db, number, step_id, who, clock, settings, note, acknowledge
    )


def complete(
    db: Database,
    number: int,
    step_id: str,
    *,
    who: Decider,
    clock: Clock,
    settings: Settings,
    note: str,
    acknowledge: bool = True,
) -> StepRun:
    return _decide(
        approvals.complete, "done", db, number, step_id, who, clock, settings, note, acknowledge
    )


def repropose(
    db: Database,
    number: int,
    step_id: str,
    *,
    who: Decider,
    clock: Clock,
    settings: Settings,
    note: str | None = None,
    acknowledge: bool = True,
) -> StepRun:
    """Propose again a step whose newest run was skipped, failed, timed out, expired or
    was cancelled (`bot.runbooks.reproposing`); its new attempt."""
    return _decide(
        reproposing.repropose, "repropose", db, number, step_id, who, clock, settings, note,
        acknowledge,
    )  # fmt: skip


def cancel(
    db: Database,
    number: int,
    step_id: str,
    *,
    who: Decider,
    clock: Clock,
    settings: Settings,
    note: str | None = None,
) -> StepRun:
    """Cancelling stops the runbook; it does not acknowledge (it is not responding)."""
    return _decide(approvals.cancel, None, db, number, step_id, who, clock, settings, note, False)


def _decide(
    decision: Callable[..., StepRun],
    name: str | None,
    db: Database,
    number: int,
    step_id: str,
    who: Decider,
    clock: Clock,
    settings: Settings,
    extra: str | None,
    acknowledge: bool,
) -> StepRun:
    """`who`'s decision on a step (an `approvals` function) in its own transaction; with
    `acknowledge`, an open incident is acknowledged by it in the same one."""
    with db.transaction() as session:
        now = clock.now()
        if acknowledge and name is not None:
            _acknowledge(session, number, who, now, name, step_id)
        return decision(session, number, step_id, who, now, settings, extra)


def _acknowledge(
    session: Session, number: int, who: Decider, now: datetime, decision: str, step: str
) -> None:
    """Acknowledge an open incident by `who`'s decision, before the decision is made in
    the same transaction: a refusal raises and rolls both back, and the log reads "Alice
    acknowledged INC-7 by approving step cordon", then the approval. The incident's runs
    are locked first (the engine's lock order: runs, then the incident, then its timers).
    A person without a role acknowledges nothing (the decision refuses them)."""
    if not who.roles:
        return
    locked = select(StepRun.id).where(StepRun.incident_number == number).with_for_update()
    session.execute(locked).all()
    escalation.acknowledge_by_deciding(
        session, number, actor=log.Actor.deciding(who), at=now, decision=decision, step=step
    )


def resolve(
    db: Database,
    number: int,
    *,
    actor: log.Actor,
    clock: Clock,
    disposition: str | None,
    owner: str | None = None,
) -> tuple[Incident, list[StepRun]]:
    """Resolve the incident, cancel its steps that have not started and stop its
    escalation, in one transaction: a resolved incident's steps never run afterwards and
    nobody is paged about it. (The incidents room
    cannot do this itself: runbooks sit above it.)"""
    with db.transaction() as session:
        now = clock.now()
        runs = approvals.open_runs(session, number)  # run rows before the incident row
        incident = incidents.resolve(
            session, number, actor=actor, at=now, disposition=disposition, owner=owner
        )
        # A step that ended between the two locks may have proposed the next one; a run
        # someone else holds is skipped (an approval or a claim then sees the incident
        # resolved and refuses it).
        later = approvals.open_runs(session, number, skip_locked=True)
        runs += [run for run in later if run not in runs]
        ladder.stopped(session, incident, now, f"resolved by {actor.name}")
        return incident, approvals.cancel_open(session, incident, runs, actor, now)


def recent_outcomes(
    session: Session, now: datetime, window: timedelta = timedelta(hours=24)
) -> dict[tuple[str, str], int]:
    """Step runs that finished in the last `window`, by (kind, final state): `action` or
    `manual`, `succeeded`, `failed`, `skipped`, ... (the metrics' actions by result)."""
    stmt = (
        select(StepRun.kind, StepRun.state, func.count())
        .where(StepRun.finished_at >= now - window)
        .group_by(StepRun.kind, StepRun.state)
    )
    return {(kind, state): count for kind, state, count in session.execute(stmt)}

"""Claiming step runs for a worker, and the sweeps over runs nobody tends any more.

`claim` marks one approved run that is due running under the worker's lease and returns a
`Claim`: everything needed to run its action outside a transaction. On PostgreSQL the row
is taken `FOR UPDATE SKIP LOCKED`, so replicas never take the same run (SQLite runs one
worker). `reap` marks running runs whose lease ran out (their worker died or hung)
interrupted, and the engine proposes a new attempt for people to decide on: it is never
re-run by itself. `expire` expires runs still awaiting approval past `expires_at`; the
engine proposes them afresh. Each sweep takes one run per transaction, locked, and checks
its state again.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

from sqlalchemy import ColumnElement, or_, select
from sqlalchemy.orm import InstrumentedAttribute, Session

from bot.clock import Clock
from bot.config import Settings
from bot.db import Database
from bot.incidents import log
from bot.incidents import service as incidents
from bot.incidents.models import Incident
from bot.runbooks import approvals, engine, foreach
from bot.runbooks.models import StepRun
from bot.runbooks.steps import StepState

__all__ = ["Claim", "claim", "expire", "move", "note", "reap"]

S = StepState


@dataclass(frozen=True)
class Claim:
    """A run this worker marked running: everything needed to run it outside a transaction."""

    run_id: int
    incident: int
    step: str
    attempt: int
    action: str
    params: dict[str, Any]
    actor: str
    timeout: timedelta | None
    plan: foreach.Plan | None = None
    """How a `for_each` run goes over its nodes; None for a run of one action."""


def claim(db: Database, *, owner: str, settings: Settings, clock: Clock) -> Claim | None:
    """Mark one approved, due run running under `owner`'s lease, and commit; None when
    nothing is due."""
    while True:
        with db.transaction() as session:
            taken = _claim(session, owner=owner, settings=settings, now=clock.now(), db=db)
            if taken is not False:
                return taken


def _claim(
    session: Session, *, owner: str, settings: Settings, now: datetime, db: Database
) -> Claim | None | Literal[False]:
    """The claim, None when nothing is due, False when the run found was cancelled
    because its incident ended (resolving cancels waiting runs, but one approved while
    the incident was being resolved may slip through: it never runs)."""
    run = _first(
        session,
        db,
        StepRun.state == S.APPROVED.value,
        or_(StepRun.not_before.is_(None), StepRun.not_before <= now),
    )
    if run is None:
        return None
    incident = incidents.get(session, run.incident_number, lock=True)
    if not engine.running(incident):
        approvals.cancel_open(session, incident, [run], engine.BOT, now)
        return False
    _, runbook = engine.frozen_runbook(session, run.incident_number)
    step = engine.frozen_step(runbook, run.step_id)
    run.started_at = now
    run.lease_owner = owner
    run.lease_until = now + settings.worker_lease
    # What the card shows while it runs (progress replaces it): never the proposal's
    # "needs one person before ..." any more.
    run.summary = f"{approvals.shown(run)}: running, {approvals.approved_by(session, run)}"
    summary = (
        f"step {run.step_id} started: {run.action} {engine.brief(run.params, run.action)} "
        f"as {run.actor} (attempt {run.attempt})"
    )
    move(session, incident, run, S.RUNNING, now, summary, {"owner": owner})
    assert run.action is not None
    return Claim(
        run.id,
        run.incident_number,
        run.step_id,
        run.attempt,
        run.action,
        dict(run.params),
        run.actor or engine.BOT.id,
        step.timeout,
        foreach.plan_of(step, run.approved_count, run.override_count)
        if foreach.is_for_each(run.params)
        else None,
    )


def reap(db: Database, *, settings: Settings, clock: Clock) -> int:
    """Mark running runs whose lease ran out interrupted; the engine re-proposes them."""

    def interrupt(session: Session, run: StepRun, now: datetime) -> None:
        _interrupt(session, run, now, settings)

    return _sweep(db, clock, S.RUNNING, StepRun.lease_until, interrupt)


def expire(db: Database, *, settings: Settings, clock: Clock) -> int:
    """Expire runs still awaiting approval past `expires_at`; the engine proposes each
    step again with fresh parameters."""
    return _sweep(
        db,
        clock,
        S.AWAITING_APPROVAL,
        StepRun.expires_at,
        lambda session, run, now: approvals.expire_run(session, run, now, settings),
    )


def _sweep(
    db: Database,
    clock: Clock,
    state: StepState,
    deadline: InstrumentedAttribute[datetime | None],
    handle: Callable[[Session, StepRun, datetime], object],
) -> int:
    """`handle` each run in `state` past its `deadline`, one per transaction; how many."""
    count = 0
    while True:
        with db.transaction() as session:
            now = clock.now()
            run = _first(session, db, StepRun.state == state.value, deadline < now)
            if run is None:
                return count
            handle(session, run, now)
            count += 1


def _interrupt(session: Session, run: StepRun, now: datetime, settings: Settings) -> None:
    incident = incidents.get(session, run.incident_number, lock=True)
    run.finished_at = now
    run.summary = f"interrupted: worker {run.lease_owner} stopped renewing its lease"
    summary = (
        f"step {run.step_id} interrupted: worker {run.lease_owner} lost "
        f"its lease at {run.lease_until:%H:%M:%S} UTC; whether the action "
        "finished is unknown, so it is not re-run: a person decides again"
    )
    data = {"owner": run.lease_owner, "lease_until": str(run.lease_until)}
    move(session, incident, run, S.INTERRUPTED, now, summary, data)
    engine.advance(session, run.incident_number, now, settings)


def _first(session: Session, db: Database, *where: ColumnElement[bool]) -> StepRun | None:
    """The oldest run matching `where`, locked (one another worker holds is passed over)."""
    stmt = select(StepRun).where(*where).order_by(StepRun.id).limit(1)
    if db.is_postgres:
        # SQLite has one worker and takes its write lock at BEGIN; no row locks there.
        stmt = stmt.with_for_update(skip_locked=True)
    return session.scalars(stmt).first()


def move(
    session: Session,
    incident: Incident,
    run: StepRun,
    target: StepState,
    now: datetime,
    summary: str,
    data: dict[str, Any],
) -> None:
    """A transition the worker makes as the bot."""
    engine.transition(
        session, incident, run, target, now=now, actor=engine.BOT, summary=summary, data=data
    )


def note(
    session: Session,
    incident: Incident,
    now: datetime,
    kind: str,
    summary: str,
    data: dict[str, Any],
) -> None:
    """A log entry the worker writes as the bot."""
    log.append(session, incident, at=now, actor=engine.BOT, type=kind, summary=summary, data=data)

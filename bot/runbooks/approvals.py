"""People deciding on steps: approve, skip, mark a manual step done, cancel, and expiry.

Who decides is a `people.Decider`: a person (with the roles the people directory and the
surface give them) and the channel they came through; anyone with a role may approve. An
approval is a row per (run, person), never per identity, so one person counts once
whether they approve in Slack, the console, the API or the CLI, and a `two` step needs
two different people; it binds to the run's parameter hash and counts
only before the run expires. Each function locks the run row, then the incident row
(engine's lock order), refuses with a message that says what to do, and otherwise moves
the run and logs it in the caller's transaction.

Refusals raise and write nothing. Expiry is the one refusal with an effect to keep: the
run becomes `expired` and the step is proposed again. `approve` raises `ApprovalExpired`
without writing, and the caller records the expiry in its own transaction with `expire`
(`service.approve` does both); the worker's sweep expires the rest with `expire_run`.
Cancelling stops the runbook; resolving the incident cancels every run that has not
started (`open_runs`, then `cancel_open`).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from bot.config import Settings
from bot.errors import (
    ApprovalExpired,
    ApprovalRefused,
    ProposalSuperseded,
    StepNotFound,
    TransitionRefused,
)
from bot.incidents import log
from bot.incidents import service as incidents
from bot.incidents.models import Incident
from bot.people import ROLE_ORDER, Decider
from bot.runbooks import dependents, engine, foreach
from bot.runbooks.models import StepApproval, StepRun
from bot.runbooks.nodes import incident_nodes
from bot.runbooks.steps import StepState, check

S = StepState


def role_of(who: Decider) -> str:
    """The person's strongest role; ApprovalRefused when they have none."""
    for role in ROLE_ORDER:
        if role in who.roles:
            return role
    raise ApprovalRefused(
        f"{who.id} has no role that may decide on steps; an admin gives them one in the "
        "`people` setting (responder, second_line or admin)"
    )


def current_run(session: Session, number: int, step_id: str, *, lock: bool) -> StepRun:
    """The newest attempt of a step, locked for update with `lock`."""
    stmt = (
        select(StepRun)
        .where(StepRun.incident_number == number, StepRun.step_id == step_id)
        .order_by(StepRun.attempt.desc())
        .limit(1)
    )
    if lock:
        stmt = stmt.with_for_update()
    run = session.scalars(stmt).first()
    if run is None:
        _, runbook = engine.frozen_runbook(session, number)
        engine.frozen_step(runbook, step_id)  # raises for an unknown step
        raise StepNotFound(f"step {step_id} of INC-{number} has not been proposed yet")
    return run


def approvals_of(session: Session, run: StepRun) -> list[StepApproval]:
    stmt = (
        select(StepApproval)
        .where(StepApproval.step_run_id == run.id)
        .order_by(StepApproval.approved_at, StepApproval.id)
    )
    return list(session.scalars(stmt))


def _decided(session: Session, run: StepRun) -> str:
    """Why a run that no longer waits cannot be approved."""
    state = StepState(run.state)
    if run.actor and run.decided_at and state not in (S.SKIPPED, S.CANCELLED, S.EXPIRED):
        who = "the bot (no approval needed)" if run.actor == engine.BOT.id else run.actor
        return (
            f"step {run.step_id} was already approved by {who} at "
            f"{run.decided_at:%Y-%m-%d %H:%M:%S} UTC; it is {state.value.replace('_', ' ')}"
        )
    return f"step {run.step_id} already ended ({state.value.replace('_', ' ')})"


def approve(
    session: Session,
    number: int,
    step_id: str,
    who: Decider,
    now: datetime,
    settings: Settings,
    params_hash: str | None = None,
    count: int | None = None,
    override: int | None = None,
) -> StepRun:
    """Record `who`'s approval; the run is approved when enough different people have.
    A run over many nodes (`foreach`) binds to its node list: approving a change to more
    than one node names `count`, and a list the incident no longer has is refused with
    `ProposalSuperseded` (the caller proposes it again: `service.approve`). An admin may
    add `override`: how many nodes past the circuit breaker's global cap the run may take
    out (the breaker records each one it lets through)."""
    person, role = who.id, role_of(who)
    run = current_run(session, number, step_id, lock=True)
    if run.state != S.AWAITING_APPROVAL:
        raise ApprovalRefused(_decided(session, run))
    if run.kind == "manual":
        raise ApprovalRefused(
            f"step {step_id} is done by a person: mark it done with a note, or skip it"
        )
    if run.expires_at is not None and now > run.expires_at:
        raise ApprovalExpired(
            f"step {step_id} waited for approval until {run.expires_at:%H:%M:%S} UTC and "
            "expired; it is proposed again with its current parameters: review and approve "
            "the new proposal"
        )
    if params_hash is not None and params_hash != run.params_hash:
        raise ApprovalRefused(
            f"the parameters changed since you saw them: step {step_id} now runs "
            f"{run.action} {engine.brief(run.params, run.action)} (hash {run.params_hash[:12]}); "
            "review it and approve again"
        )
    refused = foreach.count_refusal(run.params, run.action, step_id, count)
    if refused is not None:
        raise ApprovalRefused(refused)
    if override is not None:
        _check_override(run, step_id, role, count, override)
    if foreach.is_for_each(run.params):
        nodes = incident_nodes(session, number, settings.topology)
        if foreach.changed(run.params, nodes):
            raise ProposalSuperseded(
                f"step {step_id} was proposed {foreach.shown(run.params)}, but the "
                f"incident's alerts now name {len(nodes)} nodes; it is proposed again over "
                "the new list: review it and approve the new proposal"
            )
    given = approvals_of(session, run)
    mine = next((a for a in given if a.approver == person), None)
    if mine is not None:
        missing = run.approvals_required - len(given)
        through = f", through {mine.channel}" if mine.channel else ""
        raise ApprovalRefused(
            f"you already approved step {step_id} at {mine.approved_at:%H:%M:%S} UTC "
            f"({person}{through}); one person counts once whichever channel they use: it "
            f"needs {missing} more approval{'s' * (missing != 1)} from someone else"
        )
    incident = incidents.get(session, number, lock=True)
    if not engine.running(incident):
        raise ApprovalRefused(
            f"{incident.ref} is {incident.status}: its steps no longer run; reopen it to "
            "act on it again"
        )
    approval = StepApproval(
        step_run_id=run.id,
        approver=person,
        role=role,
        params_hash=run.params_hash,
        approved_at=now,
        channel=who.channel,
        count=count,
    )
    session.add(approval)
    given.append(approval)
    if override is not None:
        run.override_count = override
        log.append(
            session,
            incident,
            at=now,
            actor=log.Actor.deciding(who),
            type="breaker.override_approved",
            summary=f"{person} (admin) lets step {step_id} take out up to {override} "
            f"node{'s' * (override != 1)} past the circuit breaker's global cap",
            data={"step": step_id, "run": run.id, "override": override, "count": count},
        )
    names = " and ".join(a.approver for a in given)
    if len(given) < run.approvals_required:
        missing = run.approvals_required - len(given)
        more = "one more person" if missing == 1 else f"{missing} more different people"
        until = f" before {run.expires_at:%H:%M:%S} UTC" if run.expires_at else ""
        run.summary = f"{shown(run)}: approved by {names}; needs {more}{until}"[:2000]
        log.append(
            session,
            incident,
            at=now,
            actor=log.Actor.deciding(who),
            type="step.approval",
            summary=f"{person} ({role}) approved step {step_id} ({len(given)} of "
            f"{run.approvals_required}); {missing} more different "
            f"{'person' if missing == 1 else 'people'} needed",
            data={"step": step_id, "attempt": run.attempt, "run": run.id, "role": role},
        )
        return run
    run.decided_at = now
    run.actor = person
    run.summary = f"{shown(run)}: approved by {names}"[:2000]
    named = {a.count for a in given}
    if foreach.is_for_each(run.params) and named == {len(foreach.nodes_of(run.params))}:
        run.approved_count = count  # every approver named it: the actions get an Allowance
    engine.transition(
        session,
        incident,
        run,
        S.APPROVED,
        now=now,
        actor=log.Actor.deciding(who),
        summary=(
            f"step {step_id}: {run.action} {engine.brief(run.params, run.action)} "
            f"approved by {names}"
        ),
        data={
            "approvers": [a.approver for a in given],
            "channels": [a.channel for a in given],
            "params_hash": run.params_hash,
            **({"count": run.approved_count} if run.approved_count is not None else {}),
        },
    )
    return run


def shown(run: StepRun) -> str:
    """What a run does, as its summary starts: `(node=gpu-node-02, reason=XID)`, or
    `k8s.drain on 32 nodes of row/a (...)` for a step over many nodes."""
    brief = engine.brief(run.params, run.action)
    return f"{run.action} {brief}" if foreach.is_for_each(run.params) else brief


def approved_by(session: Session, run: StepRun) -> str:
    """`approved by alice and bob`, or `approved automatically` (no approval needed)."""
    given = approvals_of(session, run)
    if not given:
        return "approved automatically"
    return f"approved by {' and '.join(a.approver for a in given)}"


def _check_override(
    run: StepRun, step_id: str, role: str, count: int | None, override: int
) -> None:
    """An override of the breaker's global cap: an admin's, on a step over many nodes whose
    count they named, never more nodes than the step has."""
    if role != "admin":
        raise ApprovalRefused(
            f"only an admin may override the circuit breaker (you are {role}); approve "
            "without the override, or ask an admin"
        )
    if not foreach.is_for_each(run.params) or count is None:
        raise ApprovalRefused(
            f"an override of the breaker's global cap goes with a step over many nodes "
            f"approved with its count; step {step_id} is not one, or no count was named"
        )
    nodes = len(foreach.nodes_of(run.params))
    if not 1 <= override <= nodes:
        raise ApprovalRefused(
            f"the override names how many of the step's {nodes} nodes may pass the global "
            f"cap: 1 to {nodes}, not {override}"
        )


def stop(
    session: Session,
    number: int,
    step_id: str,
    who: Decider,
    now: datetime,
    settings: Settings,
    note: str | None = None,
) -> StepRun:
    """A person stops the rest of a running step over many nodes: the nodes running
    finish, no new node starts, and the run ends cancelled with the nodes left listed
    (the worker running it ends it: `bot.runbooks.foreach_running`)."""
    person, role = who.id, role_of(who)
    run = current_run(session, number, step_id, lock=True)
    if not foreach.is_for_each(run.params):
        raise ApprovalRefused(
            f"step {step_id} runs one action, not one per node: there is no rest to stop; "
            "cancel it before it starts, or wait for its result"
        )
    if run.state in (S.AWAITING_APPROVAL, S.APPROVED):
        raise TransitionRefused(
            f"step {step_id} is {run.state.replace('_', ' ')} and no node has started: "
            "cancel it instead"
        )
    if run.state != S.RUNNING:
        raise TransitionRefused(_decided(session, run))
    if run.stop_requested_by is not None:
        assert run.stop_requested_at is not None
        raise ApprovalRefused(
            f"{run.stop_requested_by} already stopped the rest of step {step_id} at "
            f"{run.stop_requested_at:%H:%M:%S} UTC; the nodes running finish, then it ends"
        )
    incident = incidents.get(session, number, lock=True)
    run.stop_requested_by, run.stop_requested_at = person, now
    counted = foreach.tally(run.progress, run.params)
    why = f": {note}" if note else ""
    log.append(
        session,
        incident,
        at=now,
        actor=log.Actor.deciding(who),
        type="step.stop_requested",
        summary=f"{person} ({role}) stopped the rest of step {step_id}{why}: the "
        f"{counted.running} running finish, none of the {counted.left} left starts",
        data={
            "step": step_id,
            "attempt": run.attempt,
            "run": run.id,
            "role": role,
            "note": note,
            "running": counted.running,
            "left": counted.left,
        },
    )
    return run


def expire(session: Session, number: int, step_id: str, now: datetime, settings: Settings) -> bool:
    """Expire the step's waiting run if its time is up, and propose the step again."""
    return expire_run(session, current_run(session, number, step_id, lock=True), now, settings)


def expire_run(session: Session, run: StepRun, now: datetime, settings: Settings) -> bool:
    """`expire` for a run the caller has locked (the worker's sweep finds them by time).
    Approved runs are never expired here: their approval was given in time."""
    if run.state != S.AWAITING_APPROVAL or run.expires_at is None or now <= run.expires_at:
        return False
    number, step_id = run.incident_number, run.step_id
    incident = incidents.get(session, number, lock=True)
    run.finished_at = now
    run.summary = "no approval in time"
    engine.transition(
        session,
        incident,
        run,
        S.EXPIRED,
        now=now,
        actor=engine.BOT,
        summary=f"step {step_id} expired: not approved by {run.expires_at:%H:%M:%S} UTC",
        data={"expires_at": run.expires_at.isoformat()},
    )
    engine.advance(session, number, now, settings)
    return True


def skip(
    session: Session,
    number: int,
    step_id: str,
    who: Decider,
    now: datetime,
    settings: Settings,
    note: str | None = None,
) -> StepRun:
    """A person decides a waiting step will not run; the runbook goes on. A step later
    steps read (`dependents`) is skipped only with a reason: they may be skipped too."""
    person, role = who.id, role_of(who)
    note = (note or "").strip() or None
    run = current_run(session, number, step_id, lock=True)
    _, runbook = engine.frozen_runbook(session, number)
    following = dependents.dependents(runbook, step_id)
    if following and note is None:
        raise ApprovalRefused(f"skipping {step_id} also skips {listed(following)}: say why")
    why = f": {note}" if note else ""
    also = f" (also skips {listed(following)})" if following else ""
    return _end(
        session,
        run,
        S.SKIPPED,
        who=who,
        now=now,
        settings=settings,
        note=note,
        summary=f"skipped by {person}{why}",
        logged=f"{person} ({role}) skipped step {step_id}{why}{also}",
        data={"dependents": list(following)},
    )


def listed(steps: tuple[str, ...], most: int = 5) -> str:
    """`drain, reset and power_cycle`; past `most`, `drain, reset, ... and 4 more`."""
    if len(steps) > most:
        return f"{', '.join(steps[: most - 1])} and {len(steps) - most + 1} more"
    if len(steps) > 1:
        return f"{', '.join(steps[:-1])} and {steps[-1]}"
    return "".join(steps)


def complete(
    session: Session,
    number: int,
    step_id: str,
    who: Decider,
    now: datetime,
    settings: Settings,
    note: str,
) -> StepRun:
    """A person marks a manual step done, saying what they did."""
    person, role = who.id, role_of(who)
    note = note.strip()
    if not note:
        raise ApprovalRefused(f"say what was done for step {step_id}, e.g. 'replaced the cable'")
    run = current_run(session, number, step_id, lock=True)
    if run.kind != "manual":
        raise ApprovalRefused(
            f"step {step_id} runs {run.action}: approve it and the bot runs it; only manual "
            "steps are marked done by hand"
        )
    return _end(
        session,
        run,
        S.SUCCEEDED,
        who=who,
        now=now,
        settings=settings,
        note=note,
        summary=note[:2000],
        logged=f"{person} ({role}) did step {step_id}: {note}",
        result={"ok": True, "summary": note, "done_by": person},
    )


def cancel(
    session: Session,
    number: int,
    step_id: str,
    who: Decider,
    now: datetime,
    settings: Settings,
    note: str | None = None,
) -> StepRun:
    """A person decides a step that has not started will not run, and stops the runbook."""
    person, role = who.id, role_of(who)
    run = current_run(session, number, step_id, lock=True)
    if run.state == S.RUNNING:
        raise TransitionRefused(
            f"cannot cancel step {step_id}: its action is running and cannot be called back; "
            "wait for its result (with on_failure: stop a failure halts the runbook)"
        )
    why = f": {note}" if note else ""
    return _end(
        session,
        run,
        S.CANCELLED,
        who=who,
        now=now,
        settings=settings,
        note=note,
        summary=f"cancelled by {person}{why}",
        logged=f"{person} ({role}) cancelled step {step_id}{why}; the runbook stops here",
    )


def _end(
    session: Session,
    run: StepRun,
    target: StepState,
    *,
    who: Decider,
    now: datetime,
    settings: Settings,
    note: str | None,
    summary: str,
    logged: str,
    result: dict[str, Any] | None = None,
    data: dict[str, Any] | None = None,
) -> StepRun:
    """End a run `who` decided on (skip, done, cancel): `summary` on the run, `logged`
    in the incident log; then the engine goes on (or stops, for a cancel)."""
    check(run.step_id, run.state, target)
    incident = incidents.get(session, run.incident_number, lock=True)
    run.actor, run.decided_at, run.finished_at = who.id, now, now
    run.lease_until = None  # a run that ended holds no lease (only running ones have one)
    run.summary = summary
    if result is not None:
        run.result = result
    engine.transition(
        session,
        incident,
        run,
        target,
        now=now,
        actor=log.Actor.deciding(who),
        summary=logged,
        data={"note": note, **(data or {})},
    )
    engine.advance(session, run.incident_number, now, settings)
    return run


def open_runs(session: Session, number: int, *, skip_locked: bool = False) -> list[StepRun]:
    """The incident's runs that have not ended, locked (take them before the incident row:
    the engine's lock order; after it only with `skip_locked`)."""
    ended = [state.value for state in StepState if state.terminal]
    stmt = (
        select(StepRun)
        .where(StepRun.incident_number == number, StepRun.state.not_in(ended))
        .order_by(StepRun.id)
        .with_for_update(skip_locked=skip_locked)
    )
    return list(session.scalars(stmt))


def cancel_open(
    session: Session,
    incident: Incident,
    runs: list[StepRun],
    actor: log.Actor,
    now: datetime,
) -> list[StepRun]:
    """Cancel `runs` (from `open_runs`) because the incident ended: none of its steps runs
    afterwards. A run whose action is already running cannot be called back; it is left
    to finish and the log says so (the engine proposes nothing after it)."""
    cancelled = []
    for run in runs:
        if run.state == S.RUNNING:
            log.append(
                session,
                incident,
                at=now,
                actor=actor,
                type="step.left_running",
                summary=f"step {run.step_id} was already running when {incident.ref} became "
                f"{incident.status}; its result will be recorded, and nothing runs after it",
                data={"step": run.step_id, "attempt": run.attempt, "run": run.id},
            )
            continue
        run.actor, run.decided_at, run.finished_at = actor.id, now, now
        run.summary = f"cancelled: {incident.ref} {incident.status} by {actor.name}"
        engine.transition(
            session,
            incident,
            run,
            S.CANCELLED,
            now=now,
            actor=actor,
            summary=f"step {run.step_id} cancelled: {incident.ref} was {incident.status} by "
            f"{actor.name}",
            data={"incident_status": incident.status},
        )
        cancelled.append(run)
    return cancelled

"""Running one claimed step run: its action on a thread of its own, the lease kept, the
step's timeout watched on the injected clock, and the result recorded once.

A `Running` is started by the worker (`start`) and tended by the worker's loop (`tend`),
which never waits on it: the action's thread only executes, and sets `on_done` when it
has an outcome. `tend` records a finished outcome, or a timeout once `claim.timeout` has
passed on the clock (and then cancels the action: `ActionContext.cancelled`, so it makes
no more cluster or BMC calls and cannot pass the breaker), and renews the lease every
third of `worker_lease` meanwhile. The result is written in one transaction with the
engine's next proposal, but only while the run is still this worker's: a result that
comes back after its lease was taken is recorded and dropped. The database being away
stops neither: the action's log entries are kept and written with its result, and a
result `tend` could not write stays in hand and is written at a later `tend`. A failure
is retried by its class: with `Outcome.retry_after` (a `TemporaryActionError`) as a new
approved attempt due that much later, while `retries` remain; a permanent failure never.
A `for_each` run goes over its nodes on the same thread (`foreach_running.NodeRuns`, at
most `max_parallel` node threads), its progress stored per node; stopped by a person, it
ends cancelled with the nodes left listed.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta
from functools import partial
from typing import Any

from sqlalchemy.orm import Session

from bot.actions import ActionContext, Outcome, Risk, execute, registry
from bot.actions import breaker_lock as breaker_locks
from bot.actions.context import Allowance
from bot.actions.types import Result
from bot.clock import Clock
from bot.config import Settings
from bot.db import Database
from bot.durations import format_duration
from bot.errors import BotError, StorageUnavailable
from bot.incidents import history, log
from bot.incidents import service as incidents
from bot.incidents.models import Incident
from bot.runbooks import engine, foreach
from bot.runbooks.claims import Claim, move, note
from bot.runbooks.foreach_running import EachResult, NodeRuns, Stored
from bot.runbooks.models import StepRun
from bot.runbooks.steps import StepState

__all__ = ["PROGRESS_EVERY", "Running", "Succeeded"]

logger = logging.getLogger(__name__)
S = StepState
PROGRESS_EVERY = 5.0
"""Seconds between two progress reports of one running action that are recorded."""
Succeeded = Callable[[Session, Claim, datetime], None]
"""What else a succeeded run leads to, in the transaction that records it (the worker
opens the RMA follow-up of `gpu.fault_history` this way: postmortems are a floor up)."""
Entry = tuple[datetime, str, str, dict[str, Any]]


class Running:
    """One claimed run in this worker's hands, from its start to its recorded result."""

    def __init__(
        self,
        claim: Claim,
        *,
        db: Database,
        settings: Settings,
        clock: Clock,
        owner: str,
        kube_factory: Callable[[], Any] | None = None,
        on_done: Callable[[], None] = lambda: None,
        succeeded: Succeeded | None = None,
    ) -> None:
        self.claim = claim
        self.db, self.settings, self.clock, self.owner = db, settings, clock, owner
        self.kube_factory = kube_factory
        self._on_done = on_done
        self._succeeded = succeeded
        self.cancelled = threading.Event()
        """Set when nobody waits for the action any more (its step timed out)."""
        self.done = threading.Event()
        """Set when the action's thread has its outcome."""
        self._outcome: Outcome | None = None
        self._timed_out = False
        started = clock.monotonic()
        self._deadline = started + claim.timeout.total_seconds() if claim.timeout else None
        self._renew_every = settings.worker_lease.total_seconds() / 3
        self._renew_at = started + self._renew_every
        self._kept: list[Entry] | None = None
        """Log entries the database could not take, in order: written with the result."""
        self._kept_lock = threading.Lock()
        self._stored: Stored | None = None
        """A `for_each` run's nodes as stored while it runs: its result if it times out."""
        self._thread = threading.Thread(target=self._act, name=f"step-{claim.run_id}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def due_in(self) -> float:
        """Seconds (on the clock) until `tend` has something to do: a renewal or the
        timeout; 0 when the outcome is in."""
        if self.done.is_set() or self._timed_out:
            return 0.0
        due = self._renew_at if self._deadline is None else min(self._renew_at, self._deadline)
        return max(due - self.clock.monotonic(), 0.0)

    def tend(self) -> bool:
        """Record the outcome (or the timeout) if it is in, else renew the lease when it is
        time; True when the run is over for this worker (its result recorded). Raises
        `StorageUnavailable` when the database cannot take the result: call again later."""
        now = self.clock.monotonic()
        if not self._timed_out and not self.done.is_set():
            if self._deadline is not None and now >= self._deadline:
                self._timed_out = True
                self.cancelled.set()  # it stops at its next call; its log entries follow
            else:
                if now >= self._renew_at:
                    self._renew_at = now + self._renew_every
                    self.renew()
                return False
        self._end(None if self._timed_out else self._outcome)
        return True

    def wait(self, timeout: float | None = None) -> bool:
        """Wait (real time) for the action's outcome; True if it came."""
        return self.done.wait(timeout)

    def _act(self) -> None:
        claim = self.claim
        try:
            action = registry.get(claim.action)
            ctx = self._context()
            if claim.plan is not None:
                outcome = self._each(action, ctx, claim.plan)
            else:
                outcome = _execute(action, claim.params, ctx)
        except BotError as exc:  # unknown action, parameters refused: nothing ran
            outcome = Outcome(claim.action, claim.params, Result(ok=False, summary=str(exc)))
        except Exception:  # a bug; the run fails instead of the thread dying unseen
            error_id = uuid.uuid4().hex[:8]
            logger.exception("step run %s failed (error id %s)", claim.run_id, error_id)
            failed = Result(ok=False, summary=f"internal error (id {error_id})")
            outcome = Outcome(claim.action, claim.params, failed)
        self._outcome = outcome
        self.done.set()
        self._on_done()

    def _each(self, action: registry.Action, base: ActionContext, plan: foreach.Plan) -> Outcome:
        """A `for_each` run: the action once per node, each with a context of its own
        (its own Kubernetes client, the run's `cancelled`, the `Allowance` when the
        approval named the count, and an admin's override of the global cap with its count)."""
        params = self.claim.params
        allowance = None
        if plan.count is not None:
            nodes = frozenset(foreach.nodes_of(params))
            allowance = Allowance(nodes, plan.count, foreach.domain_of(params))

        def act(node: str, given: dict[str, Any], progress: Callable[[str], None]) -> Outcome:
            ctx = dataclasses.replace(
                base,
                allowance=allowance,
                admin_override=plan.override is not None,
                override_count=plan.override,
                progress=progress,
                _kube=None,
            )
            try:
                return _execute(action, given, ctx)
            except BotError as exc:  # its parameters refused: nothing ran on this node
                return Outcome(action.name, given, Result(ok=False, summary=str(exc)))
            except Exception:  # a bug; this node fails instead of the thread dying unseen
                error_id = uuid.uuid4().hex[:8]
                logger.exception(
                    "step run %s, node %s (error id %s)", self.claim.run_id, node, error_id
                )
                return Outcome(
                    action.name, given, Result(ok=False, summary=f"internal error (id {error_id})")
                )

        stored = self._stored = Stored(self.db, self.claim.run_id, self.owner)
        runs = NodeRuns(
            self.claim.action,
            params,
            plan,
            act=act,
            clock=self.clock,
            cancelled=self.cancelled,
            stopped_by=stored.stopped_by,
            store=stored.store,
        )
        return runs.run()

    def renew(self) -> None:
        """Extend the lease. The database being away stops neither the action nor the wait
        for it: the next renewal tries again (a lease that ran out meanwhile may be reaped;
        the result is then recorded as dropped)."""
        try:
            with self.db.transaction() as session:
                run = session.get(StepRun, self.claim.run_id, with_for_update=True)
                if run is not None and run.state == S.RUNNING and run.lease_owner == self.owner:
                    run.lease_until = self.clock.now() + self.settings.worker_lease
        except StorageUnavailable as exc:
            logger.warning(
                "worker %s: lease of step run %s not renewed: %s",
                self.owner,
                self.claim.run_id,
                exc,
            )

    def _context(self) -> ActionContext:
        # A drill's steps all run as dry runs: Kubernetes writes go with dryRun=All, BMC
        # power and node Jobs are rendered only (docs/drills.md). Reads run for real.
        claim = self.claim
        with self.db.session() as session:
            drill = incidents.get(session, claim.incident).drill
        wait = self.settings.database_worker_lock_timeout.total_seconds()
        return ActionContext(
            actor=claim.actor,
            settings=self.settings,
            clock=self.clock,
            incident=f"INC-{claim.incident}",
            dry_run=drill is not None,
            record=self._record,
            progress=self._progress(),
            kube_factory=self.kube_factory,
            alert_history=partial(history.alerts_on_node, self.db, drill=drill),
            cancelled=self.cancelled,
            breaker_lock=partial(breaker_locks.across, self.db, self.clock, wait=wait),
        )

    def _progress(self) -> Callable[[str], None]:
        """Progress of a running action (drain: pods left): the run's summary, which the
        chat card shows, and an `action.progress` log entry, at most every PROGRESS_EVERY
        so a drain of 200 pods is not 200 messages."""
        claim = self.claim
        last: list[float] = []

        def report(message: str) -> None:
            now = time.monotonic()
            if last and now - last[0] < PROGRESS_EVERY:
                return
            last[:] = [now]
            try:
                with self.db.transaction() as session:
                    run = session.get(StepRun, claim.run_id, with_for_update=True)
                    if run is None or run.state != S.RUNNING or run.lease_owner != self.owner:
                        return
                    run.summary = message[:2000]
                    incident = incidents.get(session, claim.incident, lock=True)
                    log.append(
                        session,
                        incident,
                        at=self.clock.now(),
                        actor=engine.actor_of(claim.actor),
                        type="action.progress",
                        summary=f"step {claim.step}: {message}",
                        data={"step": claim.step, "attempt": claim.attempt, "run": claim.run_id},
                    )
            except BotError as exc:  # progress is news, never a reason to fail the action
                logger.warning("INC-%s: progress not recorded: %s", claim.incident, exc)

        return report

    def _record(self, kind: str, summary: str, data: dict[str, Any]) -> None:
        """A log entry of the running action. The action goes on while the database is
        away: the entry is kept, with the ones after it, and written with the result."""
        claim = self.claim
        now = self.clock.now()
        data = {**data, "step": claim.step, "attempt": claim.attempt, "run": claim.run_id}
        with self._kept_lock:
            if self._kept is None:
                try:
                    with self.db.transaction() as session:
                        incident = incidents.get(session, claim.incident, lock=True)
                        log.append(
                            session,
                            incident,
                            at=now,
                            actor=engine.actor_of(claim.actor),
                            type=kind,
                            summary=summary,
                            data=data,
                        )
                    return
                except StorageUnavailable as exc:
                    logger.warning(
                        "INC-%s: step %s's log entries are kept until the database is back: %s",
                        claim.incident,
                        claim.step,
                        exc,
                    )
                    self._kept = []
            self._kept.append((now, kind, summary, data))

    def _end(self, outcome: Outcome | None) -> None:
        """Write the kept log entries and the result, in one transaction."""
        claim = self.claim
        with self._kept_lock:
            kept = list(self._kept or [])
        with self.db.transaction() as session:
            incident = incidents.get(session, claim.incident, lock=True)
            actor = engine.actor_of(claim.actor)
            for at, kind, summary, data in kept:
                log.append(
                    session, incident, at=at, actor=actor, type=kind, summary=summary, data=data
                )
            self._finish(session, incident, outcome)
        with self._kept_lock:
            # An action that outlived its step's timeout logs on, directly when it can.
            left = (self._kept or [])[len(kept) :]
            self._kept = left or None

    def interrupt(self, why: str) -> None:
        """Leave the run to people now, as the reaper would once its lease ran out: its
        kept log entries written and the run `interrupted` (the engine proposes a new
        attempt), only while it is still this worker's. For a worker that stops: the
        action was cancelled, whether it finished is unknown. Raises `StorageUnavailable`
        when the database cannot take it (the lease then runs out)."""
        claim = self.claim
        self.cancelled.set()
        with self._kept_lock:
            kept = list(self._kept or [])
        with self.db.transaction() as session:
            incident = incidents.get(session, claim.incident, lock=True)
            actor = engine.actor_of(claim.actor)
            for at, kind, summary, data in kept:
                log.append(
                    session, incident, at=at, actor=actor, type=kind, summary=summary, data=data
                )
            run = session.get(StepRun, claim.run_id, with_for_update=True)
            if run is None or run.state != S.RUNNING or run.lease_owner != self.owner:
                return
            now = self.clock.now()
            run.finished_at, run.lease_until = now, None
            run.summary = f"interrupted: {why}; its action was cancelled"
            summary = (
                f"step {claim.step} interrupted: {why}; its action was cancelled at its next "
                "call, and whether it finished is unknown, so it is not re-run: a person "
                "decides again"
            )
            data = {"owner": self.owner, "run": run.id, "why": why}
            move(session, incident, run, S.INTERRUPTED, now, summary, data)
            engine.advance(session, claim.incident, now, self.settings)
        with self._kept_lock:
            left = (self._kept or [])[len(kept) :]
            self._kept = left or None

    def _finish(self, session: Session, incident: Incident, outcome: Outcome | None) -> None:
        claim = self.claim
        now = self.clock.now()
        run = session.get(StepRun, claim.run_id, with_for_update=True)
        assert run is not None
        result = outcome.result if outcome is not None else None
        if run.state != S.RUNNING or run.lease_owner != self.owner:
            shown = result.summary if result is not None else "no result before its timeout"
            summary = (
                f"step {claim.step} attempt {claim.attempt} ended after this worker "
                f"lost it (now {run.state.replace('_', ' ')}): {shown}"
            )
            data = {"run": run.id, "owner": self.owner, "state": run.state}
            note(session, incident, now, "step.result_dropped", summary, data)
            return
        run.finished_at = now
        run.lease_until = None
        counts: dict[str, Any] = {}
        if result is None:
            target = S.TIMED_OUT
            limit = format_duration(claim.timeout) if claim.timeout else "?"
            run.summary = f"no result within the step's timeout ({limit}); the action is "
            run.summary += "cancelled at its next call and its log entries will follow"
            if self._stored is not None and self._stored.last is not None:  # for_each
                run.result = foreach.timed_out(self._stored.last, claim.params)
        else:
            target = S.SUCCEEDED if result.ok else S.FAILED
            run.result = result.model_dump(mode="json")
            run.summary = result.summary[:2000]
            if isinstance(result, EachResult):
                run.progress = {"nodes": result.nodes}
                counts = {"succeeded": result.succeeded, "failed": result.failed}
                counts["left"] = result.left
                if result.stopped:
                    target = S.CANCELLED
                    counts["stopped_by"] = result.stopped_by
                    counts["left_nodes"] = [
                        n for n, s in result.nodes.items() if s["state"] == "left"
                    ]
        summary = f"step {claim.step} {target.value.replace('_', ' ')}: {run.summary}"
        move(session, incident, run, target, now, summary, {"ok": target == S.SUCCEEDED, **counts})
        if target == S.FAILED:
            assert outcome is not None
            _retry(session, incident, run, now, outcome.retry_after)
        if target == S.SUCCEEDED and self._succeeded is not None:
            session.flush()
            self._succeeded(session, claim, now)
        engine.advance(session, claim.incident, now, self.settings)


def _retry(
    session: Session,
    incident: Incident,
    run: StepRun,
    now: datetime,
    retry_after: float | None,
) -> None:
    """Try a failed run again if its failure was temporary and retries remain.

    The error's class decided (`Outcome.retry_after` is set only by
    `TemporaryActionError`): a permanent failure (refused, forbidden, not found) is
    never retried, and the log says so when retries were left."""
    _, runbook = engine.frozen_runbook(session, run.incident_number)
    step = engine.frozen_step(runbook, run.step_id)
    if run.attempt > step.retries:
        return
    if retry_after is None or not engine.running(incident):
        why = (
            f"{incident.ref} is {incident.status}"
            if not engine.running(incident)
            else "the failure is permanent (refused, forbidden or not found), and "
            "retrying a refused action cannot help"
        )
        left = step.retries + 1 - run.attempt
        retries = f"{left} {'retry' if left == 1 else 'retries'}"
        summary = f"step {run.step_id} is not retried ({retries} left): {why}"
        data = {"step": run.step_id, "attempt": run.attempt, "run": run.id}
        note(session, incident, now, "step.not_retried", summary, data)
        return
    due = now + timedelta(seconds=max(retry_after, 0.0))
    again = run.next_attempt(
        now=now,
        not_before=due,
        summary=f"retry of attempt {run.attempt}, not before {due:%H:%M:%S} UTC",
    )
    session.add(again)
    session.flush()
    summary = (
        f"step {run.step_id} retried: attempt {again.attempt} of "
        f"{step.retries + 1}, same parameters, approved as {run.actor} approved attempt 1, "
        f"not before {due:%H:%M:%S} UTC (the failure was temporary: try again in "
        f"{format_duration(due - now)})"
    )
    data = {"retry_of": run.id, "not_before": due.isoformat(), "retry_after": retry_after}
    move(session, incident, again, S.APPROVED, now, summary, data)


def _execute(action: registry.Action, params: dict[str, Any], ctx: ActionContext) -> Outcome:
    outcome = execute(action, params, ctx)
    if ctx.dry_run and action.risk != Risk.READ:
        outcome = _rendered_in_drill(ctx, outcome)
    return outcome


def _rendered_in_drill(ctx: ActionContext, outcome: Outcome) -> Outcome:
    """A drill's changing step that was refused for good is rendered only, and the drill
    goes on: its earlier steps were dry runs, so the cluster is not in the state they would
    have left it (a power cycle refuses a node the dry-run drain left schedulable). The
    refusal stays in the summary and the log (docs/drills.md)."""
    result = outcome.result
    if result.ok or outcome.retry_after is not None:
        return outcome
    shown = ", ".join(f"{k}={v}" for k, v in outcome.params.items() if v not in (None, "", []))
    summary = (
        f"rendered only (drill): {outcome.action} ({shown[:300]}); its dry run was refused, "
        f"as the steps before it were dry runs too: {result.summary}"
    )
    ctx.record(
        "action.rendered",
        summary[:2000],
        {"action": outcome.action, "params": outcome.params, "dry_run": True, "refused": True},
    )
    rendered = Result(ok=True, summary=summary[:2000], dry_run=True)
    return Outcome(outcome.action, outcome.params, rendered)

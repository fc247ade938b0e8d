"""The worker: claims approved step runs and runs their actions, exactly once.

`run_once` first reaps: a running run whose lease ran out (its worker died or hung) is
marked interrupted and the engine proposes a new attempt for people to decide on; it is
never re-run on its own. It sweeps: a run still awaiting approval past `expires_at` is
expired and proposed afresh. Then it claims one approved run that is due (`FOR UPDATE
SKIP LOCKED` on PostgreSQL, so replicas never take the same run; SQLite runs one
worker), marks it running with a lease, commits, and only then runs the action, in a
thread, renewing the lease while it works and giving up waiting at the step's `timeout`.
The result is written in one transaction with the engine's next proposal, but only while
the run is still this worker's: a result that comes back after its lease was taken is
recorded and dropped. The database being away while an action runs stops neither: its
log entries and its result are kept and written once the database is back, before the
worker does anything else. A failure is retried by its class: with `Outcome.retry_after` (a
`TemporaryActionError`) as a new approved attempt due that much later, while `retries`
remain; a permanent failure never.

`run_forever` is the loop of `runbook-bot worker` and of the child process `serve` starts;
`wake` cuts its idle wait short when the webhook opened an incident or a decision was
just committed (across the process boundary through a pipe, in `serve`).
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import partial
from typing import Any, Literal

from sqlalchemy import ColumnElement, or_, select
from sqlalchemy.orm import InstrumentedAttribute, Session

from bot.actions import ActionContext, Outcome, Risk, execute, registry
from bot.actions.types import Result
from bot.clock import Clock, as_utc
from bot.config import Settings
from bot.db import Database
from bot.durations import format_duration
from bot.errors import BotError, StorageUnavailable
from bot.escalation import ladder, oncall
from bot.escalation.health import beat
from bot.escalation.ladder import ChatPager
from bot.incidents import history, log
from bot.incidents import service as incidents
from bot.incidents.models import Incident
from bot.postmortem import digest, followups, reminders
from bot.runbooks import approvals, engine
from bot.runbooks.models import IncidentRunbook, StepRun
from bot.runbooks.steps import StepState

logger = logging.getLogger(__name__)
S = StepState
IDLE_FLOOR = 0.05
"""Seconds an idle worker waits at least: timers due a moment apart fire as one batch, and
one due but held elsewhere (its incident locked) is not polled in a tight loop."""
HANDOVER_CHECK = timedelta(seconds=10)
"""How often a worker looks whether who is on call changed."""
REMIND_CHECK = timedelta(seconds=60)
"""How often a worker looks for follow-up reminders and the weekly digest that are due."""
PROGRESS_EVERY = 5.0
"""Seconds between two progress reports of one running action that are recorded."""


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


class Worker:
    def __init__(
        self,
        db: Database,
        settings: Settings,
        clock: Clock,
        kube_factory: Callable[[], Any] | None = None,
        owner: str | None = None,
        wake: threading.Event | None = None,
        chat: ChatPager | None = None,
        wake_pagers: threading.Event | None = None,
    ) -> None:
        self.db = db
        self.settings = settings
        self.clock = clock
        self.kube_factory = kube_factory
        self.owner = owner or f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
        self._wake = wake if wake is not None else threading.Event()
        """Set to look for work now (in `serve`'s worker process, by what the webhook
        writes to its wake pipe)."""
        self.chat = chat
        """Where Slack pages and hand-over summaries go (None: no chat configured)."""
        self.wake_pagers = wake_pagers
        self.started = clock.now()
        self._beaten: datetime | None = None
        self._handover_checked: datetime | None = None
        self._remind_checked: datetime | None = None
        self._swept: datetime | None = None
        self._unfinished: Callable[[], None] | None = None
        """Recording how a run's action ended, while the database could not take it: done
        before anything else (see `perform`)."""
        self._kept: dict[int, list[tuple[datetime, str, str, dict[str, Any]]]] = {}
        """Log entries of running actions the database could not take, by run, in order:
        written with the run's result (`_record`)."""
        self._kept_lock = threading.Lock()

    def wake(self) -> None:
        """Look for work now (an approval was committed)."""
        self._wake.set()

    def run_forever(self, stop: threading.Event) -> None:
        poll = self.settings.worker_poll.total_seconds()
        logger.info("worker %s started", self.owner)
        while not stop.is_set():
            try:
                worked = self.run_once()
            except BotError as exc:
                logger.warning("worker %s: %s", self.owner, exc)
                worked = False
            except Exception:
                logger.exception("worker %s: unexpected error; going on", self.owner)
                worked = False
            if not worked:
                self._wake.wait(self._idle(poll))
                self._wake.clear()
        logger.info("worker %s stopped", self.owner)

    def _idle(self, poll: float) -> float:
        """How long to wait for work: the poll, or less when a timer comes due sooner."""
        try:
            with self.db.session() as session:
                due = ladder.next_due(session)
        except BotError:
            return poll
        if due is None:
            return poll
        until = (as_utc(due) - self.clock.now()).total_seconds()
        return min(poll, max(until, IDLE_FLOOR))

    def run_once(self) -> bool:
        """Propose new runbooks' steps and fire due timers; reap expired leases and expire
        unapproved runs past their time (at most every `worker_poll`: their deadlines are
        minutes long); then claim and run one approved step that is due. True if it did
        work. A result the database could not take before is recorded first."""
        if self._unfinished is not None:
            self._unfinished()  # StorageUnavailable while the database is still away
            self._unfinished = None
            logger.info("worker %s: the result kept during the outage is recorded", self.owner)
            return True
        self.beat()
        swept = self.propose() + self.fire()
        now = self.clock.now()
        if self._swept is None or now - self._swept >= self.settings.worker_poll:
            self._swept = now
            swept += self.reap() + self.expire() + self.hand_over() + self.remind()
        claim = self.claim()
        if claim is None:
            return swept > 0
        self.perform(claim)
        return True

    def propose(self) -> int:
        """Propose the first steps of runbooks that ingest froze onto new incidents, oldest
        first, one incident per transaction. Each is taken once: its row is locked (other
        workers skip it) and marked proposed, also when its incident is no longer active
        (nothing to propose) or proposing failed (a bug, logged on the incident)."""
        count = 0
        while True:
            with self.db.transaction() as session:
                now = self.clock.now()
                stmt = (
                    select(IncidentRunbook)
                    .where(IncidentRunbook.proposed_at.is_(None))
                    .order_by(IncidentRunbook.incident_number)
                    .limit(1)
                )
                if self.db.is_postgres:
                    stmt = stmt.with_for_update(skip_locked=True)
                frozen = session.scalars(stmt).first()
                if frozen is None:
                    return count
                frozen.proposed_at = now
                count += 1
                number = frozen.incident_number
                try:
                    with session.begin_nested():
                        engine.advance(session, number, now, self.settings)
                except Exception:  # a bug: say so, keep the worker and the incident
                    error_id = uuid.uuid4().hex[:8]
                    logger.exception(
                        "INC-%s: proposing steps failed (error id %s)", number, error_id
                    )
                    log.append(
                        session,
                        incidents.get(session, number, lock=True),
                        at=now,
                        actor=engine.BOT,
                        type="runbook.propose_failed",
                        summary=f"proposing the runbook's steps failed with an internal error "
                        f"(id {error_id}); the bot's log has the details. Work the incident "
                        "by hand.",
                        data={"error_id": error_id},
                    )

    def beat(self) -> None:
        """Record that this worker is alive, every `worker_heartbeat` at most."""
        now = self.clock.now()
        if self._beaten is not None and now - self._beaten < self.settings.worker_heartbeat:
            return
        with self.db.transaction() as session:
            beat(session, self.owner, self.started, now)
        self._beaten = now

    def fire(self) -> int:
        """Fire the escalation timers that are due, a batch per transaction; how many."""
        count = 0
        while True:
            with self.db.transaction() as session:
                fired = ladder.fire_due(
                    session,
                    self.clock.now(),
                    self.settings,
                    self.owner,
                    self.chat,
                    postgres=self.db.is_postgres,
                )
            count += len(fired.late)
            if fired.late and self.wake_pagers is not None:
                self.wake_pagers.set()
            # A short batch was the last; one whose incidents were all held elsewhere is
            # left for the next pass rather than selected again at once.
            if not fired.late or len(fired.late) + fired.skipped < ladder.BATCH:
                return count

    def hand_over(self) -> int:
        """Send the hand-over summary when who is on call changed (checked every
        HANDOVER_CHECK); 1 when this worker took a hand-over."""
        now = self.clock.now()
        checked = self._handover_checked
        if checked is not None and now - checked < HANDOVER_CHECK:
            return 0
        self._handover_checked = now
        with self.db.transaction() as session:
            handover = oncall.handover_due(session, self.settings, now, self.owner)
            if handover is None:
                return 0
            logger.info("on-call hand-over: %s -> %s", handover.outgoing, handover.incoming)
            if handover.announce and self.chat is not None:
                text = oncall.summary(oncall.unclosed(session), handover, now)
                for person in (handover.outgoing, handover.incoming):
                    if person is not None and ladder.reachable(self.settings, person):
                        self.chat.tell(session, person, text, now)
            return 1

    def remind(self) -> int:
        """Send the follow-up reminders and post the weekly digest that are due (checked
        every REMIND_CHECK, only with chat); how many were sent. A storage error is logged:
        the next check tries again."""
        now = self.clock.now()
        checked = self._remind_checked
        if self.chat is None or (checked is not None and now - checked < REMIND_CHECK):
            return 0
        self._remind_checked = now
        try:
            with self.db.transaction() as session:
                sent = len(reminders.send(session, self.chat, now, self.settings))
            with self.db.transaction() as session:
                week = digest.post_due(session, self.chat, now, self.settings, self.owner)
        except BotError as exc:
            logger.warning("worker %s: follow-up reminders: %s", self.owner, exc)
            return 0
        if week is not None:
            logger.info("weekly digest of the week of %s taken", week.monday)
        return sent + (week is not None)

    def reap(self) -> int:
        """Mark running runs whose lease ran out interrupted; the engine re-proposes them."""
        return self._sweep(S.RUNNING, StepRun.lease_until, self._interrupt)

    def expire(self) -> int:
        """Expire runs still awaiting approval past `expires_at`; the engine proposes each
        step again with fresh parameters. One run per transaction, each once: the row is
        locked (skipped by other workers on PostgreSQL) and its state checked again."""
        return self._sweep(
            S.AWAITING_APPROVAL,
            StepRun.expires_at,
            lambda session, run, now: approvals.expire_run(session, run, now, self.settings),
        )

    def _sweep(
        self,
        state: StepState,
        deadline: InstrumentedAttribute[datetime | None],
        handle: Callable[[Session, StepRun, datetime], object],
    ) -> int:
        """`handle` each run in `state` past its `deadline`, one per transaction; how many."""
        count = 0
        while True:
            with self.db.transaction() as session:
                now = self.clock.now()
                run = self._first(session, StepRun.state == state.value, deadline < now)
                if run is None:
                    return count
                handle(session, run, now)
                count += 1

    def _interrupt(self, session: Session, run: StepRun, now: datetime) -> None:
        incident = incidents.get(session, run.incident_number, lock=True)
        run.finished_at = now
        run.summary = f"interrupted: worker {run.lease_owner} stopped renewing its lease"
        summary = (
            f"step {run.step_id} interrupted: worker {run.lease_owner} lost "
            f"its lease at {run.lease_until:%H:%M:%S} UTC; whether the action "
            "finished is unknown, so it is not re-run: a person decides again"
        )
        data = {"owner": run.lease_owner, "lease_until": str(run.lease_until)}
        _move(session, incident, run, S.INTERRUPTED, now, summary, data)
        engine.advance(session, run.incident_number, now, self.settings)

    def claim(self) -> Claim | None:
        """Mark one approved, due run running under this worker's lease, and commit."""
        while True:
            with self.db.transaction() as session:
                claim = self._claim(session)
                if claim is not False:
                    return claim

    def _claim(self, session: Session) -> Claim | None | Literal[False]:
        """The claim, None when nothing is due, False when the run found was cancelled
        because its incident ended (resolving cancels waiting runs, but one approved while
        the incident was being resolved may slip through: it never runs)."""
        now = self.clock.now()
        run = self._first(
            session,
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
        run.lease_owner = self.owner
        run.lease_until = now + self.settings.worker_lease
        summary = (
            f"step {run.step_id} started: {run.action} {engine.brief(run.params, run.action)} "
            f"as {run.actor} (attempt {run.attempt})"
        )
        _move(session, incident, run, S.RUNNING, now, summary, {"owner": self.owner})
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
        )

    def perform(self, claim: Claim) -> None:
        """Run a claimed action and record how it ended. The action did run: if the
        database is away when it ends, the result is kept and recorded once it is back
        (`run_once`), not left for the reaper to call interrupted and ask people again."""
        outcome = self._run(claim)
        end = partial(self._end, claim, outcome)
        try:
            end()
        except StorageUnavailable as exc:
            self._unfinished = end
            logger.warning(
                "worker %s: step %s of INC-%s ended but %s; its result is kept and recorded "
                "once the database is back",
                self.owner,
                claim.step,
                claim.incident,
                exc,
            )

    def _end(self, claim: Claim, outcome: Outcome | None) -> None:
        with self._kept_lock:
            kept = list(self._kept.get(claim.run_id, []))
        with self.db.transaction() as session:
            incident = incidents.get(session, claim.incident, lock=True)
            for at, kind, summary, data in kept:
                actor = engine.actor_of(claim.actor)
                log.append(
                    session, incident, at=at, actor=actor, type=kind, summary=summary, data=data
                )
            self._finish(session, claim, outcome)
        with self._kept_lock:
            left = self._kept.pop(claim.run_id, [])[len(kept) :]
            if left:  # an action that outlived its step's timeout logs on
                self._kept[claim.run_id] = left

    def _first(self, session: Session, *where: ColumnElement[bool]) -> StepRun | None:
        """The oldest run matching `where`, locked (one another worker holds is passed over)."""
        stmt = select(StepRun).where(*where).order_by(StepRun.id).limit(1)
        if self.db.is_postgres:
            # SQLite has one worker and takes its write lock at BEGIN; no row locks there.
            stmt = stmt.with_for_update(skip_locked=True)
        return session.scalars(stmt).first()

    def _run(self, claim: Claim) -> Outcome | None:
        """The action's outcome, or None when it outlived the step's timeout."""
        done: list[Outcome] = []

        def target() -> None:
            try:
                action = registry.get(claim.action)
                ctx = self._context(claim)
                outcome = execute(action, claim.params, ctx)
                if ctx.dry_run and action.risk != Risk.READ:
                    outcome = _rendered_in_drill(ctx, outcome)
                done.append(outcome)
            except BotError as exc:  # unknown action, parameters refused: nothing ran
                failed = Result(ok=False, summary=str(exc))
                done.append(Outcome(claim.action, claim.params, failed))
            except Exception:  # a bug; the run fails instead of the thread dying unseen
                error_id = uuid.uuid4().hex[:8]
                logger.exception("step run %s failed (error id %s)", claim.run_id, error_id)
                failed = Result(ok=False, summary=f"internal error (id {error_id})")
                done.append(Outcome(claim.action, claim.params, failed))

        thread = threading.Thread(target=target, name=f"step-{claim.run_id}", daemon=True)
        thread.start()
        renew_every = self.settings.worker_lease.total_seconds() / 3
        deadline = None
        if claim.timeout is not None:
            deadline = time.monotonic() + claim.timeout.total_seconds()
        while thread.is_alive():
            wait = renew_every
            if deadline is not None:
                wait = min(wait, max(deadline - time.monotonic(), 0))
            thread.join(wait)
            if not thread.is_alive():
                break
            if deadline is not None and time.monotonic() >= deadline:
                return None
            self._renew(claim)
        return done[0] if done else None

    def _renew(self, claim: Claim) -> None:
        """Extend the lease of a run in hand. The database being away stops neither the
        action nor the wait for it: the next renewal tries again (a lease that ran out
        meanwhile may be reaped; `_finish` then records the result as dropped)."""
        try:
            with self.db.transaction() as session:
                run = session.get(StepRun, claim.run_id, with_for_update=True)
                if run is not None and run.state == S.RUNNING and run.lease_owner == self.owner:
                    run.lease_until = self.clock.now() + self.settings.worker_lease
        except StorageUnavailable as exc:
            logger.warning(
                "worker %s: lease of step run %s not renewed: %s", self.owner, claim.run_id, exc
            )

    def _context(self, claim: Claim) -> ActionContext:
        # A drill's steps all run as dry runs: Kubernetes writes go with dryRun=All, BMC
        # power and node Jobs are rendered only (docs/drills.md). Reads run for real.
        with self.db.session() as session:
            drill = incidents.get(session, claim.incident).drill
        ctx = ActionContext(
            actor=claim.actor,
            settings=self.settings,
            clock=self.clock,
            incident=f"INC-{claim.incident}",
            dry_run=drill is not None,
            record=partial(self._record, claim),
            progress=self._progress(claim),
            kube_factory=self.kube_factory,
            alert_history=partial(history.alerts_on_node, self.db, drill=drill),
        )
        return ctx

    def _progress(self, claim: Claim) -> Callable[[str], None]:
        """Progress of a running action (drain: pods left): the run's summary, which the
        chat card shows, and an `action.progress` log entry, at most every PROGRESS_EVERY
        so a drain of 200 pods is not 200 messages."""
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

    def _record(self, claim: Claim, kind: str, summary: str, data: dict[str, Any]) -> None:
        """A log entry of a running action. The action goes on while the database is away:
        the entry is kept, with the ones after it, and written with the run's result."""
        now = self.clock.now()
        data = {**data, "step": claim.step, "attempt": claim.attempt, "run": claim.run_id}
        with self._kept_lock:
            kept = self._kept.get(claim.run_id)
            if kept is None:
                try:
                    with self.db.transaction() as session:
                        incident = incidents.get(session, claim.incident, lock=True)
                        actor = engine.actor_of(claim.actor)
                        log.append(
                            session,
                            incident,
                            at=now,
                            actor=actor,
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
                    kept = self._kept.setdefault(claim.run_id, [])
            kept.append((now, kind, summary, data))

    def _finish(self, session: Session, claim: Claim, outcome: Outcome | None) -> None:
        now = self.clock.now()
        run = session.get(StepRun, claim.run_id, with_for_update=True)
        assert run is not None
        incident = incidents.get(session, claim.incident, lock=True)
        result = outcome.result if outcome is not None else None
        if run.state != S.RUNNING or run.lease_owner != self.owner:
            shown = result.summary if result is not None else "no result before its timeout"
            summary = (
                f"step {claim.step} attempt {claim.attempt} ended after this worker "
                f"lost it (now {run.state.replace('_', ' ')}): {shown}"
            )
            data = {"run": run.id, "owner": self.owner, "state": run.state}
            _note(session, incident, now, "step.result_dropped", summary, data)
            return
        run.finished_at = now
        run.lease_until = None
        if result is None:
            target = S.TIMED_OUT
            limit = format_duration(claim.timeout) if claim.timeout else "?"
            run.summary = f"no result within the step's timeout ({limit}); the action may "
            run.summary += "still finish: its log entries will follow"
        else:
            target = S.SUCCEEDED if result.ok else S.FAILED
            run.result = result.model_dump(mode="json")
            run.summary = result.summary[:2000]
        summary = f"step {claim.step} {target.value.replace('_', ' ')}: {run.summary}"
        _move(session, incident, run, target, now, summary, {"ok": target == S.SUCCEEDED})
        if target == S.FAILED:
            assert outcome is not None
            self._retry(session, incident, run, now, outcome.retry_after)
        if target == S.SUCCEEDED and claim.action == "gpu.fault_history":
            session.flush()
            followups.from_runs(session, claim.incident, now)  # the RMA follow-up
        engine.advance(session, claim.incident, now, self.settings)

    def _retry(
        self,
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
            _note(session, incident, now, "step.not_retried", summary, data)
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
        _move(session, incident, again, S.APPROVED, now, summary, data)


def _move(
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


def _note(
    session: Session,
    incident: Incident,
    now: datetime,
    kind: str,
    summary: str,
    data: dict[str, Any],
) -> None:
    """A log entry the worker writes as the bot."""
    log.append(session, incident, at=now, actor=engine.BOT, type=kind, summary=summary, data=data)


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

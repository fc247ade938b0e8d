"""The worker's loop: claims due work, and never waits on an action.

Each pass (`run_once`) tends the runs in hand first (records the results that came in,
times out and cancels the ones past their step's timeout, renews leases: see
`bot.runbooks.running`), beats, proposes new runbooks' first steps and fires due timers
(pages); at most every `worker_poll` it reaps lost leases, expires unapproved runs,
hands over on-call and sends reminders (`bot.runbooks.claims`). Then, while fewer than
`worker_actions` runs are in hand, it claims an approved run that is due and starts its
action on a thread of its own, and goes on. So an action that runs for an hour (a drain,
a reboot, `dcgmi diag -r 3`) delays no proposal, page, expiry or reaping; an action that
ends wakes the loop, which records its result at once and takes the next run.

`run_forever` is the loop of `runbook-bot worker` and of the child process `serve` starts;
`wake` cuts its idle wait short when the webhook opened an incident or a decision was
just committed (across the process boundary through a pipe, in `serve`). Asked to stop, it
claims nothing more, records the runs in hand that ended, and cancels the others (a drain
a budget blocks may run for hours): each stops at its next call or wait, and is written
`interrupted` (a person decides again, as after a crash) before the loop returns.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from bot.clock import Clock, as_utc
from bot.config import Settings
from bot.db import Database
from bot.errors import BotError, StorageUnavailable
from bot.escalation import ladder, oncall
from bot.escalation.health import beat
from bot.escalation.ladder import ChatPager
from bot.incidents import log
from bot.incidents import service as incidents
from bot.postmortem import digest, followups, reminders
from bot.runbooks import claims, engine
from bot.runbooks.claims import Claim
from bot.runbooks.models import IncidentRunbook
from bot.runbooks.running import Running
from bot.topology import Topology

__all__ = ["Claim", "Worker"]

logger = logging.getLogger(__name__)
IDLE_FLOOR = 0.05
"""Seconds an idle worker waits at least: timers due a moment apart fire as one batch, and
one due but held elsewhere (its incident locked) is not polled in a tight loop."""
HANDOVER_CHECK = timedelta(seconds=10)
"""How often a worker looks whether who is on call changed."""
REMIND_CHECK = timedelta(seconds=60)
"""How often a worker looks for follow-up reminders and the weekly digest that are due."""
STOP_GRACE = 5.0
"""Real seconds a stopping worker gives the actions it cancelled to end before it writes
them interrupted and returns."""
SETTLE_POLL = 0.05
"""Real seconds between two looks at the runs in hand while `settle` waits for them."""


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
        topology: Callable[[], Topology] | None = None,
    ) -> None:
        self.db = db
        self.settings = settings
        self.clock = clock
        self.kube_factory = kube_factory
        self.owner = owner or f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
        self._wake = wake if wake is not None else threading.Event()
        """Set to look for work now (in `serve`'s worker process, by what the webhook
        writes to its wake pipe), and by an action that ended."""
        self.chat = chat
        """Where Slack pages and hand-over summaries go (None: no chat configured)."""
        self.wake_pagers = wake_pagers
        self.topology = topology
        """The failure domains now (a `NodeCache`'s `current`), for what the engine says
        about an incident's domain; None: no topology read (every node its own domain)."""
        self.started = clock.now()
        self._beaten: datetime | None = None
        self._handover_checked: datetime | None = None
        self._remind_checked: datetime | None = None
        self._swept: datetime | None = None
        self._hand: dict[int, Running] = {}
        """The runs this worker claimed and has not recorded yet, by run id: at most
        `worker_actions`. Only the loop's thread touches it."""

    def wake(self) -> None:
        """Look for work now (an approval was committed)."""
        self._wake.set()

    @property
    def in_hand(self) -> int:
        """How many claimed runs this worker has not recorded yet."""
        return len(self._hand)

    def run_forever(self, stop: threading.Event) -> None:
        poll = self.settings.worker_poll.total_seconds()
        logger.info("worker %s started", self.owner)
        while not stop.is_set():
            worked = self._guarded(self.run_once)
            if not worked:
                self._wake.wait(self._idle(poll))
                self._wake.clear()
        self._guarded(self.tend)  # what ended already is recorded as it ended
        if self._hand:
            self.interrupt_in_hand()
        logger.info("worker %s stopped", self.owner)

    def interrupt_in_hand(self, grace: float = STOP_GRACE) -> None:
        """Stopping: cancel the runs in hand (each stops at its next call or wait, however
        long its step's timeout), give their actions up to `grace` real seconds to end, and
        write each interrupted, for people to decide again. A drain blocked on a budget
        for hours does not hold the stop; one the database cannot take now is left to the
        reaper once its lease runs out."""
        logger.info("worker %s: stopping; cancelling %d steps in hand", self.owner, len(self._hand))
        for running in self._hand.values():
            running.cancelled.set()
        deadline = time.monotonic() + grace
        for running in self._hand.values():
            running.wait(max(deadline - time.monotonic(), 0.0))
        for run_id, running in list(self._hand.items()):
            try:
                running.interrupt(f"worker {self.owner} stopped while it ran")
            except BotError as exc:
                logger.warning(
                    "worker %s: step %s of INC-%s is left to the reaper (its lease runs out): %s",
                    self.owner,
                    running.claim.step,
                    running.claim.incident,
                    exc,
                )
            del self._hand[run_id]

    def _guarded(self, work: Callable[[], bool]) -> bool:
        try:
            return work()
        except BotError as exc:
            logger.warning("worker %s: %s", self.owner, exc)
        except Exception:
            logger.exception("worker %s: unexpected error; going on", self.owner)
        return False

    def _idle(self, poll: float) -> float:
        """How long to wait for work: the poll, or less when a timer, a lease renewal or a
        step's timeout comes due sooner (an action that ends wakes the loop itself)."""
        wait = poll
        for running in self._hand.values():
            wait = min(wait, max(running.due_in(), IDLE_FLOOR))
        try:
            with self.db.session() as session:
                due = ladder.next_due(session)
        except BotError:
            return wait
        if due is None:
            return wait
        until = (as_utc(due) - self.clock.now()).total_seconds()
        return min(wait, max(until, IDLE_FLOOR))

    def run_once(self) -> bool:
        """One pass: tend the runs in hand, propose new runbooks' steps and fire due timers;
        reap expired leases and expire unapproved runs past their time (at most every
        `worker_poll`: their deadlines are minutes long); then claim approved steps that
        are due while a slot of `worker_actions` is free, and start them. Never waits for
        an action. True if it did work."""
        worked = self.tend()
        self.beat()
        swept = self.propose() + self.fire()
        now = self.clock.now()
        if self._swept is None or now - self._swept >= self.settings.worker_poll:
            self._swept = now
            swept += self.reap() + self.expire() + self.hand_over() + self.remind()
        while len(self._hand) < self.settings.worker_actions:
            claim = self.claim()
            if claim is None:
                break
            self.start(claim)
            worked = True
        return worked or swept > 0

    def tend(self) -> bool:
        """Record the runs in hand whose action ended or whose step timed out, and renew
        the others' leases when due; True if a result was recorded. A result the database
        cannot take stays in hand (`StorageUnavailable` is raised after the others)."""
        recorded, away = False, None
        for run_id, running in list(self._hand.items()):
            try:
                over = running.tend()
            except StorageUnavailable as exc:
                if away is None:
                    logger.warning(
                        "worker %s: step %s of INC-%s ended but %s; its result is kept and "
                        "recorded once the database is back",
                        self.owner,
                        running.claim.step,
                        running.claim.incident,
                        exc,
                    )
                away = exc
                continue
            except Exception:  # a bug recording it: drop it; the reaper asks people again
                logger.exception(
                    "worker %s: recording step %s of INC-%s failed; it is left to the reaper",
                    self.owner,
                    running.claim.step,
                    running.claim.incident,
                )
                running.cancelled.set()
                over = True
            if over:
                del self._hand[run_id]
                recorded = True
        if away is not None:
            raise away
        return recorded

    def settle(self, timeout: float = 60.0) -> bool:
        """Wait (real time, at most `timeout`) until every run in hand has ended or timed
        out and its result is recorded; True if there were runs in hand. For tests and
        tools that drive the worker pass by pass."""
        had = bool(self._hand)
        deadline = time.monotonic() + timeout
        while self._hand and time.monotonic() < deadline:
            if not self.tend() and self._hand:
                self._wake.wait(SETTLE_POLL)
                self._wake.clear()
        return had

    def claim(self) -> Claim | None:
        """Mark one approved, due run running under this worker's lease, and commit."""
        return claims.claim(self.db, owner=self.owner, settings=self.settings, clock=self.clock)

    def start(self, claim: Claim) -> Running:
        """Start a claimed run's action on its own thread; the loop tends it from here."""
        running = Running(
            claim,
            db=self.db,
            settings=self.settings,
            clock=self.clock,
            owner=self.owner,
            kube_factory=self.kube_factory,
            on_done=self._wake.set,
            succeeded=_opened_follow_ups,
        )
        self._hand[claim.run_id] = running
        running.start()
        return running

    def perform(self, claim: Claim) -> None:
        """Run a claimed action to its end and record it, waiting (tools and tests that
        hold a claim of their own; the loop never waits)."""
        running = self._hand.get(claim.run_id) or self.start(claim)
        while not running.tend():
            running.wait(SETTLE_POLL)
        del self._hand[claim.run_id]

    def _renew(self, claim: Claim) -> None:
        """Extend the lease of a run in hand (one claimed and not started: as `start` would)."""
        running = self._hand.get(claim.run_id)
        if running is None:
            running = Running(
                claim, db=self.db, settings=self.settings, clock=self.clock, owner=self.owner
            )
        running.renew()

    def reap(self) -> int:
        """Mark running runs whose lease ran out interrupted; the engine re-proposes them."""
        return claims.reap(self.db, settings=self.settings, clock=self.clock)

    def expire(self) -> int:
        """Expire runs still awaiting approval past `expires_at`; the engine proposes each
        step again with fresh parameters."""
        return claims.expire(self.db, settings=self.settings, clock=self.clock)

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


def _opened_follow_ups(session: Session, claim: Claim, now: datetime) -> None:
    """A succeeded `gpu.fault_history` opens its RMA follow-up."""
    if claim.action == "gpu.fault_history":
        followups.from_runs(session, claim.incident, now)

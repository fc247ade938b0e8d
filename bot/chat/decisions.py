"""The decisions a chat surface lets people make, shared by Slack and the web console.

Each surface says who clicked (`Clicker`, a `people.Decider`: the person, with the roles
the surface knows them to hold, and the channel) and which decision; this module checks
the role, writes a refusal into the incident's log (`chat.refused`), and calls the room
that decides: the runbook engine for steps and resolving, escalation for acknowledging,
incidents for ownership, postmortem for follow-ups. A `BotError` from a room is the
answer the clicker sees.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import date, datetime, timedelta
from functools import partial
from typing import Literal, TypeVar

from sqlalchemy.orm import Session

from bot import escalation
from bot.clock import Clock
from bot.config import Settings
from bot.db import Database
from bot.errors import BotError
from bot.escalation import SecondLine
from bot.escalation.ladder import ChatPager
from bot.incidents import log
from bot.incidents import service as incidents
from bot.people import Decider
from bot.postmortem import followups
from bot.postmortem.models import Followup
from bot.runbooks import foreach
from bot.runbooks import service as runbooks
from bot.runbooks.models import StepRun

logger = logging.getLogger(__name__)

StepDecision = Literal["approve", "skip", "done", "stop"]
DONE_NOTE = "say what was done, e.g. 'replaced the cable'"
"""What a person marking a step done without a note reads (the surface's words)."""
T = TypeVar("T")


Clicker = Decider
"""Who clicked: a person (id, name, roles: strongest first, empty: they may look, not
decide) through a channel (`slack`, `console`)."""


def pager_of(settings: Settings) -> ChatPager | None:
    """The chat that reaches people the ladder pages, as `serve` builds it: Slack through
    the outbox, console users through the console, both when both are on."""
    from bot.chat.console.chat import BothChats, ConsoleChat
    from bot.chat.outbox import OutboxChat

    slack = None
    if settings.slack_enabled and settings.slack_channel is not None:
        slack = OutboxChat(settings.slack_channel)
    if settings.console.enabled:
        return BothChats(slack, ConsoleChat())
    return slack


def no_role(what: str, hint: str = "to add you to the on-call user group") -> str:
    """The refusal a person without a role reads."""
    return f"you need the responder role to {what} incidents; ask an admin {hint}"


class Decisions:
    """The decisions, bound to the database, the clock and the settings; `wake` runs
    after each committed decision (the worker and the chat sender have work)."""

    def __init__(
        self,
        settings: Settings,
        db: Database,
        clock: Clock,
        wake: Callable[[], None] = lambda: None,
        hint: str = "to add you to the on-call user group",
        chat: ChatPager | None = None,
    ) -> None:
        self.settings = settings
        self.db = db
        self.clock = clock
        self.wake = wake
        self.hint = hint
        self.chat = chat if chat is not None else pager_of(settings)
        """Who pages the second line now (`page_second`): as `serve`'s worker does."""

    def allowed(self, who: Clicker, number: int, what: str) -> str | None:
        """None when `who` may decide; else the refusal (already in the incident's log)."""
        if who.roles:
            return None
        self.log_refusal(who, number, what)
        return no_role(what, self.hint)

    def log_refusal(self, who: Clicker, number: int, what: str) -> None:
        actor = log.Actor.deciding(who)

        def record(session: Session, now: datetime) -> None:
            incident = incidents.get(session, number, lock=True)
            log.append(
                session,
                incident,
                at=now,
                actor=actor,
                type="chat.refused",
                summary=f"{actor.name} has no role and may not {what} {incident.ref}",
                data={"user": actor.id, "wanted": what},
            )

        try:
            self.in_tx(record)
        except BotError as exc:
            logger.warning("could not log a refused click: %s", exc)

    def step(
        self,
        who: Clicker,
        run: StepRun,
        decision: StepDecision,
        note: str | None = None,
        count: int | None = None,
        acknowledge: bool = True,
    ) -> StepRun:
        """Approve, skip (a step later steps read needs a `note`), mark done (`note`
        required) or stop the rest of the step `run` is an attempt of. The caller checked
        `allowed`. Approving a change to many nodes names `count`; a surface whose button
        can carry only the run (Slack) names the count of the run it showed, which its
        hash binds to. Deciding acknowledges an open incident unless `acknowledge` is
        False."""
        if count is None and foreach.needs_count(run.params, run.action):
            count = len(foreach.nodes_of(run.params))
        calls: dict[str, Callable[..., StepRun]] = {
            "approve": partial(runbooks.approve, params_hash=run.params_hash, count=count),
            "skip": partial(runbooks.skip, note=note),
            "done": partial(runbooks.complete, note=note or ""),
            "stop": partial(runbooks.stop, note=note),
        }
        if decision == "done" and not (note or "").strip():
            raise BotError(DONE_NOTE)
        done = calls[decision](
            self.db,
            run.incident_number,
            run.step_id,
            who=who,
            clock=self.clock,
            settings=self.settings,
            acknowledge=acknowledge,
        )
        return self._after(done)

    def repropose(
        self, who: Clicker, run: StepRun, note: str | None, acknowledge: bool = True
    ) -> StepRun:
        """Propose again the step `run` is an attempt of (its newest run was skipped,
        failed, timed out, expired or cancelled): a new attempt whose approvals start
        again; the steps after it are decided again in their turn."""
        self._role(who, run.incident_number, "propose steps again on")
        again = runbooks.repropose(
            self.db,
            run.incident_number,
            run.step_id,
            who=who,
            clock=self.clock,
            settings=self.settings,
            note=note,
            acknowledge=acknowledge,
        )
        return self._after(again)

    def page_second(self, who: Clicker, number: int, why: str | None = None) -> SecondLine:
        """Page the second level of the incident's escalation now (a first approver waits
        for a second person); who it reached and when."""
        self._role(who, number, "page the second line for")
        actor = log.Actor.deciding(who)
        reason = why or "a step waits for a second person's approval"

        def page(session: Session, now: datetime) -> SecondLine:
            return escalation.page_now(
                session, self.settings, number, actor=actor, now=now, why=reason,
                chat=self.chat,
            )  # fmt: skip

        paged = self.in_tx(page)
        self.wake()
        return paged

    def _role(self, who: Clicker, number: int, what: str) -> None:
        refused = self.allowed(who, number, what)
        if refused is not None:
            raise BotError(refused)

    def _after(self, run: StepRun) -> StepRun:
        self.wake()
        return run

    def acknowledge(self, who: Clicker, number: int) -> None:
        actor = log.Actor.deciding(who)
        self.in_tx(lambda s, now: escalation.acknowledge(s, number, actor=actor, at=now))
        self.wake()

    def own(
        self, who: Clicker, number: int, owner: str | None = None, acknowledge: bool = True
    ) -> str:
        """Make `owner` (default: the clicker) the incident's owner; the owner. Taking
        ownership acknowledges an open incident unless `acknowledge` is False."""
        actor, owner = log.Actor.deciding(who), owner or who.id

        self.in_tx(
            lambda s, now: escalation.own(
                s, number, owner, actor=actor, at=now, acknowledge=acknowledge,
                decides=bool(who.roles),
            )
        )  # fmt: skip
        self.wake()
        return owner

    def silence(self, who: Clicker, number: int, length: timedelta) -> None:
        """Page nobody about the incident for `length`; then its escalation resumes."""
        actor = log.Actor.deciding(who)
        self.in_tx(lambda s, now: escalation.silence(s, number, length, actor=actor, at=now))
        self.wake()

    def resolve(self, who: Clicker, number: int, disposition: str | None) -> None:
        runbooks.resolve(
            self.db,
            number,
            actor=log.Actor.deciding(who),
            clock=self.clock,
            disposition=disposition,
        )
        self.wake()

    def add_followup(
        self,
        who: Clicker,
        number: int,
        title: str,
        *,
        kind: str,
        owner: str | None,
        deadline: date | None,
    ) -> Followup:
        actor = log.Actor.deciding(who)

        def add(session: Session, now: datetime) -> Followup:
            return followups.add(
                session,
                number,
                title,
                type=kind,
                owner=owner,
                deadline=deadline,
                link=None,
                actor=actor,
                now=now,
            )

        item = self.in_tx(add)
        self.wake()
        return item

    def followup_done(self, who: Clicker, number: int, followup_id: int) -> Followup:
        """Mark follow-up `followup_id` of incident `number` done (`followup.done` in the
        log); BotError when it is not one of that incident's."""
        actor = log.Actor.deciding(who)

        def done(session: Session, now: datetime) -> Followup:
            item = followups.get(session, followup_id)
            if item.incident_number != number:
                raise BotError(f"follow-up #{followup_id} is not one of INC-{number}'s")
            return followups.update(session, followup_id, status="done", actor=actor, now=now)

        item = self.in_tx(done)
        self.wake()
        return item

    def in_tx(self, call: Callable[[Session, datetime], T]) -> T:
        with self.db.transaction() as session:
            return call(session, self.clock.now())

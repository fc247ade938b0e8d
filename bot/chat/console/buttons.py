"""What each console button decides, and the words it answers with: the step buttons
(approve, skip, done, stop, propose again), the incident's (acknowledge, take ownership,
resolve, page the second line now) and the follow-ups'. `routes` checks the login, the
CSRF token and the role, then calls one of these with the form; a `BotError` raised here
is the answer, shown next to the control pressed (`placed` says in which block).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import date

from bot.chat import cards
from bot.chat.console.sessions import Flash
from bot.chat.decisions import Clicker, Decisions
from bot.chat.views import CardView
from bot.db import Database
from bot.errors import BotError, RequestRejected
from bot.incidents import service as incidents
from bot.postmortem import followups
from bot.runbooks.models import StepRun

ANCHORS = ("decision", "running", "history", "folded", "incident-actions", "followups")
"""The blocks a form may name (`at`) for its answer; the status line takes the rest."""

Decision = Callable[[Clicker, int, dict[str, str]], str]
"""A button: who pressed it, the incident, the form (with the path's ids); the answer."""


class Unconfirmed(BotError):
    """A disruptive step approved without confirming its targets (`confirmed=1`)."""

    def __init__(self, run: StepRun) -> None:
        self.run = run
        self.targets = ", ".join(cards.targets_of(run.params)) or "(no targets named)"
        super().__init__(
            f"step {run.step_id} is disruptive: confirm its targets ({self.targets}) first"
        )


class Buttons:
    """The buttons, bound to the database and the shared decisions."""

    def __init__(self, db: Database, decisions: Decisions) -> None:
        self.db = db
        self.decisions = decisions

    def _run(self, number: int, form: dict[str, str]) -> StepRun:
        with self.db.session() as session:
            run = session.get(StepRun, int(form["run"]))
        if run is None or run.incident_number != number:
            raise BotError("that step no longer exists; reload the page")
        return run

    def approve(self, user: Clicker, number: int, form: dict[str, str]) -> str:
        run = self._run(number, form)
        if cards.risk_of(run.action) == "disruptive" and form.get("confirmed") != "1":
            raise Unconfirmed(run)
        run = self.decisions.step(user, run, "approve", count=_count(form))
        return _step_flash(run, "approved")

    def stop(self, user: Clicker, number: int, form: dict[str, str]) -> str:
        note = form.get("note", "").strip() or None
        run = self.decisions.step(user, self._run(number, form), "stop", note=note)
        return (
            f"INC-{run.incident_number} {run.step_id}: the rest is stopped; the nodes "
            "running finish and none starts"
        )

    def repropose(self, user: Clicker, number: int, form: dict[str, str]) -> str:
        note = form.get("note", "").strip() or None
        run = self.decisions.repropose(user, self._run(number, form), note)
        return f"INC-{run.incident_number} {run.step_id}: proposed again; it waits for a decision"

    def page_second(self, user: Clicker, number: int, form: dict[str, str]) -> str:
        second = self.decisions.page_second(user, number)
        names = ", ".join(second.names) or f"level {second.level}"
        return f"INC-{number}: paged the second line ({names}) now"

    def skip(self, user: Clicker, number: int, form: dict[str, str]) -> str:
        note = form.get("note", "").strip() or None
        run = self.decisions.step(user, self._run(number, form), "skip", note=note)
        return _step_flash(run, "skipped")

    def done(self, user: Clicker, number: int, form: dict[str, str]) -> str:
        run = self.decisions.step(user, self._run(number, form), "done", note=form.get("note"))
        return _step_flash(run, "marked done")

    def acknowledge(self, user: Clicker, number: int, form: dict[str, str]) -> str:
        self.decisions.acknowledge(user, number)
        return f"INC-{number} acknowledged"

    def own(self, user: Clicker, number: int, form: dict[str, str]) -> str:
        owner = self.decisions.own(user, number)
        return f"INC-{number} is owned by {owner}"

    def resolve(self, user: Clicker, number: int, form: dict[str, str]) -> str:
        disposition = form.get("disposition", "").strip() or None
        if disposition is None:
            with self.db.session() as session:
                critical = incidents.get(session, number).severity == "critical"
            if critical:
                raise BotError(
                    f"INC-{number} is critical: write the disposition (what was done, what "
                    "remains) before resolving, e.g. 'drained gpu-node-02, GPU 5 reset, back "
                    "in service'"
                )
        self.decisions.resolve(user, number, disposition)
        return f"INC-{number} resolved"

    def add_followup(self, user: Clicker, number: int, form: dict[str, str]) -> str:
        title = form.get("title", "").strip()
        if not title:
            raise BotError("what will change? write the follow-up's title")
        raw = form.get("deadline", "").strip()
        deadline: date | None = followups.parse_date(raw) if raw else None
        item = self.decisions.add_followup(
            user,
            number,
            title,
            kind=form.get("type", "prevent"),
            owner=form.get("owner", "").strip() or None,
            deadline=deadline,
        )
        return f"Follow-up #{item.id} added to INC-{number}"

    def followup_done(self, user: Clicker, number: int, form: dict[str, str]) -> str:
        item = self.decisions.followup_done(user, number, int(form["followup"]))
        return f"Follow-up #{item.id} of INC-{number} is done: {item.title}"


def _step_flash(run: StepRun, done: str) -> str:
    """`INC-7 cordon: approved; it starts now`: what was done, and the state only when it
    says more (never "approved (approved)")."""
    ref = f"INC-{run.incident_number} {run.step_id}"
    if run.state == "awaiting_approval":
        return f"{ref}: your approval is recorded; it waits for one more person to approve"
    state = run.state.replace("_", " ")
    then = {
        "approved": "it starts now",
        "running": "it is running",
        "succeeded": "it is done",
        "failed": "it failed",
    }.get(run.state, f"it is {state}")
    if run.state != "approved" and (state == done or run.state == "succeeded"):
        return f"{ref}: {done}"
    return f"{ref}: {done}; {then}"


def placed(flash: Flash | None, card: CardView) -> Flash | None:
    """The flash in a block the page shows: the one its form named when it is there (a
    step that ran may have left #running), else #decision, else the status line."""
    if flash is None:
        return None
    shown = {"followups", "status-line"}
    if card.active:
        shown |= {"decision", "incident-actions"}
    if card.running_step is not None:
        shown.add("running")
    if card.history:
        shown.add("history")
    if card.folded:
        shown.add("folded")
    if flash.at in shown:
        return flash
    return Flash(flash.text, flash.ok, "decision" if card.active else "status-line")


def _count(form: dict[str, str]) -> int | None:
    """The node count an Approve button of a step over many nodes carries."""
    raw = form.get("count", "").strip()
    if not raw:
        return None
    if not (raw.isascii() and raw.isdigit() and len(raw) <= 6):
        raise RequestRejected(f"the count must be a number of nodes, not {raw[:20]!r}")
    return int(raw)

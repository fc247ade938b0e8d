"""Slack's inbound side: buttons, the Resolve and Done dialogs, and `/incident`.

A slack-bolt `App`. Bolt verifies every HTTP request's signature and its 300 s window;
`refuse_replays` refuses a signature seen before, so a captured request cannot be played
again inside the window. Socket Mode requests arrive over an authenticated WebSocket.

Each handler commits its decision, then acknowledges (`process_before_response`), well
inside Slack's 3 s: a click is acknowledged only once what it decided is stored (DESIGN
invariant 1). What follows (running the step, updating the card, posting to the thread)
is the worker's and the sender's work, woken after the commit. Buttons carry only a
step-run id or an incident number; everything else is read from the database again.

Who may click: anyone with a role (`people.Roles`): responder, second_line or admin. A
click without one gets an ephemeral "you need the responder role" and is written to the
incident's log. Decisions run as the person who clicked (`slack:U0123ABC`), and the log
names them. A second click on a decided step says who decided it and when.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from datetime import date, datetime, timedelta
from functools import partial
from typing import Any, cast

from slack_bolt import Ack, App, BoltRequest, BoltResponse
from slack_bolt.adapter.starlette.handler import to_bolt_request, to_starlette_response
from sqlalchemy import Table, delete
from sqlalchemy.orm import Session
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from bot import inputs
from bot.chat import cards, decisions, outbox
from bot.chat.decisions import Clicker
from bot.chat.models import ChatCard, SlackRequest
from bot.chat.slack import blocks, ids
from bot.chat.slack.client import SlackApi
from bot.chat.slack.people import PREFIX, Roles, person
from bot.chat.views import CardView, StepView
from bot.clock import Clock
from bot.config import Settings
from bot.db import Database, insert_new
from bot.durations import format_duration, parse_duration
from bot.errors import BotError, PayloadInvalid
from bot.escalation import oncall
from bot.incidents import service as incidents
from bot.incidents.models import ACTIVE_STATUSES
from bot.postmortem import followups
from bot.postmortem import service as postmortems
from bot.postmortem.models import TYPES, Followup
from bot.postmortem.render import Lang
from bot.runbooks.models import StepRun

logger = logging.getLogger(__name__)

MAX_BODY_BYTES = 1024 * 1024
"""Slack's requests are a few KiB (a dialog's submission, the largest, tens): one past
this is refused with 413 before more of it is read, and before its signature is checked,
which needs the whole body."""
TOO_LARGE = "Slack's requests are far smaller; this one is not from Slack"
REPLAY_WINDOW_S = 600
"""Signatures are kept this long: twice Slack's 300 s window, so none is forgotten early."""
USAGE = (
    "`/incident list` open incidents · `/incident show INC-7` · `/incident ack INC-7` · "
    "`/incident owner INC-7 @user` · `/incident resolve INC-7 what was done` · "
    "`/incident silence INC-7 2h` · `/incident oncall` who is on call · "
    "`/incident oncall @user [12h]` take the pager · "
    "`/incident postmortem INC-7 [zh|en]` the 5-Why draft · "
    "`/incident followup INC-7 what will change @owner 2026-12-31 [mitigate|prevent|process]` "
    "· `/incident followups INC-7` · `/incident followup-done #12`"
)
REF = re.compile(r"^(?:INC-)?([0-9]{1,9})$", re.IGNORECASE)  # ASCII: \d takes any script
MENTION = re.compile(r"^<@([A-Z0-9]+)(?:\|[^>]*)?>$")
DATE_LIKE = re.compile(r"^\d{1,4}[-/.]\d{1,2}(?:[-/.]\d{1,4})?$")
QUOTED = re.compile(r"[\"“”„«»](.+?)[\"“”„«»]")
FOLLOWUP_EXAMPLE = "/incident followup INC-7 ECC growth alert @owner 2026-12-31 prevent"
REPROPOSE = re.compile(r"^step\.repropose(?:\.[23])?$")
"""The card's Propose again buttons (one block, so each has its own action id)."""


class SlackApp:
    def __init__(
        self,
        settings: Settings,
        db: Database,
        clock: Clock,
        api: SlackApi,
        wake: Callable[[], None] | None = None,
        wake_chat: Callable[[], None] | None = None,
    ) -> None:
        self.settings = settings
        self.db = db
        self.clock = clock
        self.api = api
        self.roles = Roles(settings, api)
        self.mentions = self.roles.directory.slack_id
        self._wakes = [w for w in (wake, wake_chat) if w is not None]
        self.decisions = decisions.Decisions(settings, db, clock, self.wake)
        self.app = App(
            signing_secret=settings.slack_secret("signing_secret") or "",
            client=api.web,
            process_before_response=True,
            token_verification_enabled=False,
            raise_error_for_unhandled_request=False,
        )
        self.app.middleware(self._refuse_replays)
        self.app.middleware(ids.refuse_bad_ids)
        self.app.action("step.approve")(self._step_button("approve"))
        self.app.action("step.skip")(self._step_button("skip"))
        self.app.action("step.skip_why")(self._skip_why_button)
        self.app.action("step.done")(self._done_button)
        self.app.action("step.stop")(self._step_button("stop"))
        self.app.action(REPROPOSE)(self._repropose_button)
        self.app.action("incident.page_second")(self._page_second_button)
        self.app.action("incident.ack")(
            self._incident_button("acknowledge", self.decisions.acknowledge)
        )
        self.app.action("incident.own")(
            self._incident_button("take ownership of", self.decisions.own)
        )
        self.app.action("incident.resolve")(self._resolve_button)
        self.app.view("incident.resolve")(self._resolve_submitted)
        self.app.view("step.done")(self._step_submitted("done"))
        self.app.view("step.skip")(self._step_submitted("skip"))
        self.app.command("/incident")(self._command)

    def wake(self) -> None:
        """After a decision: the worker may have a step to run, chat a card to update."""
        for wake in self._wakes:
            wake()

    async def handle_http(self, request: Request) -> Response:
        """`POST /slack/events`: Bolt's dispatch, off the event loop (it commits to the
        database before it answers)."""
        body = await inputs.read_body(
            request.headers, request.stream(), MAX_BODY_BYTES, hint=TOO_LARGE
        )
        bolt = to_bolt_request(request, body)
        answer = await run_in_threadpool(self.app.dispatch, bolt)
        return to_starlette_response(answer)

    # --- requests ----------------------------------------------------------------------

    def _refuse_replays(
        self, req: BoltRequest, resp: BoltResponse, next: Callable[[], BoltResponse]
    ) -> BoltResponse:
        if req.mode != "http":
            return next()
        signature = (req.headers.get("x-slack-signature") or [""])[0][:80]
        with self.db.transaction() as session:
            now = self.clock.now()
            if not _remember(session, signature, now):
                logger.warning("refused a replayed Slack request (signature seen before)")
                return BoltResponse(status=401, body="replayed request")
            cutoff = now.timestamp() - REPLAY_WINDOW_S
            session.execute(
                delete(SlackRequest).where(
                    SlackRequest.received_at < datetime.fromtimestamp(cutoff, now.tzinfo)
                )
            )
        return next()

    # --- buttons -----------------------------------------------------------------------

    def _step_button(self, decision: decisions.StepDecision) -> Callable[..., None]:
        def handle(ack: Ack, body: dict[str, Any]) -> None:
            user = _user(body)
            run = self._run(body)
            if run is None or not self._allowed(user, run.incident_number, body, "decide on"):
                ack()
                return
            who = self._clicker(user)
            self._decide(
                body,
                run.incident_number,
                lambda: self.decisions.step(who, run, decision),
                hint=partial(self._second_hint, who, run) if decision == "approve" else None,
            )
            ack()

        return handle

    def _second_hint(self, who: Clicker, run: StepRun) -> str:
        """What a first approver pressing Approve again is told to do instead, after the
        engine's refusal (which says when and through which channel they approved: one
        person counts once): the step waits for someone else, whom the card's Page the
        second line now button reaches. Empty when they have not approved it."""
        view, step = self._step_view(run)
        if step is None or not step.approved_by(who.id):
            return ""
        second = view.second_line
        whom = f" ({', '.join(second.names)})" if second is not None and second.names else ""
        return (
            f" Press Page the second line now on the card to reach the second line{whom}, "
            "or ask another responder to approve."
        )

    def _repropose_button(self, ack: Ack, body: dict[str, Any]) -> None:
        """Propose again a step that was skipped, failed, timed out, expired or was
        cancelled: a new attempt, whose approvals start again."""
        user = _user(body)
        run = self._run(body)
        if run is not None and self._allowed(
            user, run.incident_number, body, "propose steps again on"
        ):
            who = self._clicker(user)
            self._decide(
                body, run.incident_number, lambda: self.decisions.repropose(who, run, None)
            )
        ack()

    def _page_second_button(self, ack: Ack, body: dict[str, Any]) -> None:
        """Page the second line now (a first approver waits for a second person); the
        clicker is told whom it reached."""
        user, number = _user(body), _number(body)
        if number is not None and self._allowed(user, number, body, "page the second line for"):
            who = self._clicker(user)
            try:
                paged = self.decisions.page_second(who, number)
            except BotError as exc:
                self._ephemeral(body, str(exc))
            else:
                names = ", ".join(paged.names) or "nobody on that level"
                at = f" at {paged.paged_at:%H:%M:%S} UTC" if paged.paged_at else ""
                self._ephemeral(
                    body,
                    f"Paged the second line of INC-{number}{at}: {names}. The card shows "
                    "when they approve.",
                )
                self.wake()
        ack()

    def _skip_why_button(self, ack: Ack, body: dict[str, Any]) -> None:
        """Skip of a step others depend on: a dialog says what it also skips and asks why."""
        user = _user(body)
        run = self._run(body)
        if run is not None and self._allowed(user, run.incident_number, body, "decide on"):
            _, step = self._step_view(run)
            title = step.title if step is not None else run.step_id
            also = step.dependent_titles if step is not None else ()
            self._open(body, blocks.skip_modal(run.id, title, also))
        ack()

    def _done_button(self, ack: Ack, body: dict[str, Any]) -> None:
        user = _user(body)
        run = self._run(body)
        if run is not None and self._allowed(user, run.incident_number, body, "decide on"):
            self._open(body, blocks.done_modal(run.id, run.step_id, run.summary))
        ack()

    def _incident_button(
        self, what: str, change: Callable[[Clicker, int], object]
    ) -> Callable[..., None]:
        """A button that changes the incident it names (its value is the number)."""

        def handle(ack: Ack, body: dict[str, Any]) -> None:
            user, number = _user(body), _number(body)
            if number is not None and self._allowed(user, number, body, what):
                who = self._clicker(user)
                self._decide(body, number, lambda: change(who, number))
            ack()

        return handle

    def _resolve_button(self, ack: Ack, body: dict[str, Any]) -> None:
        user, number = _user(body), _number(body)
        if number is not None and self._allowed(user, number, body, "resolve"):
            with self.db.session() as session:
                view = cards.card(session, number, self.clock.now())
            self._open(body, blocks.resolve_modal(view))
        ack()

    # --- dialogs -----------------------------------------------------------------------

    def _resolve_submitted(self, ack: Ack, body: dict[str, Any], view: dict[str, Any]) -> None:
        user = _user(body)
        number = inputs.parse_id(view.get("private_metadata"), "the incident number")
        disposition = _input(view, "disposition")
        who = self._clicker(user)
        if not who.roles:
            ack(response_action="errors", errors={"disposition": decisions.no_role("resolve")})
            return
        try:
            self.decisions.resolve(who, number, disposition)
        except BotError as exc:
            ack(response_action="errors", errors={"disposition": str(exc)[:150]})
            return
        ack()

    def _step_submitted(self, decision: decisions.StepDecision) -> Callable[..., None]:
        """The Done and Skip dialogs: the note is required; a refusal shows under it."""

        def handle(ack: Ack, body: dict[str, Any], view: dict[str, Any]) -> None:
            user = _user(body)
            note = _input(view, "note")
            with self.db.session() as session:
                run_id = inputs.parse_id(view.get("private_metadata"), "the step")
                run = session.get(StepRun, run_id)
            who = self._clicker(user)
            if run is None or not who.roles:
                ack(response_action="errors", errors={"note": decisions.no_role("decide on")})
                return
            try:
                self.decisions.step(who, run, decision, note=note)
            except BotError as exc:
                ack(response_action="errors", errors={"note": str(exc)[:150]})
                return
            ack()

        return handle

    # --- /incident ---------------------------------------------------------------------

    def _command(self, ack: Ack, command: dict[str, Any]) -> None:
        words = str(command.get("text", "")).split()
        verb, args = (words[0].lower(), words[1:]) if words else ("help", [])
        user = {"id": str(command.get("user_id", "")), "name": str(command.get("user_name", ""))}
        try:
            text, body = self._run_command(verb, args, user)
        except BotError as exc:
            text, body = blocks.ephemeral(str(exc))
        ack(text=text, blocks=body, response_type="ephemeral")

    def _run_command(
        self, verb: str, args: list[str], user: dict[str, str]
    ) -> tuple[str, list[dict[str, Any]]]:
        now = self.clock.now()
        if verb == "list":
            with self.db.session() as session:
                found = incidents.list_incidents(session, status=ACTIVE_STATUSES, limit=50)
                views = [cards.card(session, i.number, now) for i in found]
            return blocks.incident_list(views)
        if verb == "oncall":
            return self._oncall(args, user, now)
        if verb in ("followup", "followups"):
            return self._followup(verb, args, user)
        if verb == "followup-done":
            return self._followup_done(args, user)
        if verb not in ("show", "ack", "resolve", "owner", "silence", "postmortem"):
            return blocks.ephemeral(USAGE)
        if not args or not REF.match(args[0]):
            return blocks.ephemeral(f"which incident? e.g. `/incident {verb} INC-7`\n{USAGE}")
        number = int(REF.match(args[0]).group(1))  # type: ignore[union-attr]
        if verb == "show":
            with self.db.session() as session:
                shown = cards.card(session, number, now, settings=self.settings)
                return blocks.card(shown, self.mentions)
        if verb == "postmortem":
            return self._postmortem(number, args[1:], now)
        who = self._clicker(user)
        refusal = self.decisions.allowed(who, number, verb)
        if refusal is not None:
            return blocks.ephemeral(refusal)
        if verb == "ack":
            self.decisions.acknowledge(who, number)
            return blocks.ephemeral(f"INC-{number} acknowledged")
        if verb == "owner":
            owner = None
            if len(args) > 1:
                mention = MENTION.match(args[1])
                if mention is None:
                    return blocks.ephemeral(
                        "name the owner as a mention: `/incident owner INC-7 @user`"
                    )
                owner = self._person_id(mention.group(1))
            owner = self.decisions.own(who, number, owner)
            return blocks.ephemeral(f"INC-{number} is owned by {owner}", [owner], self.mentions)
        if verb == "silence":
            length = _duration(args[1:], f"/incident silence INC-{number} 2h")
            self.decisions.silence(who, number, length)
            until = now + length
            day = "%H:%M" if until.date() == now.date() else "%a %H:%M"
            return blocks.ephemeral(
                f"INC-{number}: nobody is paged for {format_duration(length)}, until "
                f"{until.strftime(day)} UTC; then its escalation resumes"
            )
        note = " ".join(args[1:]).strip() or None
        self.decisions.resolve(who, number, note)
        return blocks.ephemeral(f"INC-{number} resolved")

    def _postmortem(
        self, number: int, args: list[str], now: datetime
    ) -> tuple[str, list[dict[str, Any]]]:
        """`/incident postmortem INC-7 [zh|en]`: the 5-Why draft, shared as a Markdown file
        in the card's thread (through the outbox, paced like every post)."""
        lang = (args[0].lower() if args else self.settings.postmortem_lang).strip()
        if lang not in ("zh", "en"):
            return blocks.ephemeral(f"which language? `/incident postmortem INC-{number} zh|en`")
        text = postmortems.draft_markdown(
            self.db, number, lang=cast(Lang, lang), settings=self.settings, clock=self.clock
        )
        filename = f"INC-{number}-postmortem.{lang}.md"
        payload = {
            "content": text,
            "filename": filename,
            "title": f"INC-{number} postmortem draft ({lang})",
            "comment": f"Postmortem draft of INC-{number}: fill in the whys and the "
            f"improvements, then `runbook-bot postmortem final INC-{number} --file "
            f"{filename} --lang {lang} --as you`.",
        }
        channel = self.settings.slack_channel or ""
        with self.db.transaction() as session:
            card = session.get(ChatCard, number)
            outbox.enqueue(
                session,
                channel=card.channel if card is not None else channel,
                kind=outbox.FILE,
                payload=payload,
                incident=number,
                now=now,
            )
        self.wake()
        return blocks.ephemeral(
            f"INC-{number}'s postmortem draft ({lang}) is on its way to the card's thread as "
            f"{filename}. Also: `runbook-bot postmortem INC-{number} --lang {lang}` or "
            f"`GET /api/incidents/{number}/postmortem?lang={lang}`."
        )

    def _oncall(
        self, args: list[str], user: dict[str, str], now: datetime
    ) -> tuple[str, list[dict[str, Any]]]:
        """`/incident oncall`: who is on call and who is next; with `@user [12h]`, make
        that user the on-call (anyone with a role may)."""
        if not args:
            with self.db.session() as session:
                return blocks.ephemeral(*on_call(session, self.settings, now), self.mentions)
        mention = MENTION.match(args[0])
        if mention is None:
            return blocks.ephemeral(
                "name the new on-call as a mention: `/incident oncall @user [12h]`"
            )
        if not self.roles.of(user["id"]):
            # No incident's log to write it to: the bot's log keeps the refusal.
            logger.warning(
                "refused /incident oncall from %s (@%s): no role", person(user["id"]), user["name"]
            )
            return blocks.ephemeral(
                "you need the responder role to change who is on call; ask an admin to add "
                "you to the on-call user group"
            )
        who = self._person_id(mention.group(1))
        length = _duration(args[1:], "/incident oncall @user 12h") if args[1:] else None
        actor = self._clicker(user)
        with self.db.transaction() as session:
            override = oncall.take(session, self.settings, who, actor.id, self.clock.now(), length)
        self.wake()
        return blocks.ephemeral(
            f"{who} is on call until {override.ends_at:%Y-%m-%d %H:%M} UTC (set by {actor.id}); "
            "the hand-over summary follows by direct message",
            [who, actor.id],
            self.mentions,
        )

    def _followup_done(
        self, args: list[str], user: dict[str, str]
    ) -> tuple[str, list[dict[str, Any]]]:
        """`/incident followup-done #12`: follow-up 12 is done (a role needed)."""
        wanted = args[0].removeprefix("#") if len(args) == 1 else ""
        if not (wanted.isascii() and wanted.isdigit()) or len(wanted) > 9:
            return blocks.ephemeral(
                "which follow-up? e.g. `/incident followup-done #12` (`/incident followups "
                "INC-7` lists them with their numbers)"
            )
        with self.db.session() as session:
            number = followups.get(session, int(wanted)).incident_number
        who = self._clicker(user)
        refusal = self.decisions.allowed(who, number, "close follow-ups of")
        if refusal is not None:
            return blocks.ephemeral(refusal)
        item = self.decisions.followup_done(who, number, int(wanted))
        return blocks.ephemeral(
            f"Follow-up #{item.id} of INC-{number} is done: {_followup_line(item)}",
            [item.owner],
        )

    def _followup(
        self, verb: str, args: list[str], user: dict[str, str]
    ) -> tuple[str, list[dict[str, Any]]]:
        """`/incident followups INC-7` lists its follow-ups (no role needed);
        `/incident followup INC-7 title @owner 2026-12-31 [type]` adds one (a role needed)."""
        example = f"/incident {verb} INC-7" if verb == "followups" else FOLLOWUP_EXAMPLE
        if not args or not REF.match(args[0]):
            return blocks.ephemeral(f"which incident? e.g. `{example}`")
        number = int(REF.match(args[0]).group(1))  # type: ignore[union-attr]
        if verb == "followups":
            with self.db.session() as session:
                items = followups.of_incident(session, number)
                lines = [_followup_line(item) for item in items]
            if not lines:
                return blocks.ephemeral(
                    f"INC-{number} has no follow-ups; add one: `{FOLLOWUP_EXAMPLE}`"
                )
            owners = [item.owner for item in items]
            return blocks.ephemeral(
                f"Follow-ups of INC-{number}:\n" + "\n".join(lines), owners, self.mentions
            )
        who = self._clicker(user)
        refusal = self.decisions.allowed(who, number, "add follow-ups to")
        if refusal is not None:
            return blocks.ephemeral(refusal)
        title, owner, deadline, kind = _followup_words(args[1:])
        if owner is not None:
            owner = self._person_id(owner.removeprefix(PREFIX))
        item = self.decisions.add_followup(
            who, number, title, kind=kind, owner=owner, deadline=deadline
        )
        text = f"Follow-up #{item.id} added to INC-{number}: {_followup_line(item)}"
        if owner is None or deadline is None:
            text += (
                "\nIt needs an owner and a deadline before the postmortem can be final: "
                f"`runbook-bot followup set {item.id} --owner slack:U0123ABC --deadline "
                "2026-12-31`"
            )
        return blocks.ephemeral(text, [item.owner], self.mentions)

    # --- helpers -----------------------------------------------------------------------

    def _person_id(self, user_id: str) -> str:
        """The person id of a Slack user named in a mention (`<@U0123ABC>`)."""
        return self.roles.directory.slack_user(user_id, user_id).id

    def _clicker(self, user: dict[str, str]) -> Clicker:
        """The Slack user as the shared decisions know them: the person they are, with
        the roles the settings and their user groups give them."""
        found = self.roles.person(user["id"], f"@{user['name']}")
        return Clicker(found, "slack", person(user["id"]))

    def _allowed(self, user: dict[str, str], number: int, body: dict[str, Any], what: str) -> bool:
        refusal = self.decisions.allowed(self._clicker(user), number, what)
        if refusal is None:
            return True
        self._ephemeral(body, refusal)
        return False

    def _decide(
        self,
        body: dict[str, Any],
        number: int,
        call: Callable[[], object],
        hint: Callable[[], str] | None = None,
    ) -> None:
        """Make the decision; a refusal goes to the clicker alone, followed by what `hint`
        says to do instead (asked only on a refusal: it reads the card again)."""
        try:
            call()
        except BotError as exc:
            self._ephemeral(body, f"{exc}{hint() if hint is not None else ''}")
            return
        self.wake()

    def _step_view(self, run: StepRun) -> tuple[CardView, StepView | None]:
        """The card as it stands and the step `run` is the newest attempt of (None when a
        newer attempt replaced it)."""
        with self.db.session() as session:
            view = cards.card(
                session, run.incident_number, self.clock.now(), settings=self.settings
            )
        return view, next((step for step in view.steps if step.run_id == run.id), None)

    def _run(self, body: dict[str, Any]) -> StepRun | None:
        value = _value(body)
        with self.db.session() as session:
            run = session.get(StepRun, value) if value is not None else None
        if run is None:
            self._ephemeral(body, "that step no longer exists; refresh the incident card")
        return run

    def _ephemeral(self, body: dict[str, Any], text: str) -> None:
        """Tell only the clicker (through the outbox, like every message)."""
        channel = str((body.get("channel") or {}).get("id") or self.settings.slack_channel)
        plain, rendered = blocks.ephemeral(text)
        payload = {"text": plain, "blocks": rendered, "user": _user(body)["id"]}
        with self.db.transaction() as session:
            outbox.enqueue(
                session,
                channel=channel,
                kind=outbox.EPHEMERAL,
                payload=payload,
                now=self.clock.now(),
            )
        self.wake()

    def _open(self, body: dict[str, Any], view: dict[str, Any]) -> None:
        """Open a dialog now: its trigger expires in 3 s, so it cannot wait in the outbox."""
        try:
            self.api.open_view(str(body.get("trigger_id", "")), view)
        except BotError as exc:
            self._ephemeral(body, f"could not open the dialog ({exc}); try `/incident` instead")


def _remember(session: Session, signature: str, now: datetime) -> bool:
    """Store the signature; False when it was already there (a replay)."""
    values = {"signature": signature, "received_at": now}
    table = cast(Table, SlackRequest.__table__)
    return insert_new(session, table, values, index_elements=["signature"])


def _user(body: dict[str, Any]) -> dict[str, str]:
    user = body.get("user") or {}
    return {
        "id": str(user.get("id", "")),
        "name": str(user.get("username") or user.get("name") or user.get("id", "")),
    }


def _value(body: dict[str, Any]) -> int | None:
    actions = body.get("actions") or [{}]
    try:
        return inputs.parse_id(actions[0].get("value", ""), "the button's value")
    except PayloadInvalid:
        return None


def _number(body: dict[str, Any]) -> int | None:
    return _value(body)


def _input(view: dict[str, Any], block: str) -> str:
    values = (view.get("state") or {}).get("values") or {}
    return str(((values.get(block) or {}).get("text") or {}).get("value") or "").strip()


def on_call(session: Session, settings: Settings, now: datetime) -> tuple[str, list[str | None]]:
    """Who is on call now (and from where, until when), and who comes after; and those
    people, whose ids the answer mentions."""
    now_on = oncall.current(session, settings, now)
    if now_on.person is None:
        text = "Nobody is on call (no rotation, no override): pages go to the responders."
    else:
        text = f"On call now: {now_on.person} ({now_on.source}"
        text += f", until {now_on.until:%a %Y-%m-%d %H:%M} UTC)" if now_on.until else ")"
    after = oncall.following(session, settings, now)
    if after is not None and after.person is not None:
        text += f"\nNext: {after.person} ({after.source}"
        text += f", until {after.until:%a %Y-%m-%d %H:%M} UTC)" if after.until else ")"
    return text, [now_on.person, after.person if after is not None else None]


def _duration(args: list[str], example: str) -> timedelta:
    """The duration in `args` (one word, like `2h`); BotError says the form if it is not."""
    if len(args) != 1:
        raise BotError(f"how long? e.g. `{example}`")
    try:
        return parse_duration(args[0])
    except ValueError as exc:
        raise BotError(f"{exc}; e.g. `{example}`") from None


def _followup_words(words: list[str]) -> tuple[str, str | None, date | None, str]:
    """A follow-up's title, owner (a mention), deadline (2026-12-31) and type (the last
    word, when it is one of the types) from the words after the incident; a quoted title
    is taken as it is. BotError names the form when something is off."""
    text = " ".join(words)
    quoted = QUOTED.search(text)
    title_words: list[str] = []
    if quoted:
        title_words = [quoted.group(1)]
        text = text[: quoted.start()] + " " + text[quoted.end() :]
    rest = text.split()
    kind = "prevent"
    if rest and rest[-1].lower() in TYPES:
        kind = rest.pop().lower()
    owner: str | None = None
    deadline: date | None = None
    for word in rest:
        mention = MENTION.match(word)
        if mention:
            if owner is not None:
                raise BotError(f"one owner per follow-up, as a mention: `{FOLLOWUP_EXAMPLE}`")
            owner = person(mention.group(1))
        elif DATE_LIKE.match(word):
            if deadline is not None:
                raise BotError(f"one deadline per follow-up: `{FOLLOWUP_EXAMPLE}`")
            deadline = followups.parse_date(word)
        elif word.startswith("@"):
            raise BotError(
                f"name the owner as a mention (pick them from the list Slack offers), not "
                f"{word}: `{FOLLOWUP_EXAMPLE}`"
            )
        elif not quoted:
            title_words.append(word)
        else:
            raise BotError(
                f"{word!r} is not an owner, a deadline or a type; the title goes in quotes: "
                f"`{FOLLOWUP_EXAMPLE}`"
            )
    title = " ".join(title_words).strip()
    if not title:
        raise BotError(f"what will change? e.g. `{FOLLOWUP_EXAMPLE}`")
    return title, owner, deadline, kind


def _followup_line(item: Followup) -> str:
    owner = item.owner or "no owner"
    by = item.deadline.isoformat() if item.deadline else "no deadline"
    link = f" {item.link}" if item.link else ""
    return f"#{item.id} {item.title} ({item.type}, {item.status}; {owner}, {by}){link}"

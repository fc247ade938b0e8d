"""The console's routes: read the session, check the CSRF token of every POST, call
`pages` or `decisions`, render. Blocking work runs in the thread pool.

Without a login a page redirects (303) to `/login?next=...` and a POST answers 401. A POST
with a missing or wrong CSRF token answers 403. A button answers JSON (`{"ok", "flash"}`)
to the console's JavaScript (`Accept: application/json`), which shows it next to the
control pressed; otherwise a 303 back to the incident page at the block the form named
(`at`: `#decision`, `#incident-actions`, ...) with the answer in a one-time flash cookie,
rendered in that block, so buttons work without it and the answer is where the finger is.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import cast
from urllib.parse import parse_qs, quote

import anyio
from sqlalchemy.orm import Session
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response, StreamingResponse
from starlette.routing import BaseRoute, Route

from bot import inputs
from bot.chat.console import buttons, pages, render, waiting
from bot.chat.console.auth import Auth, LoginThrottled
from bot.chat.console.proxy import ProxyPersonUnknown, TrustedProxy
from bot.chat.console.sessions import COOKIE, FLASH, LOGIN, Flash, Login, Signer
from bot.chat.decisions import Clicker, Decisions
from bot.chat.views import CardView, LogLine
from bot.chat.wording import escalation_line
from bot.clock import Clock
from bot.config import Settings
from bot.db import Database
from bot.errors import BotError, IncidentNotFound, RequestRejected, StorageUnavailable
from bot.escalation import oncall
from bot.postmortem import service as postmortems
from bot.postmortem.models import TYPES
from bot.postmortem.render import Lang

logger = logging.getLogger(__name__)

MAX_FORM_BYTES = 16 * 1024
POLL_S = 0.5
"""How often an event stream looks for new log entries."""
STREAM_S = 60.0
"""An event stream ends after this long (the browser reconnects with Last-Event-ID), so
shutting the server down never waits on one."""
KEEPALIVE_S = 5.0
CSRF_REFUSED = "CSRF token missing or wrong; reload the page and try again"
NO_ROLE_HINT = "to give you a role (console.users.NAME.roles in the settings)"
WRONG_LOGIN = "wrong user name or password"
LOGIN_CSRF_REFUSED = (
    "the login form expired or was not this page's (CSRF check); log in again on this page"
)

Handler = Callable[[Request], Awaitable[Response]]


def console_routes(
    settings: Settings,
    db: Database,
    clock: Clock,
    wake: Callable[[], None] = lambda: None,
    on_login: Callable[[str], None] | None = None,
) -> list[BaseRoute]:
    """The console's routes; `wake` runs after each decision (the worker and chat),
    `on_login` after each login with the user's id (the demo starts its scenario)."""
    return Console(settings, db, clock, wake, on_login).routes()


class Console:
    def __init__(
        self,
        settings: Settings,
        db: Database,
        clock: Clock,
        wake: Callable[[], None],
        on_login: Callable[[str], None] | None = None,
    ) -> None:
        self.settings = settings
        self.on_login = on_login
        self.db = db
        self.clock = clock
        self.auth = Auth(settings)
        self.proxy = TrustedProxy(settings, self.auth.directory)
        console = settings.console
        self.signer = Signer(
            console.secret("session_secret"), console.session_ttl, secure=console.secure_cookies
        )
        self.decisions = Decisions(settings, db, clock, wake, hint=NO_ROLE_HINT)
        self.buttons = buttons.Buttons(db, self.decisions)

    def who(self, person: str) -> str:
        """A person id as the console shows it: their display name."""
        found = self.auth.directory.get(person)
        return found.name if found is not None else person

    def routes(self) -> list[BaseRoute]:
        step = "/incidents/{number}/steps/{run}"
        return [
            Route("/", self.page(self.incident_list), methods=["GET"]),
            Route("/login", self.login_page, methods=["GET"]),
            Route("/login", self.login, methods=["POST"]),
            Route("/logout", self.logout, methods=["POST"]),
            Route("/static/{name}", self.static, methods=["GET"]),
            Route("/incidents/{number}", self.page(self.incident), methods=["GET"]),
            Route("/incidents/{number}/card", self.page(self.card), methods=["GET"]),
            Route("/incidents/{number}/events", self.events, methods=["GET"]),
            Route("/incidents/{number}/postmortem", self.page(self.postmortem), methods=["GET"]),
            Route(
                "/incidents/{number}/postmortem.md",
                self.page(self.postmortem_md),
                methods=["GET"],
            ),
            Route(
                f"{step}/approve", self.button(self.buttons.approve, "decide on"), methods=["POST"]
            ),
            Route(f"{step}/skip", self.button(self.buttons.skip, "decide on"), methods=["POST"]),
            Route(f"{step}/done", self.button(self.buttons.done, "decide on"), methods=["POST"]),
            Route(f"{step}/stop", self.button(self.buttons.stop, "decide on"), methods=["POST"]),
            Route(
                f"{step}/repropose",
                self.button(self.buttons.repropose, "decide on"),
                methods=["POST"],
            ),
            Route(
                "/incidents/{number}/page-second",
                self.button(self.buttons.page_second, "page the second line for"),
                methods=["POST"],
            ),
            Route(
                "/incidents/{number}/ack",
                self.button(self.buttons.acknowledge, "acknowledge", "incident-actions"),
                methods=["POST"],
            ),
            Route(
                "/incidents/{number}/own",
                self.button(self.buttons.own, "take ownership of", "incident-actions"),
                methods=["POST"],
            ),
            Route(
                "/incidents/{number}/resolve",
                self.button(self.buttons.resolve, "resolve", "incident-actions"),
                methods=["POST"],
            ),
            Route(
                "/incidents/{number}/followups",
                self.button(self.buttons.add_followup, "add follow-ups to", "followups"),
                methods=["POST"],
            ),
            Route(
                "/incidents/{number}/followups/{followup}/done",
                self.button(self.buttons.followup_done, "close follow-ups of", "followups"),
                methods=["POST"],
            ),
        ]

    # --- sessions ------------------------------------------------------------------------

    def _session(self, request: Request) -> tuple[Login, Clicker] | None:
        """The login and who it is: the person a trusted proxy names (ProxyPersonUnknown
        when it names nobody known), else the session cookie's."""
        proxied = self.proxy.person(request.headers, _client(request))
        if proxied is not None:
            person, via = proxied
            signed = self.signer.proxied(person.id, self.clock.now())
            return signed, self.auth.signed_in(person, via)
        login = self.signer.read(request.cookies.get(COOKIE), self.clock.now())
        user = self.auth.user(login.user) if login is not None else None
        return (login, user) if login is not None and user is not None else None

    def page(self, handler: Callable[[Request, Login, Clicker], Awaitable[Response]]) -> Handler:
        """A GET page: the login's; without one, a 303 to the login page."""

        async def endpoint(request: Request) -> Response:
            try:
                session = self._session(request)
            except ProxyPersonUnknown as exc:
                return self._error(exc, None)
            if session is None:
                target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
                return RedirectResponse(f"/login?next={quote(target)}", 303)
            try:
                return await handler(request, *session)
            except BotError as exc:
                return self._error(exc, session)

        return endpoint

    def _error(self, exc: BotError, session: tuple[Login, Clicker] | None) -> Response:
        status = 409
        if isinstance(exc, IncidentNotFound):
            status = 404
        elif isinstance(exc, RequestRejected):
            status = exc.status
        elif isinstance(exc, StorageUnavailable):
            status = 503
        login, user = session if session is not None else (None, None)
        return self._html(
            "error.html", login, user, status_code=status, status=status, message=str(exc)
        )

    def _html(
        self,
        name: str,
        login: Login | None,
        user: Clicker | None,
        status_code: int = 200,
        **ctx: object,
    ) -> HTMLResponse:
        csrf = self.signer.csrf(login) if login is not None else ""
        text = render.page(name, user=user, csrf=csrf, **ctx)
        return HTMLResponse(text, status_code=status_code)

    # --- login ---------------------------------------------------------------------------

    async def login_page(self, request: Request) -> Response:
        return self._login_form(request, _local(request.query_params.get("next")))

    def _login_form(
        self,
        request: Request,
        next: str,
        error: str | None = None,
        status: int = 200,
        username: str = "",
    ) -> Response:
        token_login = self.settings.console.secret("admin_token") is not None
        csrf = self.signer.login_token(request.cookies.get(LOGIN))
        text = render.page(
            "login.html",
            user=None,
            csrf=csrf,
            next=next,
            error=error,
            username=username,
            token_login=token_login,
        )
        response = HTMLResponse(text, status_code=status)
        self.signer.set_login_token(response, csrf)
        return response

    async def login(self, request: Request) -> Response:
        try:
            form = await _form(request)
        except RequestRejected as exc:
            return self._login_form(request, "/", str(exc), exc.status)
        next, client = _local(form.get("next")), _client(request)
        if not self.signer.login_token_ok(request.cookies.get(LOGIN), form.get("csrf")):
            logger.warning("console: refused a login form without its CSRF token from %s", client)
            return self._login_form(request, next, LOGIN_CSRF_REFUSED, 403)
        now = self.clock.now()
        username = form.get("username", "")[:64]
        try:
            if "token" in form:
                user = self.auth.token(form["token"], client, now)
            else:
                password = form.get("password", "")
                user = await run_in_threadpool(self.auth.password, username, password, client, now)
        except LoginThrottled as exc:
            logger.warning("console: login throttled for %r from %s", username or "admin", client)
            return self._login_form(request, next, str(exc), 429, username)
        if user is None:
            logger.info("console: failed login for %r from %s", username or "admin", client)
            return self._login_form(request, next, WRONG_LOGIN, 401, username)
        value, _ = self.signer.issue(user.id, now)
        response = RedirectResponse(next, 303)
        self.signer.set_session(response, value)
        logger.info("console: %s logged in from %s", user.id, client)
        if self.on_login is not None:
            self.on_login(user.id)
        return response

    async def logout(self, request: Request) -> Response:
        session = self._session(request)
        if session is None:
            return RedirectResponse("/login", 303)
        try:
            form = await _form(request)
        except RequestRejected as exc:
            return Response(str(exc), exc.status, media_type="text/plain")
        if not self.signer.csrf_ok(session[0], form.get("csrf")):
            return Response(CSRF_REFUSED, 403, media_type="text/plain")
        response = RedirectResponse("/login", 303)
        self.signer.clear_session(response)
        return response

    async def static(self, request: Request) -> Response:
        name = request.path_params["name"]
        data = render.static(name)
        if data is None:
            return Response("no such file", 404, media_type="text/plain")
        response = Response(data, media_type=render.STATIC[name])
        response.headers["Cache-Control"] = "public, max-age=300"
        return response

    # --- pages ---------------------------------------------------------------------------

    async def incident_list(self, request: Request, login: Login, user: Clicker) -> Response:
        params = request.query_params
        filters = pages.Filters.parse(params.get("status"), params.get("severity"))

        def read() -> pages.ListPage:
            with self.db.session() as session:
                return pages.incident_list(session, filters, user)

        found = await run_in_threadpool(read)
        return self._html(
            "list.html",
            login,
            user,
            filters=filters,
            statuses=pages.STATUSES,
            severities=pages.SEVERITIES,
            incidents=found.incidents,
            waiting=found.waiting,
            nothing=waiting.NOTHING,
            paged=found.paged,
            messages=found.messages,
            now=self.clock.now(),
        )

    async def incident(self, request: Request, login: Login, user: Clicker) -> Response:
        number = _number(request)
        whole = request.query_params.get("log") == "all"

        def read() -> tuple[pages.IncidentPage, str]:
            with self.db.session() as session:
                now = self.clock.now()
                page = pages.incident(session, number, user.id, now, self.settings, whole_log=whole)
                return page, self._viewer_note(session, user, page.card)

        page, note = await run_in_threadpool(read)
        flash = self.signer.read_flash(request.cookies.get(FLASH))
        response = self._html(
            "incident.html",
            login,
            user,
            page=page,
            card=page.card,
            escalation=escalation_line(page.card),
            flash=buttons.placed(flash, page.card),
            viewer_note=note,
            who=self.who,
            types=TYPES,
        )
        if flash is not None:
            response.delete_cookie(FLASH, path="/")
        return response

    async def card(self, request: Request, login: Login, user: Clicker) -> Response:
        number = _number(request)

        def read() -> tuple[CardView, str]:
            with self.db.session() as session:
                card = pages.card(session, number, self.clock.now(), self.settings)
                return card, self._viewer_note(session, user, card)

        card, note = await run_in_threadpool(read)
        return self._html(
            "card.html",
            login,
            user,
            card=card,
            escalation=escalation_line(card),
            flash=None,
            viewer_note=note,
            who=self.who,
        )

    def _viewer_note(self, session: Session, user: Clicker, card: CardView) -> str:
        """What a person without a role reads instead of buttons: they may look, and
        whom to ask (the owner, else whoever is on call)."""
        if user.roles:
            return ""
        ask = self.who(card.owner) + " (the owner)" if card.owner else None
        if ask is None:
            person = oncall.current(session, self.settings, card.now).person
            ask = f"{self.who(person)} (on call)" if person else "a responder"
        return (
            f"You can look at {card.ref} but not decide: your login has no role. "
            f"Ask {ask} to decide, or an admin to give you a role "
            f"(console.users.{user.id}.roles in the settings)."
        )

    async def postmortem(self, request: Request, login: Login, user: Clicker) -> Response:
        number, lang = _number(request), self._lang(request)
        text = await self._draft(number, lang)
        return self._html(
            "postmortem.html", login, user, number=number, lang=lang, html=render.markdown(text)
        )

    async def postmortem_md(self, request: Request, login: Login, user: Clicker) -> Response:
        number, lang = _number(request), self._lang(request)
        text = await self._draft(number, lang)
        filename = f"INC-{number}-postmortem.{lang}.md"
        return Response(
            text,
            media_type="text/markdown; charset=utf-8",
            headers={"Content-Disposition": f'attachment; filename="{filename}"'},
        )

    def _lang(self, request: Request) -> Lang:
        lang = request.query_params.get("lang") or self.settings.postmortem_lang
        if lang not in ("zh", "en"):
            raise RequestRejected(f"lang must be zh or en, not {lang!r}")
        return cast(Lang, lang)

    async def _draft(self, number: int, lang: Lang) -> str:
        def draft() -> str:
            return postmortems.draft_markdown(
                self.db, number, lang=lang, settings=self.settings, clock=self.clock
            )

        return await run_in_threadpool(draft)

    async def events(self, request: Request) -> Response:
        """The incident's log as server-sent events, `id:` its sequence number, from after
        `Last-Event-ID` (or `?after=`)."""
        try:
            if self._session(request) is None:
                return Response("log in first: open /login", 401, media_type="text/plain")
        except ProxyPersonUnknown as exc:
            return Response(str(exc), exc.status, media_type="text/plain")
        raw = request.headers.get("last-event-id") or request.query_params.get("after") or "0"
        try:
            number = _number(request)
            seq = inputs.parse_id(raw, "Last-Event-ID (or ?after=), a log entry's number", low=0)
        except RequestRejected as exc:
            return Response(str(exc), exc.status, media_type="text/plain")
        after = min(seq, pages.LAST_SEQ)

        def read(seq: int) -> list[LogLine]:
            with self.db.session() as session:
                return pages.log_after(session, number, seq)

        try:
            first = await run_in_threadpool(read, after)
        except BotError as exc:
            return self._error(exc, None)

        async def stream() -> AsyncIterator[str]:
            last, lines = after, first
            yield "retry: 1000\n\n"
            started = quiet = anyio.current_time()
            while anyio.current_time() - started < STREAM_S:
                for line in lines:
                    data = {
                        "seq": line.seq,
                        "at": line.at.isoformat(),
                        "time": render.clock_time(line.at),
                        "actor": line.actor,
                        "type": line.type,
                        "summary": line.summary,
                    }
                    yield f"id: {line.seq}\nevent: log\ndata: {json.dumps(data)}\n\n"
                    last = line.seq
                if lines:
                    quiet = anyio.current_time()
                elif anyio.current_time() - quiet >= KEEPALIVE_S:
                    yield ": keepalive\n\n"  # a closed connection shows on a write
                    quiet = anyio.current_time()
                await anyio.sleep(POLL_S)
                try:
                    lines = await run_in_threadpool(read, last)
                except BotError as exc:
                    logger.warning("console: INC-%s event stream: %s", number, exc)
                    return

        response = StreamingResponse(stream(), media_type="text/event-stream")
        response.headers["Cache-Control"] = "no-store"
        response.headers["X-Accel-Buffering"] = "no"
        return response

    # --- buttons -------------------------------------------------------------------------

    def button(self, decide: buttons.Decision, what: str, at: str = "decision") -> Handler:
        """A POST that decides: login (401), CSRF (403), role (refused and logged), then
        `decide`, which answers the flash text; `at` is the block its answer goes to
        without JavaScript (a form may name another of ANCHORS)."""

        async def endpoint(request: Request) -> Response:
            try:
                session = self._session(request)
            except ProxyPersonUnknown as exc:
                return Response(str(exc), exc.status, media_type="text/plain")
            if session is None:
                return Response("log in first: open /login", 401, media_type="text/plain")
            login, user = session
            try:
                form = await _form(request)
            except RequestRejected as exc:
                return Response(str(exc), exc.status, media_type="text/plain")
            token = request.headers.get("x-csrf-token") or form.get("csrf")
            if not self.signer.csrf_ok(login, token):
                logger.warning("console: %s %s refused: CSRF token", user.id, request.url.path)
                return Response(CSRF_REFUSED, 403, media_type="text/plain")
            try:
                ids = {key: _path_id(request, key) for key in request.path_params}
            except RequestRejected as exc:
                return Response(str(exc), exc.status, media_type="text/plain")
            number = ids["number"]
            form.update({key: str(value) for key, value in ids.items()})
            asked: list[buttons.Unconfirmed] = []

            def run() -> tuple[int, str]:
                refusal = self.decisions.allowed(user, number, what)
                if refusal is not None:
                    return 403, refusal
                try:
                    return 200, decide(user, number, form)
                except buttons.Unconfirmed as exc:
                    asked.append(exc)
                    return 428, str(exc)
                except IncidentNotFound as exc:
                    return 404, str(exc)
                except BotError as exc:
                    return 409, str(exc)

            try:
                status, flash = await run_in_threadpool(run)
            except BotError as exc:  # the refusal's log entry could not be written
                status, flash = 503, str(exc)
            if asked and "application/json" not in request.headers.get("accept", ""):
                return self._confirm_page(request, login, user, asked[0])
            named = form.get("at", "")
            place = named if named in buttons.ANCHORS else at
            return self._answer(request, number, status, Flash(flash, status == 200, place))

        return endpoint

    def _answer(self, request: Request, number: int, status: int, flash: Flash) -> Response:
        if "application/json" in request.headers.get("accept", ""):
            body = json.dumps({"ok": flash.ok, "flash": flash.text})
            return Response(body, status, media_type="application/json")
        response = RedirectResponse(f"/incidents/{number}#{flash.at}", 303)
        self.signer.set_flash(response, flash)
        return response

    def _confirm_page(
        self, request: Request, login: Login, user: Clicker, asked: buttons.Unconfirmed
    ) -> Response:
        """Without JavaScript, a disruptive approval asks on a page of its own, naming the
        exact targets (the dialog's job with it)."""
        return self._html(
            "confirm.html",
            login,
            user,
            status_code=428,
            number=asked.run.incident_number,
            run=asked.run.id,
            step=asked.run.step_id,
            action=asked.run.action,
            targets=asked.targets,
            path=request.url.path,
        )


async def _form(request: Request) -> dict[str, str]:
    """An url-encoded form (the last value of each field), at most MAX_FORM_BYTES."""
    hint = "the console's forms are far smaller; reload the page and try again"
    body = await inputs.read_body(request.headers, request.stream(), MAX_FORM_BYTES, hint=hint)
    try:
        fields = parse_qs(body.decode(), keep_blank_values=True, max_num_fields=50)
    except (UnicodeDecodeError, ValueError) as exc:
        raise RequestRejected(f"the form cannot be read ({exc}); reload the page") from None
    return {key: values[-1] for key, values in fields.items()}


PATH_IDS = {"number": "the incident number", "run": "the step run", "followup": "the follow-up"}


def _path_id(request: Request, key: str) -> int:
    """A number the path carries, within the integer column; 400 naming it otherwise."""
    return inputs.parse_id(request.path_params[key], PATH_IDS[key])


def _number(request: Request) -> int:
    return _path_id(request, "number")


def _local(target: str | None) -> str:
    """`target` when it is a path on this site; else `/` (no open redirects)."""
    if not target or not target.startswith("/") or target.startswith("//") or "\\" in target:
        return "/"
    return target


def _client(request: Request) -> str:
    return request.client.host if request.client is not None else "unknown"

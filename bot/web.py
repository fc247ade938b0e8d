"""The ASGI app: routes only. Each handler calls a room's service and shapes the answer.

Blocking database work runs in the thread pool. `BotError`s map to statuses in one place
(`_error`): bad input 4xx (Alertmanager does not retry), storage down 503 (it does).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from functools import partial
from typing import Any, cast

import anyio
import anyio.to_thread
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from bot import escalation, inputs, migrations, openapi, people
from bot.alerts import ingest, splitting, webhook
from bot.api import models, splits
from bot.api import requests as api_requests
from bot.chat.console import SecurityHeaders, console_routes
from bot.chat.decisions import pager_of
from bot.chat.slack.app import SlackApp
from bot.clock import Clock
from bot.config import Settings
from bot.db import Database
from bot.errors import (
    ApprovalRefused,
    BotError,
    IncidentNotFound,
    MigrationsPending,
    PayloadInvalid,
    RequestRejected,
    StepNotFound,
    StorageUnavailable,
)
from bot.incidents import filters, log, service, views
from bot.metrics import Metrics, RequestMetrics, timer
from bot.people import tokens
from bot.postmortem import service as postmortems
from bot.postmortem.render import Lang
from bot.runbooks import service as runbooks
from bot.runbooks.catalog import Catalog
from bot.runbooks.models import StepRun
from bot.topology import Topology

logger = logging.getLogger(__name__)

INGEST_THREADS = 4
MAX_DECISION_BYTES = api_requests.MAX_BODY_BYTES


def build_app(
    settings: Settings,
    db: Database,
    clock: Clock,
    *,
    catalog: Catalog | None = None,
    wake: Callable[[], None] | None = None,
    wake_chat: Callable[[], None] | None = None,
    slack: SlackApp | None = None,
    on_console_login: Callable[[str], None] | None = None,
    topology: Callable[[], Topology] | None = None,
) -> Starlette:
    """The app. With `catalog`, opening incidents get their runbook; `wake` tells the
    worker that a step may be ready to run, `wake_chat` the chat sender that an incident's
    log grew. With `slack`, Slack's requests arrive at `/slack/events`. With the console
    on (`console.enabled`), its pages are served at `/`; `on_console_login` is told who
    logs in to it. `topology` answers the failure domains now (a `NodeCache`'s
    `current`; None: every node is its own domain), for ingest to correlate by."""

    def open_counts() -> dict[str, int]:
        with db.session() as session:
            return service.active_counts(session)

    def escalation_health() -> escalation.Health:
        with db.session() as session:
            return escalation.health.status(session, clock.now())

    def escalation_figures() -> tuple[float, float | None, dict[str, int]]:
        figures = escalation_health()
        return figures.timers_late, figures.heartbeat_age, figures.pages

    def history() -> tuple[
        dict[str, int], dict[str, float], dict[str, float], dict[tuple[str, str], int]
    ]:
        with db.session() as session:
            now = clock.now()
            recent = service.recent(session, now)
            outcomes = runbooks.recent_outcomes(session, now)
        return recent.by_status, recent.mtta, recent.mttr, outcomes

    frozen = escalation.frozen_policy(settings)
    chat_pager = pager_of(settings)  # paging the second line now reaches chat as serve's does
    api_document = openapi.document()
    metrics = Metrics(open_counts, escalation_figures, history)
    slots: list[anyio.CapacityLimiter] = []

    def ingest_slots() -> anyio.CapacityLimiter:
        # Ingest is CPU-bound Python: more threads than this only queue on the GIL and
        # stretch every request's latency. Made on first use, inside the event loop.
        if not slots:
            slots.append(anyio.CapacityLimiter(INGEST_THREADS))
        return slots[0]

    async def alertmanager(request: Request) -> Response:
        webhook.authenticate(request.headers, settings)
        webhook.check_content_type(request.headers)
        body = await inputs.read_body(
            request.headers, request.stream(), settings.max_body_bytes, hint=webhook.TOO_LARGE
        )
        elapsed = timer()
        payload = webhook.parse(body)
        result = await anyio.to_thread.run_sync(
            partial(
                ingest.ingest,
                db,
                payload,
                clock=clock,
                reopen_window=settings.reopen_window,
                catalog=catalog,
                escalation=frozen,
                topology=topology() if topology is not None else None,
                settings=settings,
            ),
            limiter=ingest_slots(),
        )
        if (
            result.runbook is not None or result.opened or result.reopened or result.grown
        ) and wake:
            wake()  # the worker proposes first (or re-planned) steps, pages the first level
        if result.logged and wake_chat is not None:
            wake_chat()  # the card and its thread follow the log
        metrics.ingest_seconds.observe(elapsed())
        for outcome, count in result.counts().items():
            metrics.alerts.labels(outcome).inc(count)
        logger.info(
            "INC-%s: %d new, %d repeated, %d resolved alerts%s",
            result.incident,
            result.new,
            result.repeats,
            result.resolved_alerts,
            " (opened)" if result.opened else " (reopened)" if result.reopened else "",
        )
        return _answer(models.IngestResult.model_validate(result.as_dict()))

    async def list_incidents(request: Request) -> Response:
        params = request.query_params
        limit = _int_param(params.get("limit", "100"), "limit", 1, 1000)

        def read() -> models.IncidentList:
            with db.session() as session:
                rows = service.list_incidents(
                    session,
                    status=_choices(params.getlist("status"), "status", filters.statuses),
                    severity=_choices(params.getlist("severity"), "severity", filters.severities),
                    limit=limit,
                )
                found = [models.Incident.model_validate(views.incident(row)) for row in rows]
                return models.IncidentList(incidents=found)

        return _answer(await run_in_threadpool(read))

    async def show_incident(request: Request) -> Response:
        number = service.parse_ref(request.path_params["number"])

        def read() -> models.IncidentDetail:
            with db.session() as session:
                body = views.incident(service.get(session, number))
                body["alerts"] = [views.alert(a) for a in service.alerts_of(session, number)]
                body["log"] = [views.log_entry(e) for e in log.entries(session, number)]
                return models.IncidentDetail.model_validate(body)

        return _answer(await run_in_threadpool(read))

    async def list_steps(request: Request) -> Response:
        number = service.parse_ref(request.path_params["number"])

        def read() -> models.Steps:
            runbook, rows = runbooks.step_rows(db, number)
            steps = [models.StepRow.model_validate(row.as_dict()) for row in rows]
            return models.Steps(incident=f"INC-{number}", runbook=runbook, steps=steps)

        return _answer(await run_in_threadpool(read))

    directory = people.Directory(settings)

    def token_owner(headers: Any) -> people.Decider:
        token = tokens.bearer(headers)
        with db.session() as session:
            return tokens.authenticate(session, directory=directory, token=token)

    async def decider(request: Request) -> people.Decider:
        """Who decides: the owner of the personal API token the request carries (401
        without a valid one, whatever else is configured: the webhook's credentials
        decide nothing)."""
        return await run_in_threadpool(token_owner, request.headers)

    async def approve_step(request: Request) -> Response:
        who = await decider(request)
        number = service.parse_ref(request.path_params["number"])
        body = _parse(await _decision_bytes(request), api_requests.ApproveRequest, who)
        run = await on_step(
            request,
            runbooks.approve,
            number,
            who,
            params_hash=body.params_hash,
            count=body.count,
            override=body.override,
            acknowledge=body.acknowledge,
        )
        return _answer(
            models.Approved(
                **_step_fields(number, run),
                approvals_required=run.approvals_required,
                params_hash=run.params_hash,
            )
        )

    def decide(
        decision: Callable[..., StepRun],
        *,
        note_required: bool = False,
        acknowledges: bool = True,
    ) -> Callable[[Request], Any]:
        """A POST endpoint for skip, done, stop, repropose or cancel: body {"note": TEXT,
        "acknowledge": BOOL}, as the token's owner (cancelling acknowledges nothing)."""

        async def endpoint(request: Request) -> Response:
            who = await decider(request)
            number = service.parse_ref(request.path_params["number"])
            body = _parse(await _decision_bytes(request), api_requests.NoteRequest, who)
            note = _note(body, required=note_required)
            extra = {"acknowledge": body.acknowledge} if acknowledges else {}
            run = await on_step(request, decision, number, who, note=note, **extra)
            return _answer(models.Decided(**_step_fields(number, run), summary=run.summary))

        return endpoint

    async def page_second(request: Request) -> Response:
        """Page the second level of the incident's escalation now, as the token's owner."""
        who = await decider(request)
        number = service.parse_ref(request.path_params["number"])
        body = _parse(await _decision_bytes(request), api_requests.PageSecondRequest, who)
        _decides(who, "page the second line")
        why = (body.why or "").strip() or "a step waits for a second person's approval"
        actor = log.Actor.deciding(who)

        def page() -> escalation.SecondLine:
            with db.transaction() as session:
                return escalation.page_now(
                    session, settings, number, actor=actor, now=clock.now(), why=why,
                    chat=chat_pager,
                )  # fmt: skip

        paged = await run_in_threadpool(page)
        if wake_chat is not None:
            wake_chat()
        assert paged.paged_at is not None
        return _answer(
            models.SecondLinePaged(
                incident=f"INC-{number}",
                names=list(paged.names),
                level=paged.level,
                paged_at=paged.paged_at.isoformat(),
            )
        )

    async def own_incident(request: Request) -> Response:
        """Take ownership of the incident as the token's owner (acknowledging it)."""
        who = await decider(request)
        number = service.parse_ref(request.path_params["number"])
        body = _parse(await _decision_bytes(request), api_requests.OwnRequest, who)
        _decides(who, "take ownership of incidents")
        actor = log.Actor.deciding(who)

        def own() -> models.Owned:
            with db.transaction() as session:
                incident = escalation.own(
                    session, number, who.id, actor=actor, at=clock.now(),
                    acknowledge=body.acknowledge,
                )  # fmt: skip
                return models.Owned(
                    incident=incident.ref, owner=who.id, status=str(incident.status)
                )

        owned = await run_in_threadpool(own)
        if wake_chat is not None:
            wake_chat()
        return _answer(owned)

    async def on_step(
        request: Request,
        decision: Callable[..., StepRun],
        number: int,
        who: people.Decider,
        **extra: Any,
    ) -> StepRun:
        """Call a `runbooks` decision on the step the path names, in the thread pool, then
        wake the worker: the run may be due now, or the next step may run by itself."""
        step = request.path_params["step"]
        call = partial(decision, db, number, step, who=who, clock=clock, settings=settings, **extra)
        run = await run_in_threadpool(call)
        if wake is not None:
            wake()
        if wake_chat is not None:
            wake_chat()
        return run

    async def split_incident(request: Request) -> Response:
        """Split nodes out of a domain incident, as the token's owner (a role needed)."""
        who = await decider(request)
        number = service.parse_ref(request.path_params["number"])
        body = _parse(await _decision_bytes(request), splits.SplitRequest, who)
        call = partial(
            splitting.split,
            db,
            number,
            body.nodes,
            who=who,
            reason=body.reason,
            clock=clock,
            settings=settings,
        )
        done = await run_in_threadpool(call)
        if wake is not None:
            wake()  # the new incidents' steps are proposed, their pages armed
        if wake_chat is not None:
            wake_chat()  # their cards are posted
        into = {node: f"INC-{n}" for node, n in done.into.items()}
        return _answer(splits.SplitDone(incident=done.incident.ref, into=into))

    async def postmortem(request: Request) -> Response:
        """The 5-Why draft: `?format=md` (default) as Markdown, `?lang=zh|en`."""
        number = service.parse_ref(request.path_params["number"])
        params = request.query_params
        fmt = params.get("format", "md")
        if fmt not in ("md", "markdown"):
            raise RequestRejected("format must be md (Markdown)")
        lang = params.get("lang", settings.postmortem_lang)
        if lang not in ("zh", "en"):
            raise RequestRejected("lang must be zh or en")
        text = await run_in_threadpool(
            partial(
                postmortems.draft_markdown,
                db,
                number,
                lang=cast(Lang, lang),
                settings=settings,
                clock=clock,
            )
        )
        disposition = f'inline; filename="INC-{number}-postmortem.{lang}.md"'
        return Response(
            text,
            media_type="text/markdown; charset=utf-8",
            headers={"Content-Disposition": disposition},
        )

    async def healthz(_: Request) -> Response:
        return _answer(models.Alive(status="ok"))

    async def readyz(request: Request) -> Response:
        """Ready when the database answers at the current schema, its tables take writes
        now (none is locked by another session) and no escalation timer is overdue by
        more than `timers_late_after`. `?exclude=timers` leaves the timers
        out (for a readiness probe that must keep the webhook in service while the
        workers are down: alert on the metric instead)."""
        excluded = set(_csv(request.query_params.getlist("exclude")))

        def check() -> str | None:
            db.ping()
            migrations.check(db)
            db.probe_writes()
            if "timers" in excluded:
                return None
            late = escalation_health().timers_late
            if late > settings.timers_late_after.total_seconds():
                return (
                    f"escalation timers are {late:.0f} s overdue: no worker is firing them; "
                    "check that `runbook-bot worker` (or serve's worker) runs and reaches "
                    "the database"
                )
            return None

        try:
            problem = await run_in_threadpool(check)
        except BotError as exc:
            return _answer(models.Unready(status="unavailable", reason=str(exc)), status=503)
        if problem is not None:
            unready = models.Unready(status="unavailable", check="timers", reason=problem)
            return _answer(unready, status=503)
        return _answer(models.Ready(status="ready"))

    async def openapi_document(_: Request) -> Response:
        return JSONResponse(api_document)

    async def metrics_page(_: Request) -> Response:
        data = await run_in_threadpool(generate_latest, metrics.registry)
        return Response(data, media_type=CONTENT_TYPE_LATEST)

    routes: list[BaseRoute] = [
        Route("/webhooks/alertmanager", alertmanager, methods=["POST"]),
        *([Route("/slack/events", slack.handle_http, methods=["POST"])] if slack else []),
        Route("/api/incidents", list_incidents, methods=["GET"]),
        Route("/api/incidents/{number}", show_incident, methods=["GET"]),
        Route("/api/incidents/{number}/steps", list_steps, methods=["GET"]),
        Route("/api/incidents/{number}/postmortem", postmortem, methods=["GET"]),
        Route("/api/incidents/{number}/split", split_incident, methods=["POST"]),
        Route("/api/incidents/{number}/steps/{step}/approve", approve_step, methods=["POST"]),
        Route("/api/incidents/{number}/steps/{step}/skip", decide(runbooks.skip), methods=["POST"]),
        Route(
            "/api/incidents/{number}/steps/{step}/done",
            decide(runbooks.complete, note_required=True),
            methods=["POST"],
        ),
        Route(
            "/api/incidents/{number}/steps/{step}/repropose",
            decide(runbooks.repropose),
            methods=["POST"],
        ),
        Route("/api/incidents/{number}/page-second", page_second, methods=["POST"]),
        Route("/api/incidents/{number}/own", own_incident, methods=["POST"]),
        Route(
            "/api/incidents/{number}/steps/{step}/cancel",
            decide(runbooks.cancel, acknowledges=False),
            methods=["POST"],
        ),
        Route(
            "/api/incidents/{number}/steps/{step}/stop",
            decide(runbooks.stop),
            methods=["POST"],
        ),
        Route("/healthz", healthz, methods=["GET"]),
        Route("/readyz", readyz, methods=["GET"]),
        Route("/metrics", metrics_page, methods=["GET"]),
        Route("/openapi.json", openapi_document, methods=["GET"]),
    ]
    if settings.console.enabled:

        def woken() -> None:
            for call in (wake, wake_chat):
                if call is not None:
                    call()

        routes += console_routes(settings, db, clock, woken, on_console_login)
    app = Starlette(
        routes=routes,
        middleware=[Middleware(RequestMetrics, metrics=metrics), Middleware(SecurityHeaders)],
        exception_handlers={BotError: _error},
    )
    app.state.metrics = metrics
    app.state.topology = topology
    return app


async def _error(request: Request, exc: Exception) -> Response:
    if isinstance(exc, RequestRejected):
        body = models.Error(error=str(exc), field=exc.field or None)
        headers = {"WWW-Authenticate": 'Bearer realm="runbook-bot"'} if exc.status == 401 else None
        return _answer(body, status=exc.status, headers=headers)
    error = models.Error(error=str(exc))
    if isinstance(exc, StorageUnavailable | MigrationsPending):
        logger.warning("%s %s: %s", request.method, request.url.path, exc)
        return _answer(error, status=503, headers={"Retry-After": "10"})
    if isinstance(exc, IncidentNotFound | StepNotFound):
        return _answer(error, status=404)
    return _answer(error, status=409)


def _answer(
    body: models.Answer, *, status: int = 200, headers: dict[str, str] | None = None
) -> Response:
    """A JSON answer, built from its model in `bot.api.models` (what /openapi.json says)."""
    return JSONResponse(body.wire(), status_code=status, headers=headers)


def _step_fields(number: int, run: StepRun) -> dict[str, Any]:
    """What every decision endpoint answers: where the step stands now."""
    return {
        "incident": f"INC-{number}",
        "step": run.step_id,
        "attempt": run.attempt,
        "state": run.state,
        "actor": run.actor,
    }


async def _decision_bytes(request: Request) -> bytes:
    """A decision's body, at most MAX_DECISION_BYTES (413 past it, before reading on)."""
    hint = 'a decision is a small JSON object: {"note": "..."}'
    return await inputs.read_body(request.headers, request.stream(), MAX_DECISION_BYTES, hint=hint)


def _decides(who: people.Decider, what: str) -> None:
    """Refuse (409) a token owner without a role, saying how to get one."""
    if not who.roles:
        raise ApprovalRefused(
            f"{who.id} has no role and may not {what}; an admin gives them one in the "
            "`people` setting (responder, second_line or admin)"
        )


def _note(body: api_requests.NoteRequest, *, required: bool) -> str | None:
    """The note from `{"note": "replaced the cable"}`."""
    note = body.note
    if required and not (note or "").strip():
        raise PayloadInvalid('say what was done: {"note": "replaced the cable"}', field="note")
    return note


def _parse(body: bytes, model: type[api_requests.D], who: people.Decider) -> api_requests.D:
    """The decision body as its model. The token says who decides: a body naming someone
    (`as`) is refused rather than ignored, saying whom the token stands for."""
    try:
        return api_requests.parse(body, model)
    except PayloadInvalid as exc:
        if exc.field == "as":
            raise PayloadInvalid(
                f'the API token decides who you are ({who.id}): drop "as" and send {model.EXAMPLE}',
                field="as",
            ) from None
        raise


def _choices(
    values: list[str], name: str, meaning: Callable[[list[str]], tuple[str, ...]]
) -> list[str]:
    """What the comma-separated words of a list filter stand for (`bot.incidents.filters`)."""
    try:
        return list(meaning(_csv(values)))
    except RequestRejected as exc:
        raise RequestRejected(f"query parameter {name}: {exc}", field=name) from None


def _csv(values: list[str]) -> list[str]:
    return [part.strip() for value in values for part in value.split(",") if part.strip()]


def _int_param(raw: str, name: str, low: int, high: int) -> int:
    if not (raw.isascii() and raw.isdigit() and len(raw) <= 10) or not low <= int(raw) <= high:
        raise RequestRejected(f"query parameter {name} must be a number from {low} to {high}")
    return int(raw)

"""The OpenAPI 3.1 document of the bot's HTTP API, served at `GET /openapi.json`.

Generated, never written by hand: every body and answer is a pydantic model (the webhook's
`bot.alerts.payload.WebhookPayload`, the answers in `bot.api.models`, the decisions and
query strings in `bot.api.requests`), and `OPERATIONS` says which route takes and answers
which. `bot.web` builds its answers from the same models, a test keeps `OPERATIONS` and the
app's routes equal, and the fuzz suite (tests/fuzz/test_openapi.py) drives the real app
from this document, failing on any answer that does not conform to it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import JsonSchemaMode, models_json_schema

from bot import __version__
from bot.alerts.payload import WebhookPayload
from bot.api import models, requests, splits

JSON = "application/json"
REF = "#/components/schemas/{model}"


@dataclass(frozen=True)
class Reply:
    """One status an operation answers with: a model as JSON, or `media` with `schema`."""

    description: str
    model: type[BaseModel] | None = None
    media: str = JSON
    schema: dict[str, Any] = field(default_factory=dict)
    headers: tuple[str, ...] = ()


@dataclass(frozen=True)
class Operation:
    method: str
    path: str
    summary: str
    replies: dict[int, Reply]
    description: str | None = None
    body: type[BaseModel] | None = None
    query: type[BaseModel] | None = None
    security: tuple[str, ...] = ()
    """The security schemes that admit a caller (none: open)."""
    body_required: bool = True


HEADERS: dict[str, dict[str, Any]] = {
    "Retry-After": {"schema": {"type": "string"}, "description": "seconds"},
    "WWW-Authenticate": {"schema": {"type": "string"}},
}
PATH_PARAMETERS: dict[str, dict[str, Any]] = {
    "number": {
        "description": "The incident: `INC-42`, `inc-42` or `42`.",
        "schema": {"type": "string", "pattern": "^([Ii][Nn][Cc]-)?[0-9]{1,9}$"},
    },
    "step": {
        "description": "The step's `id` in the incident's runbook.",
        "schema": {"type": "string", "minLength": 1, "maxLength": 200},
    },
}


def _error(description: str, *headers: str) -> Reply:
    return Reply(description, models.Error, headers=headers)


UNAVAILABLE = _error(
    "The database is down or its schema is not current; retry later (Alertmanager does).",
    "Retry-After",
)
UNAUTHORIZED = _error(
    "Missing or wrong credentials (the webhook's bearer token or basic auth).",
    "WWW-Authenticate",
)
NO_TOKEN = _error(
    "No valid personal API token (`Authorization: Bearer rbt_...`, from `runbook-bot "
    "tokens create --person YOU`): missing, unknown, revoked, or the webhook's credentials, "
    "which decide nothing.",
    "WWW-Authenticate",
)
NOT_FOUND = _error("No such incident, or no such step in its runbook.")
OUT_OF_RANGE = _error("A query parameter is out of range.")


def _read(
    path: str, summary: str, answer: Reply, query: type[BaseModel] | None = None
) -> Operation:
    replies = {200: answer, 400: OUT_OF_RANGE, 404: NOT_FOUND, 503: UNAVAILABLE}
    if "{number}" not in path:
        del replies[404]
    return Operation("get", path, summary, replies, query=query)


def _decision(
    verb: str, summary: str, body: type[BaseModel], answer: type[BaseModel], note: str = ""
) -> Operation:
    return Operation(
        "post",
        f"/api/incidents/{{number}}/steps/{{step}}/{verb}",
        summary,
        {
            200: Reply("Where the step stands now.", answer),
            400: _error(
                "The body is not the JSON object described, or names someone (`as`: the "
                "token decides who acts); `field` names the problem."
            ),
            401: NO_TOKEN,
            404: NOT_FOUND,
            409: _error(
                "Refused: no role, the same person twice, the approval expired, the "
                "parameters changed, or the step is not waiting for this decision."
            ),
            413: _error(f"The body is larger than {requests.MAX_BODY_BYTES} bytes."),
            503: UNAVAILABLE,
        },
        description=note or None,
        body=body,
        security=("personalToken",),
        body_required=False,
    )


OPERATIONS: tuple[Operation, ...] = (
    Operation(
        "post",
        "/webhooks/alertmanager",
        "Receive an Alertmanager notification (webhook payload version 4)",
        {
            200: Reply("The alerts are stored.", models.IngestResult),
            400: _error("Not a version 4 payload; `field` names the first problem."),
            401: UNAUTHORIZED,
            413: _error("The body is larger than `max_body_bytes`."),
            415: _error("The content type is not application/json."),
            503: UNAVAILABLE,
        },
        description=(
            "Answers 200 only after the alerts are committed. 4xx means the notification "
            "can never succeed (Alertmanager does not retry it); 503 means storage is down "
            "(Alertmanager retries)."
        ),
        body=WebhookPayload,
        security=("bearer", "basic"),
    ),
    _read(
        "/api/incidents",
        "Incidents, newest first",
        Reply("The incidents.", models.IncidentList),
        requests.IncidentQuery,
    ),
    _read(
        "/api/incidents/{number}",
        "One incident with its alerts and its log",
        Reply("The incident.", models.IncidentDetail),
    ),
    _read(
        "/api/incidents/{number}/steps",
        "The steps of the incident's runbook and where each stands",
        Reply("The steps.", models.Steps),
    ),
    _read(
        "/api/incidents/{number}/postmortem",
        "The 5-Why postmortem draft, as Markdown",
        Reply("The draft.", media="text/markdown", schema={"type": "string"}),
        requests.PostmortemQuery,
    ),
    _decision(
        "approve",
        "Approve a step (a disruptive step needs two different people)",
        requests.ApproveRequest,
        models.Approved,
    ),
    _decision("skip", "Skip a step", requests.NoteRequest, models.Decided),
    _decision(
        "done",
        "Mark a manual step done",
        requests.NoteRequest,
        models.Decided,
        note="`note` is required.",
    ),
    _decision("cancel", "Cancel a step", requests.NoteRequest, models.Decided),
    _decision(
        "stop",
        "Stop the rest of a running step over many nodes",
        requests.NoteRequest,
        models.Decided,
        note="The nodes running finish and no new node starts; the run ends cancelled with "
        "the nodes left listed. 409 when the step is not a running `for_each` step.",
    ),
    _decision(
        "repropose",
        "Propose a step again",
        requests.NoteRequest,
        models.Decided,
        note="For a step whose newest run was skipped, failed, timed out, expired or was "
        "cancelled: a new attempt whose approvals start again; the later steps the bot "
        "skipped by `when` are decided again in their turn. 409 while it runs, waits for a "
        "decision or succeeded, or when its `when` is still false.",
    ),
    Operation(
        "post",
        "/api/incidents/{number}/page-second",
        "Page the second line now",
        {
            200: Reply("Who was paged, and when.", models.SecondLinePaged),
            400: _error("The body is not the JSON object described; `field` names it."),
            401: NO_TOKEN,
            404: NOT_FOUND,
            409: _error(
                "Refused: no role, the incident is resolved or closed, or its escalation "
                "policy has no second level."
            ),
            413: _error(f"The body is larger than {requests.MAX_BODY_BYTES} bytes."),
            503: UNAVAILABLE,
        },
        description="Pages level 2 of the incident's escalation policy now (as its timer "
        "would; the caller is not paged): a first approver of a two-person step asks for "
        "the second person. On an open incident the ladder moves to level 2.",
        body=requests.PageSecondRequest,
        security=("personalToken",),
        body_required=False,
    ),
    Operation(
        "post",
        "/api/incidents/{number}/own",
        "Take ownership of an incident",
        {
            200: Reply("The owner and the incident's status now.", models.Owned),
            400: _error("The body is not the JSON object described; `field` names it."),
            401: NO_TOKEN,
            404: NOT_FOUND,
            409: _error("Refused: no role, or the incident is resolved or closed."),
            413: _error(f"The body is larger than {requests.MAX_BODY_BYTES} bytes."),
            503: UNAVAILABLE,
        },
        description="The token's owner becomes the owner; an open incident is acknowledged "
        'by it unless the body says `{"acknowledge": false}`.',
        body=requests.OwnRequest,
        security=("personalToken",),
        body_required=False,
    ),
    Operation(
        "post",
        "/api/incidents/{number}/split",
        "Split nodes out of a domain incident, each into a node incident of its own",
        {
            200: Reply("Where each node's alerts are now.", splits.SplitDone),
            400: _error(
                "The body is not the JSON object described, names someone (`as`), names "
                "nodes the incident has no alerts of, or every node; `field` says which."
            ),
            401: NO_TOKEN,
            404: NOT_FOUND,
            409: _error("Refused: no role, or the incident is not an open domain incident."),
            413: _error(f"The body is larger than {requests.MAX_BODY_BYTES} bytes."),
            503: UNAVAILABLE,
        },
        description="Only a person splits: correlation never merges the nodes back.",
        body=splits.SplitRequest,
        security=("personalToken",),
    ),
    Operation(
        "get", "/healthz", "Liveness: the process answers", {200: Reply("Alive.", models.Alive)}
    ),
    Operation(
        "get",
        "/readyz",
        "Readiness: the database answers at the current schema, timers fire",
        {
            200: Reply("Ready.", models.Ready),
            503: Reply("Not ready, and why.", models.Unready),
        },
        query=requests.ReadyQuery,
    ),
    Operation(
        "get",
        "/metrics",
        "Prometheus metrics",
        {200: Reply("The Prometheus text format.", media="text/plain", schema={"type": "string"})},
    ),
    Operation(
        "get",
        "/openapi.json",
        "This document",
        {200: Reply("OpenAPI 3.1.", schema={"type": "object"})},
    ),
)
"""Every route of the JSON API. Not here: the console's HTML pages and `/slack/events`,
which follow their own protocols (docs/console.md, docs/slack.md)."""


Refs = dict[tuple[Any, JsonSchemaMode], dict[str, Any]]
"""Each (model, mode) -> the `$ref` to its component schema."""


def _schemas() -> tuple[Refs, dict[str, Any]]:
    """(each model and mode -> its `$ref`, the component schemas), in one pass so the
    enums and nested models each get one shared definition."""
    wanted: dict[tuple[type[BaseModel], JsonSchemaMode], None] = {}
    for operation in OPERATIONS:
        if operation.body is not None:
            wanted[(operation.body, "validation")] = None
        for reply in operation.replies.values():
            if reply.model is not None:
                wanted[(reply.model, "serialization")] = None
    refs, top = models_json_schema(list(wanted), by_alias=True, ref_template=REF)
    return refs, dict(top.get("$defs", {}))


def _query(model: type[BaseModel]) -> list[dict[str, Any]]:
    schema = model.model_json_schema(mode="validation")
    required = set(schema.get("required", ()))
    parameters = []
    for name, prop in schema["properties"].items():
        prop = {key: value for key, value in prop.items() if key != "title"}
        description = prop.pop("description", None)
        # An optional parameter is absent, never JSON null: keep the non-null branch.
        branches = [b for b in prop.pop("anyOf", ()) if b != {"type": "null"}]
        if branches:
            prop = {**branches[0], **prop}
        parameter = {"name": name, "in": "query", "required": name in required, "schema": prop}
        if description:
            parameter["description"] = description
        parameters.append(parameter)
    return parameters


def _path(path: str) -> list[dict[str, Any]]:
    return [
        {"name": name, "in": "path", "required": True, **PATH_PARAMETERS[name]}
        for name in re.findall(r"{(\w+)}", path)
    ]


def _operation(operation: Operation, refs: Refs) -> dict[str, Any]:
    responses: dict[str, Any] = {}
    for status, reply in sorted(operation.replies.items()):
        schema = refs[(reply.model, "serialization")] if reply.model else reply.schema
        answer: dict[str, Any] = {
            "description": reply.description,
            "content": {reply.media: {"schema": schema}},
        }
        if reply.headers:
            answer["headers"] = {name: HEADERS[name] for name in reply.headers}
        responses[str(status)] = answer
    described: dict[str, Any] = {"summary": operation.summary}
    if operation.description:
        described["description"] = operation.description
    if operation.security:
        described["security"] = [{scheme: []} for scheme in operation.security]
    parameters = _path(operation.path) + (_query(operation.query) if operation.query else [])
    if parameters:
        described["parameters"] = parameters
    if operation.body is not None:
        body = refs[(operation.body, "validation")]
        described["requestBody"] = {
            "required": operation.body_required,
            "content": {JSON: {"schema": body}},
        }
    described["responses"] = responses
    return described


def document() -> dict[str, Any]:
    """The whole document, as a JSON-ready dict."""
    refs, schemas = _schemas()
    paths: dict[str, Any] = {}
    for operation in OPERATIONS:
        paths.setdefault(operation.path, {})[operation.method] = _operation(operation, refs)
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "runbook-bot",
            "version": __version__,
            "description": (
                "Alertmanager webhook, incident read API, step decisions, health and "
                "metrics. See docs/api.md."
            ),
        },
        "paths": paths,
        "components": {
            "schemas": schemas,
            "securitySchemes": {
                "bearer": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "The webhook's token (`webhook_token`): the webhook only.",
                },
                "basic": {
                    "type": "http",
                    "scheme": "basic",
                    "description": "The webhook's basic auth: the webhook only.",
                },
                "personalToken": {
                    "type": "http",
                    "scheme": "bearer",
                    "bearerFormat": "rbt_",
                    "description": "A person's own API token (`runbook-bot tokens create "
                    "--person alice`): the decision endpoints decide as its owner.",
                },
            },
        },
    }

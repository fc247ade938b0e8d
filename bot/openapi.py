"""The OpenAPI 3.1 document of the bot's HTTP API, served at `GET /openapi.json`.

The webhook's request body is the pydantic model the webhook validates with
(`bot.alerts.payload.WebhookPayload`), so the document cannot drift from the parser; the
answers are written out here to match what `bot.web` and the views return. The fuzz suite
(tests/fuzz/test_openapi.py) drives the real app from this document and fails on any answer
that does not conform to it, which is what keeps the hand-written parts honest.
"""

from __future__ import annotations

from typing import Any

from bot import __version__
from bot.alerts.payload import WebhookPayload

JSON = "application/json"
_REF = "#/components/schemas/{model}"


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
    return {"anyOf": [schema, {"type": "null"}]}


_STRING = {"type": "string"}
_INT = {"type": "integer"}
_BOOL = {"type": "boolean"}
_TIME = {"type": "string", "format": "date-time"}
_LABELS = {"type": "object", "additionalProperties": {"type": "string"}}


def _object(properties: dict[str, Any], *, optional: tuple[str, ...] = ()) -> dict[str, Any]:
    required = [name for name in properties if name not in optional]
    return {"type": "object", "properties": properties, "required": required}


def _error(description: str, headers: dict[str, Any] | None = None) -> dict[str, Any]:
    answer: dict[str, Any] = {
        "description": description,
        "content": {JSON: {"schema": _ref("Error")}},
    }
    if headers:
        answer["headers"] = headers
    return answer


_UNAVAILABLE = _error(
    "The database is down or its schema is not current; retry later (Alertmanager does).",
    {"Retry-After": {"schema": {"type": "string"}, "description": "seconds"}},
)
_UNAUTHORIZED = _error(
    "Missing or wrong credentials (the webhook's bearer token or basic auth).",
    {"WWW-Authenticate": {"schema": {"type": "string"}}},
)
_NO_TOKEN = _error(
    "No valid personal API token (`Authorization: Bearer rbt_...`, from `runbook-bot "
    "tokens create --person YOU`): missing, unknown, revoked, or the webhook's credentials, "
    "which decide nothing.",
    {"WWW-Authenticate": {"schema": {"type": "string"}}},
)
_NOT_FOUND = _error("No such incident, or no such step in its runbook.")

_NUMBER = {
    "name": "number",
    "in": "path",
    "required": True,
    "description": "The incident: `INC-42`, `inc-42` or `42`.",
    "schema": {"type": "string", "pattern": "^([Ii][Nn][Cc]-)?[0-9]{1,9}$"},
}
_STEP = {
    "name": "step",
    "in": "path",
    "required": True,
    "description": "The step's `id` in the incident's runbook.",
    "schema": {"type": "string", "minLength": 1, "maxLength": 200},
}
_BEARER: list[dict[str, list[str]]] = [{"bearer": []}, {"basic": []}]
_PERSONAL: list[dict[str, list[str]]] = [{"personalToken": []}]


def _schemas() -> dict[str, Any]:
    payload = WebhookPayload.model_json_schema(by_alias=True, ref_template=_REF)
    schemas: dict[str, Any] = payload.pop("$defs", {})
    schemas["WebhookPayload"] = payload
    schemas["Error"] = _object({"error": _STRING, "field": _STRING}, optional=("field",))
    schemas["IngestResult"] = _object(
        {
            "incident": {"type": "string", "pattern": "^INC-[0-9]+$"},
            "opened": _BOOL,
            "reopened": _BOOL,
            "resolved": _BOOL,
            "alerts": _object({"new": _INT, "repeat": _INT, "resolved": _INT, "refired": _INT}),
        }
    )
    schemas["Incident"] = _object(
        {
            "id": {"type": "string", "pattern": "^INC-[0-9]+$"},
            "number": {"type": "integer", "minimum": 1},
            "title": _STRING,
            "severity": _STRING,
            "status": _STRING,
            "owner": _nullable(_STRING),
            "disposition": _nullable(_STRING),
            "group_key": _STRING,
            "group_labels": _LABELS,
            "receiver": _STRING,
            "truncated_alerts": _INT,
            "reopen_count": _INT,
            "opened_at": _TIME,
            "acknowledged_at": _nullable(_TIME),
            "acknowledged_by": _nullable(_STRING),
            "resolved_at": _nullable(_TIME),
            "resolved_by": _nullable(_STRING),
            "closed_at": _nullable(_TIME),
            "reopened_at": _nullable(_TIME),
            "alerts_cleared_at": _nullable(_TIME),
            "updated_at": _TIME,
            "drill": _nullable(_STRING),
        }
    )
    schemas["Alert"] = _object(
        {
            "fingerprint": _STRING,
            "status": {"enum": ["firing", "resolved"]},
            "alertname": _STRING,
            "severity": _STRING,
            "labels": _LABELS,
            "annotations": _LABELS,
            "starts_at": _TIME,
            "ends_at": _nullable(_TIME),
            "generator_url": _STRING,
            "first_received_at": _TIME,
            "last_received_at": _TIME,
            "receive_count": {"type": "integer", "minimum": 1},
        }
    )
    schemas["LogEntry"] = _object(
        {
            "seq": {"type": "integer", "minimum": 1},
            "at": _TIME,
            "actor": _object({"kind": _STRING, "id": _STRING, "name": _STRING}),
            "type": _STRING,
            "summary": _STRING,
            "data": {"type": "object"},
            "hash": {"type": "string", "pattern": "^[0-9a-f]{64}$"},
        }
    )
    detail = {
        "allOf": [
            _ref("Incident"),
            _object(
                {
                    "alerts": {"type": "array", "items": _ref("Alert")},
                    "log": {"type": "array", "items": _ref("LogEntry")},
                }
            ),
        ]
    }
    schemas["IncidentDetail"] = detail
    schemas["StepRow"] = _object(
        {
            "step": _STRING,
            "title": _STRING,
            "state": _STRING,
            "attempt": _INT,
            "kind": _STRING,
            "action": _nullable(_STRING),
            "params": {"type": "object"},
            "params_hash": _STRING,
            "approvals": _INT,
            "approvals_required": _INT,
            "approvers": {"type": "array", "items": _STRING},
            "expires_at": _nullable(_STRING),
            "not_before": _nullable(_STRING),
            "actor": _nullable(_STRING),
            "summary": _STRING,
            "run_id": _nullable(_INT),
        }
    )
    schemas["Steps"] = _object(
        {
            "incident": {"type": "string", "pattern": "^INC-[0-9]+$"},
            "runbook": _STRING,
            "steps": {"type": "array", "items": _ref("StepRow")},
        }
    )
    step = {
        "incident": {"type": "string", "pattern": "^INC-[0-9]+$"},
        "step": _STRING,
        "attempt": _INT,
        "state": _STRING,
        "actor": _nullable(_STRING),
    }
    schemas["Approved"] = _object(
        {
            **step,
            "approvals_required": _INT,
            "params_hash": _STRING,
        }
    )
    schemas["Decided"] = _object({**step, "summary": _STRING})
    # Who decides is the token's owner: a body naming someone (`as`) is answered 400.
    schemas["Approval"] = {
        "type": "object",
        "properties": {
            "params_hash": {
                "type": "string",
                "description": "the hash of the parameters you reviewed (the card shows it)",
            },
        },
    }
    schemas["Decision"] = {
        "type": "object",
        "properties": {"note": {"type": "string"}},
    }
    return schemas


def _decision(summary: str, body: str, answer: str, *, note: str = "") -> dict[str, Any]:
    return {
        "post": {
            "summary": summary,
            "description": note or None,
            "security": _PERSONAL,
            "parameters": [_NUMBER, _STEP],
            "requestBody": {
                "required": False,
                "content": {JSON: {"schema": _ref(body)}},
            },
            "responses": {
                "200": {
                    "description": "Where the step stands now.",
                    "content": {JSON: {"schema": _ref(answer)}},
                },
                "400": _error(
                    'The body is not the JSON object described, or names someone ("as": '
                    "the token decides who you are)."
                ),
                "401": _NO_TOKEN,
                "404": _NOT_FOUND,
                "409": _error(
                    "Refused: no role, the same person twice, the approval expired, the "
                    "parameters changed, or the step is not waiting for this decision."
                ),
                "413": _error("The body is larger than 4096 bytes."),
                "503": _UNAVAILABLE,
            },
        }
    }


def _get(summary: str, answer: dict[str, Any], *parameters: dict[str, Any]) -> dict[str, Any]:
    responses: dict[str, Any] = {"200": answer}
    if any(p["name"] == "number" for p in parameters):
        responses["404"] = _NOT_FOUND
    responses["400"] = _error("A query parameter is out of range.")
    responses["503"] = _UNAVAILABLE
    return {"get": {"summary": summary, "parameters": list(parameters), "responses": responses}}


def _json(description: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {"description": description, "content": {JSON: {"schema": schema}}}


def _strip(value: Any) -> Any:
    """Drop `None` values (an operation without a description)."""
    if isinstance(value, dict):
        return {key: _strip(item) for key, item in value.items() if item is not None}
    if isinstance(value, list):
        return [_strip(item) for item in value]
    return value


def document() -> dict[str, Any]:
    """The whole document, as a JSON-ready dict."""
    csv = {"type": "string", "description": "comma-separated; repeat the parameter for more"}
    listing = [
        {"name": "status", "in": "query", "schema": csv, "description": "open, resolved..."},
        {"name": "severity", "in": "query", "schema": csv, "description": "critical..."},
        {
            "name": "limit",
            "in": "query",
            "schema": {"type": "integer", "minimum": 1, "maximum": 1000, "default": 100},
        },
    ]
    postmortem_query = [
        {"name": "format", "in": "query", "schema": {"enum": ["md", "markdown"]}},
        {"name": "lang", "in": "query", "schema": {"enum": ["zh", "en"]}},
    ]
    paths: dict[str, Any] = {
        "/webhooks/alertmanager": {
            "post": {
                "summary": "Receive an Alertmanager notification (webhook payload version 4)",
                "description": (
                    "Answers 200 only after the alerts are committed. 4xx means the "
                    "notification can never succeed (Alertmanager does not retry it); 503 "
                    "means storage is down (Alertmanager retries)."
                ),
                "security": _BEARER,
                "requestBody": {
                    "required": True,
                    "content": {JSON: {"schema": _ref("WebhookPayload")}},
                },
                "responses": {
                    "200": _json("The alerts are stored.", _ref("IngestResult")),
                    "400": _error("Not a version 4 payload; `field` names the first problem."),
                    "401": _UNAUTHORIZED,
                    "413": _error("The body is larger than `max_body_bytes`."),
                    "415": _error("The content type is not application/json."),
                    "503": _UNAVAILABLE,
                },
            }
        },
        "/api/incidents": _get(
            "Incidents, newest first",
            _json(
                "The incidents.",
                _object({"incidents": {"type": "array", "items": _ref("Incident")}}),
            ),
            *listing,
        ),
        "/api/incidents/{number}": _get(
            "One incident with its alerts and its log",
            _json("The incident.", _ref("IncidentDetail")),
            _NUMBER,
        ),
        "/api/incidents/{number}/steps": _get(
            "The steps of the incident's runbook and where each stands",
            _json("The steps.", _ref("Steps")),
            _NUMBER,
        ),
        "/api/incidents/{number}/postmortem": _get(
            "The 5-Why postmortem draft, as Markdown",
            {
                "description": "The draft.",
                "content": {"text/markdown": {"schema": {"type": "string"}}},
            },
            _NUMBER,
            *postmortem_query,
        ),
        "/api/incidents/{number}/steps/{step}/approve": _decision(
            "Approve a step (a disruptive step needs two different people)",
            "Approval",
            "Approved",
        ),
        "/api/incidents/{number}/steps/{step}/skip": _decision(
            "Skip a step", "Decision", "Decided"
        ),
        "/api/incidents/{number}/steps/{step}/done": _decision(
            "Mark a manual step done", "Decision", "Decided", note="`note` is required."
        ),
        "/api/incidents/{number}/steps/{step}/cancel": _decision(
            "Cancel a step", "Decision", "Decided"
        ),
        "/healthz": {
            "get": {
                "summary": "Liveness: the process answers",
                "responses": {
                    "200": _json("Alive.", _object({"status": {"const": "ok"}})),
                },
            }
        },
        "/readyz": {
            "get": {
                "summary": "Readiness: the database answers at the current schema, timers fire",
                "parameters": [
                    {
                        "name": "exclude",
                        "in": "query",
                        "schema": {"type": "string"},
                        "description": "`timers` leaves the escalation timers out",
                    }
                ],
                "responses": {
                    "200": _json("Ready.", _object({"status": {"const": "ready"}})),
                    "503": _json(
                        "Not ready, and why.",
                        _object(
                            {
                                "status": {"const": "unavailable"},
                                "check": _STRING,
                                "reason": _STRING,
                            },
                            optional=("check",),
                        ),
                    ),
                },
            }
        },
        "/metrics": {
            "get": {
                "summary": "Prometheus metrics",
                "responses": {
                    "200": {
                        "description": "The Prometheus text format.",
                        "content": {"text/plain": {"schema": {"type": "string"}}},
                    }
                },
            }
        },
        "/openapi.json": {
            "get": {
                "summary": "This document",
                "responses": {"200": _json("OpenAPI 3.1.", {"type": "object"})},
            }
        },
    }
    whole: dict[str, Any] = _strip(
        {
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
                "schemas": _schemas(),
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
    )
    return whole

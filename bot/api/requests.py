"""What the HTTP API's requests carry, as pydantic models: the bodies of the step decisions
and the query strings of the read endpoints.

A decision's body names no person: the personal token in `Authorization` decides who acts
(docs/security.md), so an `as` field is refused with that said, and every other unknown
field is refused by name rather than ignored. `parse` turns a body into its model or
raises `PayloadInvalid` saying what to send.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic_core import ErrorDetails

from bot.errors import PayloadInvalid

MAX_BODY_BYTES = 4096
"""A decision body's cap: refused with 413 before more of it is read."""
MAX_PARAMS_HASH = 128
MAX_COUNT = 10000
"""The most nodes a `for_each` step runs on (a runbook's `batch` bound)."""
MAX_NOTE = 300
"""Characters: the longest note, JSON-escaped at its worst (12 bytes a character, a
surrogate pair), still fits in MAX_BODY_BYTES, so a valid body never meets the 413."""

AS_REFUSED = 'the token decides who acts; drop "as"'


class Decision(BaseModel):
    model_config = ConfigDict(extra="forbid")

    EXAMPLE: ClassVar[str] = "{}"
    """The body to send, quoted in error messages."""


class ApproveRequest(Decision):
    """Approve a step, optionally pinning the parameters you reviewed."""

    params_hash: str | None = Field(
        None,
        min_length=1,
        max_length=MAX_PARAMS_HASH,
        description="the hash of the parameters you reviewed (the card shows it)",
    )
    count: int | None = Field(
        None,
        ge=1,
        le=MAX_COUNT,
        description="a step over many nodes (`for_each`) whose action changes them: how "
        "many nodes you approve it on, as the card says (required when it is more than one)",
    )
    override: int | None = Field(
        None,
        ge=1,
        le=MAX_COUNT,
        description="an admin only, with `count`: how many of the step's nodes may pass the "
        "circuit breaker's global cap (each one it lets through is logged)",
    )
    acknowledge: bool = Field(
        True,
        description="deciding acknowledges an open incident (its escalation stops); "
        "false: decide without acknowledging",
    )

    EXAMPLE: ClassVar[str] = '{"params_hash": "...", "count": 32}'


class NoteRequest(Decision):
    """Skip, cancel, stop, propose again or mark done a step, saying why or what was done."""

    note: str | None = Field(
        None,
        max_length=MAX_NOTE,
        description="why, or what was done (required for done, and for skipping a step "
        "later steps read)",
    )
    acknowledge: bool = Field(
        True,
        description="deciding (not cancelling) acknowledges an open incident (its "
        "escalation stops); false: decide without acknowledging",
    )

    EXAMPLE: ClassVar[str] = '{"note": "replaced the cable"}'


class PageSecondRequest(Decision):
    """Page the second level of the incident's escalation now."""

    why: str | None = Field(
        None, max_length=MAX_NOTE, description="what you need them for (the page says it)"
    )

    EXAMPLE: ClassVar[str] = '{"why": "cordon needs a second approval"}'


class OwnRequest(Decision):
    """Take ownership of the incident (the token's owner becomes its owner)."""

    acknowledge: bool = Field(
        True,
        description="deciding acknowledges an open incident (its escalation stops); "
        "false: decide without acknowledging",
    )

    EXAMPLE: ClassVar[str] = '{"acknowledge": true}'


D = TypeVar("D", bound=Decision)


def parse(body: bytes, model: type[D]) -> D:
    """`body` (JSON; empty means `{}`) as `model`, or `PayloadInvalid` naming the field to
    blame and what to send."""
    try:
        data: Any = json.loads(body or b"{}")
    except ValueError as exc:
        raise PayloadInvalid(f"the body is not JSON: {exc}; send {model.EXAMPLE}") from None
    if not isinstance(data, dict):
        raise PayloadInvalid(f"the body must be a JSON object: send {model.EXAMPLE}")
    try:
        return model.model_validate(data, strict=True)
    except ValidationError as exc:
        problem = exc.errors(include_url=False, include_input=False)[0]
        raise PayloadInvalid(_message(problem, model), field=_field(problem)) from None


def _field(problem: ErrorDetails) -> str | None:
    # A made-up field's name is echoed back: bounded, so the answer stays small.
    return ".".join(str(part) for part in problem["loc"])[:80] or None


def _message(problem: ErrorDetails, model: type[Decision]) -> str:
    name = _field(problem)
    kind = problem["type"]
    if kind == "extra_forbidden":
        if name == "as":
            return AS_REFUSED
        known = ", ".join(f'"{key}"' for key in model.model_fields) or "none"
        return f'unknown field "{name}" (the fields are {known}): send {model.EXAMPLE}'
    limits: dict[str, Any] = dict(problem.get("ctx") or {})
    if kind == "string_too_long":
        return f'"{name}" is at most {limits["max_length"]} characters'
    if kind == "string_too_short":
        return f'"{name}" is empty: leave it out, or send {model.EXAMPLE}'
    if kind == "string_type":
        return f'"{name}" must be a string: send {model.EXAMPLE}'
    if kind == "int_type":
        return f'"{name}" must be a whole number: send {model.EXAMPLE}'
    return f'"{name}": {problem["msg"]}; send {model.EXAMPLE}'


class IncidentQuery(BaseModel):
    """`GET /api/incidents`: comma-separated words (repeat the parameter for more)."""

    status: str = Field(
        "all",
        description="active (open or acknowledged), all, open, acknowledged, resolved, closed",
    )
    severity: str = Field("all", description="all, critical, warning, info")
    limit: int = Field(100, ge=1, le=1000)


class PostmortemQuery(BaseModel):
    format: Literal["md", "markdown"] = Field("md", description="Markdown, the only format")
    lang: Literal["zh", "en"] | None = Field(
        None, description="the draft's language (default: the `postmortem_lang` setting)"
    )


class ReadyQuery(BaseModel):
    exclude: str | None = Field(None, description="`timers` leaves the escalation timers out")

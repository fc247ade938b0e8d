"""The API's models: decision bodies parsed and refused with a clear message, and the
OpenAPI document generated from the models, valid 3.1 and equal to the app's routes."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError
from schemathesis.specs.openapi.definitions import OPENAPI_31_VALIDATOR
from starlette.routing import Route

from bot import openapi
from bot.api import models, requests
from bot.clock import FrozenClock
from bot.config import load_settings
from bot.db import Database
from bot.errors import PayloadInvalid
from bot.incidents.lifecycle import Severity, Status
from bot.web import build_app


def _refused(body: bytes, model: type[requests.Decision]) -> tuple[str, str | None]:
    with pytest.raises(PayloadInvalid) as refused:
        requests.parse(body, model)
    return str(refused.value), refused.value.field


def test_decision_bodies_parse_into_their_models_and_an_empty_body_is_an_empty_object() -> None:
    approve = requests.parse(b'{"params_hash": "3f2a"}', requests.ApproveRequest)
    note = requests.parse(b'{"note": "replaced the cable"}', requests.NoteRequest)
    empty = requests.parse(b"", requests.NoteRequest)

    assert approve == requests.ApproveRequest(params_hash="3f2a")
    assert note.note == "replaced the cable"
    assert empty.note is None


@pytest.mark.parametrize("model", [requests.ApproveRequest, requests.NoteRequest])
def test_a_body_naming_who_acts_is_refused_because_the_token_decides(
    model: type[requests.Decision],
) -> None:
    assert _refused(b'{"as": "alice", "note": "x"}', model) == (
        'the token decides who acts; drop "as"',
        "as",
    )


def test_an_unknown_field_is_refused_by_name_with_the_fields_there_are() -> None:
    assert _refused(b'{"params_hash": "a", "force": true}', requests.ApproveRequest) == (
        'unknown field "force" (the fields are "params_hash", "count", "override", '
        '"acknowledge"): send {"params_hash": "...", "count": 32}',
        "force",
    )
    message, field = _refused(b'{"' + b"x" * 500 + b'": 1}', requests.NoteRequest)
    assert field == "x" * 80  # a made-up name is echoed back cut short
    assert message.startswith(f'unknown field "{"x" * 80}"')


def test_strings_are_bounded_and_must_be_strings() -> None:
    long_note = ('{"note": "' + "n" * (requests.MAX_NOTE + 1) + '"}').encode()
    long_hash = ('{"params_hash": "' + "h" * (requests.MAX_PARAMS_HASH + 1) + '"}').encode()

    assert _refused(long_note, requests.NoteRequest) == ('"note" is at most 300 characters', "note")
    assert _refused(long_hash, requests.ApproveRequest) == (
        '"params_hash" is at most 128 characters',
        "params_hash",
    )
    assert _refused(b'{"note": 42}', requests.NoteRequest) == (
        '"note" must be a string: send {"note": "replaced the cable"}',
        "note",
    )
    assert _refused(b'{"params_hash": ""}', requests.ApproveRequest) == (
        '"params_hash" is empty: leave it out, or send {"params_hash": "...", "count": 32}',
        "params_hash",
    )


def test_the_longest_valid_note_fits_the_body_cap_even_fully_escaped() -> None:
    worst = '{"note": "' + "\\ud83d\\ude00" * requests.MAX_NOTE + '"}'

    assert len(worst.encode()) <= requests.MAX_BODY_BYTES
    assert requests.parse(worst.encode(), requests.NoteRequest).note == "😀" * requests.MAX_NOTE


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"[1, 2]", 'the body must be a JSON object: send {"note": "replaced the cable"}'),
        (b'"done"', 'the body must be a JSON object: send {"note": "replaced the cable"}'),
        (b"{", "the body is not JSON: Expecting property name enclosed in double quotes"),
    ],
)
def test_a_body_that_is_not_a_json_object_says_what_to_send(body: bytes, message: str) -> None:
    text, field = _refused(body, requests.NoteRequest)

    assert text.startswith(message)
    assert field is None


def test_the_documented_operations_are_exactly_the_apps_routes(
    db: Database, db_url: str, clock: FrozenClock
) -> None:
    # The console's pages and /slack/events follow their own protocols (docs/api.md).
    settings = load_settings(database_url=db_url, console={"enabled": False})
    served = {
        (route.path, method)
        for route in build_app(settings, db, clock).routes
        if isinstance(route, Route)
        for method in route.methods or ()
        if method != "HEAD"
    }
    documented = {(op.path, op.method.upper()) for op in openapi.OPERATIONS}
    described = {
        (path, method.upper())
        for path, item in openapi.document()["paths"].items()
        for method in item
    }

    assert documented == served
    assert described == served


def test_the_document_is_valid_openapi_3_1_and_every_reference_resolves() -> None:
    document = openapi.document()
    schemas = document["components"]["schemas"]

    def refs(value: Any) -> list[str]:
        if isinstance(value, dict):
            found = [value["$ref"]] if "$ref" in value else []
            return found + [ref for item in value.values() for ref in refs(item)]
        if isinstance(value, list):
            return [ref for item in value for ref in refs(item)]
        return []

    errors = [error.message for error in OPENAPI_31_VALIDATOR.iter_errors(document)]
    assert errors == []
    assert document["openapi"] == "3.1.0"
    missing = {ref for ref in refs(document) if ref.rsplit("/", 1)[-1] not in schemas}
    assert missing == set()


def test_decision_bodies_in_the_document_name_no_person_and_forbid_other_fields() -> None:
    document = openapi.document()
    schemas = document["components"]["schemas"]
    approve = document["paths"]["/api/incidents/{number}/steps/{step}/approve"]["post"]
    done = document["paths"]["/api/incidents/{number}/steps/{step}/done"]["post"]

    assert approve["requestBody"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/ApproveRequest"
    }
    assert done["requestBody"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/NoteRequest"
    }
    for name, fields in (
        ("ApproveRequest", {"params_hash", "count", "override", "acknowledge"}),
        ("NoteRequest", {"note", "acknowledge"}),
    ):
        assert set(schemas[name]["properties"]) == fields
        assert schemas[name]["additionalProperties"] is False
    assert schemas["NoteRequest"]["properties"]["note"]["anyOf"][0]["maxLength"] == 300


def test_statuses_and_severities_are_documented_as_the_stored_strings() -> None:
    schemas = openapi.document()["components"]["schemas"]
    incident = schemas["Incident"]["properties"]

    assert schemas["Status"]["enum"] == ["open", "acknowledged", "resolved", "closed"]
    assert schemas["Severity"]["enum"] == ["critical", "warning", "info"]
    assert [s.value for s in Status] == schemas["Status"]["enum"]
    assert [s.value for s in Severity] == schemas["Severity"]["enum"]
    assert incident["status"] == {"$ref": "#/components/schemas/Status"}
    assert incident["severity"] == {"$ref": "#/components/schemas/Severity"}


def test_an_answer_with_a_key_its_model_does_not_know_is_refused_not_sent() -> None:
    with pytest.raises(ValidationError) as refused:
        models.Steps.model_validate(
            {"incident": "INC-1", "runbook": "gpu-xid v1", "steps": [], "extra": 1}
        )

    assert [error["type"] for error in refused.value.errors()] == ["extra_forbidden"]


def test_an_error_answer_leaves_out_a_field_nobody_is_to_blame_for() -> None:
    assert models.Error(error="INC-77 does not exist").wire() == {"error": "INC-77 does not exist"}
    assert models.Error(error="bad", field="note").wire() == {"error": "bad", "field": "note"}

"""Schemathesis against the real app on loopback, driven by the document the app serves.

Each operation gets requests generated from `GET /openapi.json` (bounded and derandomized so
CI repeats the same run), sent to the app under uvicorn on SQLite and on PostgreSQL, with
the webhook token configured and an incident opened by the recorded XID 79 notification,
so the read and decision endpoints answer for a real incident and its real steps as well
as for made-up ones. Every answer must be no 5xx (the database is up) and conform to the
document: a documented status, its content type, its schema, its headers.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    negative_data_rejection,
    response_schema_conformance,
    status_code_conformance,
)
from starlette.routing import Route

from bot import openapi
from bot.clock import FrozenClock
from bot.config import load_settings
from bot.db import Database
from bot.runbooks import catalog as catalogs
from bot.web import build_app
from bot.worker import Worker
from tests.fuzz.conftest import Tally
from tests.support import people, server
from tests.support.payloads import fixture

TOKEN = "fuzz-webhook-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
"""The webhook's credentials; the decision endpoints take a person's own token instead."""
# The first step waits for people (no worker runs here), so decisions reach the engine.
RUNBOOK = """\
id: gpu-xid
title: Single GPU fault
version: 1
match: {alerts: [GPUXIDError]}
facts:
  node: "{{ labels.Hostname }}"
steps:
  - {id: cordon, title: Cordon, action: k8s.cordon, with: {node: "{{ facts.node }}"}}
  - {id: power, title: Power cycle, action: bmc.power_cycle, with: {node: "{{ facts.node }}"}}
  - {id: look, title: Look at the node, manual: check the GPU}
"""
EXAMPLES = 50
"""Generated requests per operation and generation mode."""
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]
OPERATIONS = [
    (path, method.upper())
    for path, item in openapi.document()["paths"].items()
    for method in item
    if path != "/openapi.json"  # a static document, fetched and loaded below
]


@pytest.fixture
def app(
    db: Database, db_url: str, clock: FrozenClock, tmp_path: Path
) -> Iterator[tuple[str, dict[str, Any], dict[str, str]]]:
    """The app's base URL, the document it serves (with INC-1 open on RUNBOOK) and the
    `Authorization` header of alice's personal API token."""
    (tmp_path / "runbooks").mkdir()
    (tmp_path / "runbooks" / "gpu-xid.yaml").write_text(RUNBOOK)
    settings = load_settings(
        database_url=db_url,
        webhook_token=TOKEN,
        runbooks_dir=tmp_path / "runbooks",
        roles={"alice": ["responder"], "bob": ["responder"]},
    )
    with (
        server.running(settings, db, clock, catalog=catalogs.load(settings)) as url,
        httpx.Client(base_url=url, timeout=10, headers=AUTH) as client,
    ):
        opened = client.post("/webhooks/alertmanager", json=fixture("xid79-firing.json"))
        assert opened.status_code == 200, opened.text
        Worker(db, settings, clock).propose()  # as serve's worker does: the first step waits
        document = client.get("/openapi.json")
        assert document.status_code == 200
        yield url, document.json(), people.bearer(db, settings, "alice")


def _strategy(
    operation: Any, steps: list[str], waiting: list[str], mode: GenerationMode
) -> st.SearchStrategy[Any]:
    """Cases for `operation`: everything generated, and also with the path naming INC-1
    and each of its real steps, so decisions reach the engine and not only a 404."""
    variants = [operation.as_strategy(generation_mode=mode)]
    names = {parameter.name for parameter in operation.path_parameters}
    if "number" in names:
        variants.append(
            operation.as_strategy(generation_mode=mode, path_parameters={"number": "INC-1"})
        )
    if "step" in names:
        variants += [
            operation.as_strategy(
                generation_mode=mode, path_parameters={"number": "INC-1", "step": step}
            )
            for step in steps
        ]
        # A responder with a role deciding on a real step: the engine answers, not a 404.
        variants += [
            operation.as_strategy(
                generation_mode=mode,
                path_parameters={"number": "INC-1", "step": step},
                body={"note": "fuzz"},
            )
            for step in waiting
        ]
    return st.one_of(variants)


def _exchange(
    url: str,
    cases: st.SearchStrategy[Any],
    checks: list[Any],
    tally: Tally,
    auth: dict[str, str],
) -> None:
    """Send every generated case to the app with `auth` and check its answer."""

    @settings(
        max_examples=EXAMPLES,
        derandomize=True,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(case=cases)
    def exchange(case: Any) -> None:
        response = case.call(base_url=url, headers=auth, timeout=10)
        mode = "negative" if negative_data_rejection in checks else "positive"
        tally.count(f"{mode} {response.status_code}")
        case.validate_response(response, checks=checks, headers=auth)

    exchange()


@pytest.mark.timeout(90)
@pytest.mark.parametrize(("path", "method"), OPERATIONS, ids=[f"{m} {p}" for p, m in OPERATIONS])
def test_every_answer_conforms_to_the_document_and_none_is_a_server_error(
    app: tuple[str, dict[str, Any], dict[str, str]], tally: Tally, path: str, method: str
) -> None:
    url, document, personal = app
    auth = personal if "/steps/{step}/" in path else AUTH
    schema = schemathesis.openapi.from_dict(document)
    operation = schema[path][method]
    rows = httpx.get(f"{url}/api/incidents/1/steps").json()["steps"]
    steps = [row["step"] for row in rows]
    waiting = [row["step"] for row in rows if row["state"] == "awaiting_approval"]
    assert steps and waiting, rows

    positive = _strategy(operation, steps, waiting, GenerationMode.POSITIVE)
    _exchange(url, positive, CHECKS, tally, auth)
    if operation.path_parameters or operation.query or operation.body:
        negative = [*CHECKS, negative_data_rejection]
        _exchange(
            url,
            _strategy(operation, steps, waiting, GenerationMode.NEGATIVE),
            negative,
            tally,
            auth,
        )

    assert tally.tried > 0
    assert not any(outcome.endswith(" 500") for outcome in tally.by_outcome)


def test_the_served_document_describes_every_route_and_the_webhook_body_is_the_parsers_model(
    client: httpx.Client, db_url: str, db: Database, clock: FrozenClock
) -> None:
    document = client.get("/openapi.json").json()
    # The console's HTML pages and /slack/events are not the JSON API (docs/console.md,
    # docs/slack.md): without them, every route the app serves must be in the document.
    settings = load_settings(database_url=db_url, console={"enabled": False})

    described = {
        (path, method.upper()) for path, item in document["paths"].items() for method in item
    }
    served = {
        (route.path, method)
        for route in build_app(settings, db, clock).routes
        if isinstance(route, Route)
        for method in route.methods or ()
        if method != "HEAD"
    }
    assert described == served
    assert document["openapi"] == "3.1.0"
    body = document["paths"]["/webhooks/alertmanager"]["post"]["requestBody"]
    assert body["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/WebhookPayload"
    }
    schemas = document["components"]["schemas"]
    assert schemas["WebhookPayload"]["required"] == [
        "version",
        "groupKey",
        "status",
        "receiver",
        "alerts",
    ]
    assert set(schemas["WebhookAlert"]["properties"]) >= {"startsAt", "labels", "fingerprint"}

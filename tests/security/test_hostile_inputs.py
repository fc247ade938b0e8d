"""Inputs the fuzz suite found that crashed the app with a 500 (tests/fuzz): each must be
a 4xx that says what was wrong, on SQLite and on PostgreSQL, and must store nothing.

Alertmanager retries 5xx for as long as the alert fires, so a payload the bot cannot store
must be refused with 400 (never retried), not crash into a 500 (retried forever)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import pytest

from bot.config import load_settings
from bot.db import Database
from tests.support import people
from tests.support.payloads import alert, notification
from tests.support.rows import counts

HOOK = "/webhooks/alertmanager"


def _with(**fields: Any) -> dict[str, Any]:
    body = alert()
    body.update(fields)
    return notification([body])


@pytest.mark.parametrize(
    ("body", "field"),
    [
        # Alertmanager's "no time" (the firing endsAt) as a start time.
        (_with(startsAt="0001-01-01T00:00:00Z"), "alerts.0.startsAt"),
        # Within datetime's range as written, past it once converted to UTC.
        (_with(startsAt="9999-12-31T23:59:59-14:00"), "alerts.0.startsAt"),
        (_with(startsAt="0001-01-01T00:00:00+14:00"), "alerts.0.startsAt"),
        (_with(endsAt="9999-12-31T23:59:59-01:00"), "alerts.0.endsAt"),
    ],
    ids=["zero-start", "start-past-9999", "start-before-year-1", "end-past-9999"],
)
def test_a_time_that_is_no_real_instant_is_a_400_naming_the_field(
    client: httpx.Client, db: Database, body: dict[str, Any], field: str
) -> None:
    response = client.post(HOOK, json=body)

    assert response.status_code == 400, response.text
    assert response.json()["field"] == field
    assert counts(db)["incidents"] == 0


def test_a_truncated_alerts_count_past_any_integer_column_is_a_400(
    client: httpx.Client, db: Database
) -> None:
    response = client.post(HOOK, json=notification([alert()], truncated=2**40))

    assert response.status_code == 400, response.text
    assert response.json()["field"] == "truncatedAlerts"
    assert counts(db)["incidents"] == 0


@pytest.mark.parametrize(
    "where",
    ["label value", "label name", "annotation", "receiver"],
)
def test_a_nul_character_is_a_400_on_every_database(
    client: httpx.Client, db: Database, where: str
) -> None:
    # PostgreSQL cannot store U+0000 in text or jsonb; SQLite can. Both must answer alike.
    body = notification([alert(rack="r\x00ck")])
    if where == "label name":
        body = notification([alert(**{"ra\x00ck": "r1"})])
    elif where == "annotation":
        body = notification([alert()])
        body["alerts"][0]["annotations"]["summary"] = "GPU \x00 fell off the bus"
    elif where == "receiver":
        body = notification([alert()], receiver="runbook\x00bot")

    response = client.post(HOOK, json=body)

    assert response.status_code == 400, response.text
    assert "NUL" in response.json()["error"] or "\\x00" in response.json()["error"]
    assert counts(db)["incidents"] == 0


@pytest.mark.parametrize(
    "path",
    [
        "/api/incidents/INC-\u00b2",  # '²' passes str.isdigit() but is no number for int()
        "/api/incidents/\u00b2/steps",
        "/api/incidents/INC-99999999999999999999",  # past PostgreSQL's integer
        "/api/incidents/99999999999999999999/postmortem",
    ],
)
def test_an_incident_number_that_is_no_incident_is_a_404_with_the_form(
    client: httpx.Client, path: str
) -> None:
    response = client.get(path)

    assert response.status_code == 404, response.text
    assert "INC-" in response.json()["error"]


def test_a_limit_that_is_no_ascii_number_is_a_400_with_the_range(client: httpx.Client) -> None:
    response = client.get("/api/incidents", params={"limit": "\u00b2"})

    assert response.status_code == 400, response.text
    assert "limit must be a number from 1 to 1000" in response.json()["error"]


def test_a_decision_on_an_incident_number_past_any_integer_is_a_404(
    serve: Callable[..., httpx.Client], db: Database
) -> None:
    settings = load_settings(people={"alice": {"roles": ["responder"]}})
    client = serve(people={"alice": {"roles": ["responder"]}})
    response = client.post(
        "/api/incidents/INC-99999999999999999999/steps/cordon/approve",
        json={},
        headers=people.bearer(db, settings, "alice"),
    )

    assert response.status_code == 404, response.text


@pytest.mark.parametrize(
    "query", ["severity=a%00", "status=open%00", "severity=critical&status=%00"]
)
def test_a_nul_in_a_list_filter_is_a_400_naming_the_parameter(
    client: httpx.Client, query: str
) -> None:
    response = client.get(f"/api/incidents?{query}")

    assert response.status_code == 400, response.text
    assert "query parameter" in response.json()["error"]

"""Statuses, severities and step states are StrEnums in Python and the same plain strings
in the database and in JSON as before (no migration), on SQLite and PostgreSQL."""

from __future__ import annotations

import httpx
import pytest
from sqlalchemy import select, text, update
from sqlalchemy.exc import StatementError

from bot.db import Database
from bot.incidents.lifecycle import AlertStatus, Severity, Status
from bot.incidents.models import Alert, Incident
from tests.support.payloads import fixture


def test_an_incident_reads_back_as_enums_and_is_stored_and_answered_as_the_same_strings(
    client: httpx.Client, db: Database
) -> None:
    assert client.post("/webhooks/alertmanager", json=fixture("xid79-firing.json")).is_success

    with db.session() as session:
        incident = session.scalars(select(Incident)).one()
        alert = session.scalars(select(Alert)).one()
        stored = session.execute(text("SELECT status, severity FROM incidents")).one()
        stored_alert = session.execute(text("SELECT status, severity FROM alerts")).one()
    answered = client.get("/api/incidents/INC-1").json()

    assert (incident.status, incident.severity) == (Status.OPEN, Severity.CRITICAL)
    assert type(incident.status) is Status and type(alert.status) is AlertStatus
    assert tuple(stored) == ("open", "critical")
    assert tuple(stored_alert) == ("firing", "critical")
    assert (answered["status"], answered["severity"]) == ("open", "critical")
    assert answered["alerts"][0]["status"] == "firing"


def test_a_status_that_is_no_member_is_refused_before_it_is_written(
    client: httpx.Client, db: Database
) -> None:
    assert client.post("/webhooks/alertmanager", json=fixture("xid79-firing.json")).is_success

    with pytest.raises(StatementError) as refused, db.transaction() as session:
        session.execute(update(Incident).values(status="on fire"))
    with db.session() as session:
        stored = session.execute(text("SELECT status FROM incidents")).scalar_one()

    assert "'on fire' is not a valid Status" in str(refused.value)
    assert stored == "open"

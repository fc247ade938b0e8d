"""The read API, health and metrics, through the real app on loopback."""

from __future__ import annotations

from datetime import timedelta

import httpx

from bot.clock import FrozenClock
from bot.db import Database
from bot.incidents import log
from bot.incidents import service as incidents
from bot.runbooks.models import StepRun
from tests.support.payloads import alert, fixture, notification


def _seed(client: httpx.Client) -> None:
    client.post("/webhooks/alertmanager", json=fixture("xid79-firing.json"))
    warm = alert(alertname="GPUHighTemperature", severity="warning", host="gpu-node-05")
    client.post("/webhooks/alertmanager", json=notification([warm]))
    info = alert(alertname="GPULowUtilization", severity="info", host="gpu-node-09")
    client.post("/webhooks/alertmanager", json=notification([info]))


def test_incident_list_is_newest_first_and_filters_by_status_and_severity(
    client: httpx.Client,
) -> None:
    _seed(client)

    everything = client.get("/api/incidents").json()["incidents"]
    critical = client.get("/api/incidents", params={"severity": "critical"}).json()["incidents"]
    two = client.get("/api/incidents?severity=critical,info&status=open").json()["incidents"]
    resolved = client.get("/api/incidents", params={"status": "resolved"}).json()["incidents"]

    assert [i["id"] for i in everything] == ["INC-3", "INC-2", "INC-1"]
    assert [i["id"] for i in critical] == ["INC-1"]
    assert [i["id"] for i in two] == ["INC-3", "INC-1"]
    assert resolved == []


def test_incident_list_filters_take_the_consoles_words_and_refuse_unknown_ones(
    client: httpx.Client, db: Database, clock: FrozenClock
) -> None:
    _seed(client)
    with db.transaction() as session:
        incidents.resolve(
            session, 3, actor=log.Actor.human("alice"), at=clock.now(), disposition="idle"
        )

    def ids(query: str) -> list[str]:
        response = client.get(f"/api/incidents?{query}")
        assert response.status_code == 200, response.text
        return [i["id"] for i in response.json()["incidents"]]

    unknown = client.get("/api/incidents?status=open,bogus")
    crit = client.get("/api/incidents?severity=crit")

    assert ids("status=active") == ["INC-2", "INC-1"]
    assert ids("status=all") == ["INC-3", "INC-2", "INC-1"]
    assert ids("status=active&severity=all") == ["INC-2", "INC-1"]
    assert (unknown.status_code, unknown.json()) == (
        400,
        {
            "error": "query parameter status: unknown status 'bogus': use one of active, all, "
            "open, acknowledged, resolved, closed",
            "field": "status",
        },
    )
    assert (crit.status_code, crit.json()["error"]) == (
        400,
        "query parameter severity: unknown severity 'crit': use one of all, critical, "
        "warning, info",
    )


def test_incident_detail_carries_alerts_and_log_and_unknown_numbers_get_404(
    client: httpx.Client,
) -> None:
    _seed(client)

    body = client.get("/api/incidents/INC-1").json()
    missing = client.get("/api/incidents/77")
    nonsense = client.get("/api/incidents/gpu-node-02")

    assert body["id"] == "INC-1"
    assert [a["fingerprint"] for a in body["alerts"]] == ["e05db4f7217eb7b7"]
    assert [e["seq"] for e in body["log"]] == [1, 2]
    assert body["log"][0]["actor"] == {
        "kind": "alertmanager",
        "id": "bot",
        "name": "Alertmanager (bot)",
    }
    assert missing.status_code == 404
    assert "INC-77 does not exist" in missing.json()["error"]
    assert nonsense.status_code == 404
    assert "write it like INC-42" in nonsense.json()["error"]


def test_bad_limit_is_a_400_with_the_allowed_range(client: httpx.Client) -> None:
    response = client.get("/api/incidents", params={"limit": "0"})

    assert response.status_code == 400
    assert "limit must be a number from 1 to 1000" in response.json()["error"]


def test_health_and_readiness_report_a_migrated_database(client: httpx.Client) -> None:
    assert client.get("/healthz").json() == {"status": "ok"}
    assert client.get("/readyz").json() == {"status": "ready"}


def test_metrics_count_requests_alerts_and_active_incidents_by_severity(
    client: httpx.Client, db: Database
) -> None:
    _seed(client)
    client.post("/webhooks/alertmanager", json=fixture("xid79-firing.json"))  # a repeat
    client.post(
        "/webhooks/alertmanager", content=b"{", headers={"content-type": "application/json"}
    )

    text = client.get("/metrics").text

    assert (
        'runbook_bot_http_requests_total{method="POST",route="/webhooks/alertmanager",'
        'status="200"} 4.0'
    ) in text
    assert (
        'runbook_bot_http_requests_total{method="POST",route="/webhooks/alertmanager",'
        'status="400"} 1.0'
    ) in text
    assert 'runbook_bot_alerts_ingested_total{outcome="new"} 3.0' in text
    assert 'runbook_bot_alerts_ingested_total{outcome="repeat"} 1.0' in text
    assert 'runbook_bot_incidents_active{severity="critical"} 1.0' in text
    assert 'runbook_bot_incidents_active{severity="warning"} 1.0' in text
    assert 'runbook_bot_incidents_active{severity="info"} 1.0' in text
    assert "runbook_bot_ingest_seconds_count 4.0" in text


def test_metrics_report_mtta_mttr_recent_incidents_and_step_results_leaving_drills_out(
    client: httpx.Client, db: Database, clock: FrozenClock
) -> None:
    client.post("/webhooks/alertmanager", json=fixture("xid79-firing.json"))  # INC-1
    drill = alert(host="gpu-node-07", runbook_bot_drill="xid79-rehearsal")
    client.post("/webhooks/alertmanager", json=notification([drill]))  # INC-2, a drill
    opened = clock.now()
    with db.transaction() as session:
        for number in (1, 2):  # the drill is answered at once: it must not pull MTTA down
            at = opened + timedelta(minutes=5 if number == 1 else 1)
            incidents.acknowledge(session, number, actor=log.Actor.human("alice"), at=at)
        incidents.resolve(
            session,
            1,
            actor=log.Actor.human("alice"),
            at=opened + timedelta(minutes=20),
            disposition="power-cycled",
        )
        session.add_all(
            StepRun(
                incident_number=1,
                step_id=step,
                attempt=1,
                state=state,
                kind="action",
                action="k8s.cordon",
                params={},
                params_hash="h",
                proposed_at=opened,
                finished_at=opened + timedelta(minutes=minutes),
            )  # fmt: skip
            for step, state, minutes in (("a", "succeeded", 6), ("b", "failed", 7))
        )
    clock.set(opened + timedelta(hours=1))

    text = client.get("/metrics").text

    assert 'runbook_bot_mtta_seconds{severity="critical"} 300.0' in text
    assert 'runbook_bot_mttr_seconds{severity="critical"} 1200.0' in text
    assert 'runbook_bot_incidents_recent{status="resolved"} 1.0' in text
    assert 'runbook_bot_incidents_recent{status="acknowledged"} 0.0' in text  # drill left out
    assert 'runbook_bot_step_runs_recent{kind="action",state="succeeded"} 1.0' in text
    assert 'runbook_bot_step_runs_recent{kind="action",state="failed"} 1.0' in text

    clock.set(opened + timedelta(days=2))  # a day later the runs are out of the window
    assert "runbook_bot_step_runs_recent{" not in client.get("/metrics").text

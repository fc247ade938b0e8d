"""The Alertmanager webhook contract: what each notification does and what each bad input gets.

Every test runs on SQLite and on PostgreSQL against the real app on loopback.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from datetime import timedelta

import httpx
import pytest

from bot.clock import FrozenClock
from bot.db import Database
from tests.support.payloads import alert, fixture, notification, resolved
from tests.support.rows import counts, log_types, verifies

HOOK = "/webhooks/alertmanager"


def post(client: httpx.Client, body: dict[str, object], **kwargs: object) -> httpx.Response:
    return client.post(HOOK, json=body, **kwargs)  # type: ignore[arg-type]


def incident(client: httpx.Client, number: int) -> dict[str, object]:
    response = client.get(f"/api/incidents/{number}")
    assert response.status_code == 200, response.text
    body: dict[str, object] = response.json()
    return body


# --- what notifications do ---------------------------------------------------------------


def test_real_alertmanager_firing_payload_opens_one_critical_incident(
    client: httpx.Client, db: Database
) -> None:
    response = post(client, fixture("xid79-firing.json"))

    assert response.status_code == 200
    assert response.json()["incident"] == "INC-1"
    assert response.json()["opened"] is True
    body = incident(client, 1)
    assert body["severity"] == "critical"
    assert body["status"] == "open"
    assert body["title"] == "gpu-node-02 GPU 5 XID 79"
    assert body["group_labels"] == {"Hostname": "gpu-node-02", "alertname": "GPUXIDError"}
    [stored] = body["alerts"]  # type: ignore[misc]
    assert stored["fingerprint"] == "e05db4f7217eb7b7"
    assert stored["labels"]["xid"] == "79"
    assert stored["starts_at"] == "2026-11-29T22:05:22.257000Z"
    assert stored["ends_at"] is None
    assert log_types(db, 1) == ["incident.opened", "alert.firing"]
    assert verifies(db, 1)


def test_repeat_of_a_known_alert_only_bumps_last_received(
    client: httpx.Client, db: Database, clock: FrozenClock
) -> None:
    post(client, fixture("xid79-firing.json"))
    clock.advance(timedelta(minutes=5))
    response = post(client, fixture("xid79-firing.json"))

    assert response.json()["alerts"] == {"new": 0, "repeat": 1, "resolved": 0, "refired": 0}
    [stored] = incident(client, 1)["alerts"]  # type: ignore[misc]
    assert stored["receive_count"] == 2
    assert stored["last_received_at"] == "2026-11-29T22:10:30Z"
    assert stored["first_received_at"] == "2026-11-29T22:05:30Z"
    assert counts(db) == {"incidents": 1, "alerts": 1, "log": 2}


def test_resolved_critical_alert_is_logged_but_the_incident_waits_for_a_human(
    client: httpx.Client, db: Database
) -> None:
    post(client, fixture("xid79-firing.json"))
    response = post(client, fixture("xid79-resolved.json"))

    assert response.json()["alerts"]["resolved"] == 1
    body = incident(client, 1)
    assert body["status"] == "open"
    assert body["alerts_cleared_at"] is not None
    assert body["alerts"][0]["status"] == "resolved"  # type: ignore[index]
    assert body["alerts"][0]["ends_at"] == "2026-11-29T22:05:29.257000Z"  # type: ignore[index]
    assert log_types(db, 1)[-2:] == ["alert.resolved", "incident.alerts_cleared"]


def test_warning_incident_resolves_itself_when_every_alert_has_cleared(
    client: httpx.Client, db: Database
) -> None:
    hot = [alert(alertname="GPUHighTemperature", severity="warning", gpu=i) for i in (1, 2)]
    group = {"alertname": "GPUHighTemperature", "Hostname": "gpu-node-02"}
    post(client, notification(hot, group=group))

    post(client, notification([resolved(hot[0]), hot[1]], group=group))
    assert incident(client, 1)["status"] == "open"

    response = post(client, notification([resolved(a) for a in hot], group=group))
    assert response.json()["resolved"] is True
    body = incident(client, 1)
    assert body["status"] == "resolved"
    assert body["resolved_by"] == "runbook-bot"
    assert log_types(db, 1)[-1] == "incident.resolved"


def test_alerts_of_one_group_join_one_incident_and_other_groups_open_their_own(
    client: httpx.Client, db: Database
) -> None:
    node2 = [alert(gpu=i) for i in range(3)]
    post(client, notification(node2[:2]))
    response = post(client, notification(node2))  # the group grew by one alert
    post(client, notification([alert(host="gpu-node-07")]))

    assert response.json() == {
        "incident": "INC-1",
        "opened": False,
        "reopened": False,
        "resolved": False,
        "alerts": {"new": 1, "repeat": 2, "resolved": 0, "refired": 0},
    }
    assert len(incident(client, 1)["alerts"]) == 3  # type: ignore[arg-type]
    assert incident(client, 2)["group_labels"]["Hostname"] == "gpu-node-07"  # type: ignore[index]
    assert counts(db)["incidents"] == 2


def test_regrouped_alerts_stay_with_their_incident_and_the_log_says_so(
    client: httpx.Client, db: Database
) -> None:
    alerts = [alert(gpu=i) for i in range(2)]
    post(client, notification(alerts))
    # Alertmanager's route changed to group_by [Hostname]: same alerts, new groupKey.
    response = post(client, notification(alerts, group={"Hostname": "gpu-node-02"}))

    assert response.json()["incident"] == "INC-1"
    assert response.json()["alerts"]["repeat"] == 2
    body = incident(client, 1)
    assert body["group_key"] == '{}:{Hostname="gpu-node-02"}'
    assert log_types(db, 1)[-1] == "incident.regrouped"
    assert counts(db)["incidents"] == 1


def test_alert_firing_again_within_the_reopen_window_reopens_the_incident(
    client: httpx.Client, db: Database, clock: FrozenClock
) -> None:
    first = alert(alertname="GPUHighTemperature", severity="warning")
    group = {"alertname": "GPUHighTemperature", "Hostname": "gpu-node-02"}
    post(client, notification([first], group=group))
    post(client, notification([resolved(first)], group=group))
    assert incident(client, 1)["status"] == "resolved"

    clock.advance(timedelta(hours=3))
    again = alert(
        alertname="GPUHighTemperature", severity="warning", starts_at="2026-11-30T01:00:00Z"
    )
    response = post(client, notification([again], group=group))

    assert response.json()["incident"] == "INC-1"
    assert response.json()["reopened"] is True
    body = incident(client, 1)
    assert body["status"] == "open"
    assert body["reopen_count"] == 1
    assert body["resolved_at"] is None
    assert log_types(db, 1)[-2:] == ["incident.reopened", "alert.firing"]
    assert verifies(db, 1)


def test_alert_firing_again_after_the_window_opens_a_new_incident_that_points_back(
    client: httpx.Client, db: Database, clock: FrozenClock
) -> None:
    first = alert(alertname="GPUHighTemperature", severity="warning")
    group = {"alertname": "GPUHighTemperature", "Hostname": "gpu-node-02"}
    post(client, notification([first], group=group))
    post(client, notification([resolved(first)], group=group))

    clock.advance(timedelta(hours=25))
    again = alert(
        alertname="GPUHighTemperature", severity="warning", starts_at="2026-11-30T23:00:00Z"
    )
    response = post(client, notification([again], group=group))

    assert response.json()["incident"] == "INC-2"
    assert response.json()["opened"] is True
    assert incident(client, 1)["status"] == "resolved"
    opened = incident(client, 2)["log"][0]  # type: ignore[index]
    assert opened["type"] == "incident.opened"
    assert opened["data"]["follows"] == "INC-1"


def test_repeat_after_a_human_resolved_does_not_reopen(client: httpx.Client, db: Database) -> None:
    from bot.clock import SystemClock
    from bot.incidents import Actor, service

    post(client, fixture("xid79-firing.json"))
    with db.transaction() as session:
        service.resolve(
            session,
            1,
            actor=Actor.human("alice"),
            at=SystemClock().now(),
            disposition="GPU 5 reset; node back in service",
        )
    response = post(client, fixture("xid79-firing.json"))  # Alertmanager's repeat_interval

    assert response.json()["incident"] == "INC-1"
    assert response.json()["reopened"] is False
    assert incident(client, 1)["status"] == "resolved"


def test_truncated_alerts_are_recorded_on_the_incident(client: httpx.Client, db: Database) -> None:
    response = post(client, notification([alert()], truncated=37))

    assert response.status_code == 200
    assert incident(client, 1)["truncated_alerts"] == 37
    assert log_types(db, 1)[-1] == "incident.alerts_truncated"


def test_a_critical_alert_joining_a_warning_incident_raises_its_severity(
    client: httpx.Client, db: Database
) -> None:
    group = {"Hostname": "gpu-node-02"}
    post(
        client,
        notification([alert(alertname="GPUHighTemperature", severity="warning")], group=group),
    )
    post(
        client,
        notification(
            [
                alert(alertname="GPUHighTemperature", severity="warning"),
                alert(alertname="GPUXIDError", severity="critical"),
            ],
            group=group,
        ),
    )

    assert incident(client, 1)["severity"] == "critical"
    assert "incident.severity_raised" in log_types(db, 1)


def test_unknown_fields_from_newer_alertmanagers_are_ignored(client: httpx.Client) -> None:
    body = fixture("xid79-firing.json")
    body["notification_reason"] = "repeat"
    body["routeLabels"] = {"team": "gpu"}
    body["alerts"][0]["silencedBy"] = []

    assert post(client, body).status_code == 200


# --- bad input: a clear 4xx and nothing stored -------------------------------------------

BAD_BODIES = {
    "not json": (b"{not json", 400, "body is not valid JSON"),
    "wrong version": (
        json.dumps({**fixture("xid79-firing.json"), "version": "3"}).encode(),
        400,
        "field version",
    ),
    "missing groupKey": (
        json.dumps(
            {k: v for k, v in fixture("xid79-firing.json").items() if k != "groupKey"}
        ).encode(),
        400,
        "field groupKey: Field required",
    ),
    "bad startsAt": (
        json.dumps(
            {
                **fixture("xid79-firing.json"),
                "alerts": [{**fixture("xid79-firing.json")["alerts"][0], "startsAt": "yesterday"}],
            }
        ).encode(),
        400,
        "field alerts.0.startsAt",
    ),
    "no alerts": (
        json.dumps({**fixture("xid79-firing.json"), "alerts": []}).encode(),
        400,
        "field alerts",
    ),
}


@pytest.mark.parametrize("case", list(BAD_BODIES))
def test_invalid_payload_gets_400_naming_the_field_and_stores_nothing(
    client: httpx.Client, db: Database, case: str
) -> None:
    body, status, text = BAD_BODIES[case]
    response = client.post(HOOK, content=body, headers={"content-type": "application/json"})

    assert response.status_code == status
    assert text in response.json()["error"]
    assert counts(db) == {"incidents": 0, "alerts": 0, "log": 0}


def test_non_json_content_type_gets_415_and_stores_nothing(
    client: httpx.Client, db: Database
) -> None:
    response = client.post(
        HOOK,
        content=json.dumps(fixture("xid79-firing.json")),
        headers={"content-type": "text/plain"},
    )

    assert response.status_code == 415
    assert "send application/json" in response.json()["error"]
    assert counts(db)["incidents"] == 0


def test_body_above_the_limit_gets_413_and_stores_nothing(
    serve: Callable[..., httpx.Client], db: Database
) -> None:
    client = serve(max_body_bytes=2048)
    big = notification([alert(gpu=i) for i in range(20)])

    response = post(client, big)

    assert response.status_code == 413
    assert "larger than 2048 bytes" in response.json()["error"]
    assert counts(db)["incidents"] == 0
    assert post(client, notification([alert()])).status_code == 200


def test_chunked_body_above_the_limit_gets_413(
    serve: Callable[..., httpx.Client], db: Database
) -> None:
    client = serve(max_body_bytes=2048)
    payload = json.dumps(notification([alert(gpu=i) for i in range(20)])).encode()

    def chunks() -> object:
        for start in range(0, len(payload), 512):
            yield payload[start : start + 512]

    response = client.post(
        HOOK,
        content=chunks(),
        headers={"content-type": "application/json"},  # type: ignore[arg-type]
    )

    assert response.status_code == 413
    assert counts(db)["incidents"] == 0


@pytest.mark.parametrize(
    "header",
    [None, "Bearer wrong", "Basic " + base64.b64encode(b"am:s3cret").decode(), "s3cret"],
)
def test_bearer_auth_refuses_missing_or_wrong_credentials_with_401(
    serve: Callable[..., httpx.Client], db: Database, header: str | None
) -> None:
    client = serve(webhook_token="s3cret")
    headers = {"authorization": header} if header else {}

    response = post(client, fixture("xid79-firing.json"), headers=headers)

    assert response.status_code == 401
    assert "wants a bearer token" in response.json()["error"]
    assert response.headers["www-authenticate"].startswith("Bearer")
    assert counts(db)["incidents"] == 0
    ok = post(client, fixture("xid79-firing.json"), headers={"authorization": "Bearer s3cret"})
    assert ok.status_code == 200


def test_basic_auth_accepts_the_right_pair_only(
    serve: Callable[..., httpx.Client], db: Database
) -> None:
    client = serve(webhook_username="am", webhook_password="pw")

    wrong = post(client, fixture("xid79-firing.json"), auth=("am", "nope"))
    right = post(client, fixture("xid79-firing.json"), auth=("am", "pw"))

    assert wrong.status_code == 401
    assert right.status_code == 200
    assert counts(db)["incidents"] == 1


def test_token_file_is_read_for_bearer_auth(
    serve: Callable[..., httpx.Client], tmp_path: object
) -> None:
    from pathlib import Path

    token = Path(str(tmp_path)) / "token"
    token.write_text("from-a-secret\n")
    client = serve(webhook_token_file=token)

    assert post(client, fixture("xid79-firing.json")).status_code == 401
    ok = post(
        client, fixture("xid79-firing.json"), headers={"authorization": "Bearer from-a-secret"}
    )
    assert ok.status_code == 200

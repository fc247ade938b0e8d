"""End to end with the real Alertmanager on loopback.

Alerts are POSTed to Alertmanager's own API, as Prometheus does; its routing, grouping and
webhook notifier deliver them to our bot running under uvicorn, and the tests read the
effect back through the bot's HTTP API. Runs on SQLite and PostgreSQL.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from bot.clock import as_utc
from tests.support import alertmanager as am
from tests.support.alertmanager import Alertmanager

TOKEN = "s3cret"
SUMMARY = "gpu-node-02 GPU 5 XID 79"

StartAlertmanager = Callable[[httpx.Client, str], Alertmanager]


@pytest.fixture
def alertmanager(serve: Callable[..., httpx.Client], tmp_path: Path) -> Iterator[StartAlertmanager]:
    """Start Alertmanager pointed at a running bot; stopped before the bot is."""
    am.require_binary()
    with ExitStack() as stack:

        def start(bot: httpx.Client, token: str) -> Alertmanager:
            webhook = str(bot.base_url.join("/webhooks/alertmanager"))
            return stack.enter_context(am.running(webhook, token, tmp_path / "alertmanager"))

        yield start


def gpu_labels(severity: str = "critical") -> dict[str, str]:
    return {
        "alertname": "GPUXIDError",
        "Hostname": "gpu-node-02",
        "gpu": "5",
        "severity": severity,
        "xid": "79",
    }


def gpu_alert(
    severity: str, starts_at: datetime, ends_at: datetime | None = None
) -> dict[str, Any]:
    return am.api_alert(
        gpu_labels(severity), {"summary": SUMMARY}, starts_at=starts_at, ends_at=ends_at
    )


def started_a_minute_ago() -> datetime:
    # Early enough that a resolution with endsAt = now - 1 s still ends after it starts.
    return (datetime.now(UTC) - timedelta(minutes=1)).replace(microsecond=0)


def incident_detail(bot: httpx.Client, number: int) -> dict[str, Any]:
    response = bot.get(f"/api/incidents/{number}")
    assert response.status_code == 200, response.text
    detail: dict[str, Any] = response.json()
    return detail


def incidents(bot: httpx.Client) -> list[dict[str, Any]]:
    response = bot.get("/api/incidents")
    assert response.status_code == 200, response.text
    rows: list[dict[str, Any]] = response.json()["incidents"]
    return rows


def wait_for_incident(bot: httpx.Client, manager: Alertmanager) -> dict[str, Any]:
    rows = manager.wait_for(lambda: incidents(bot), "the bot to store an incident")
    assert len(rows) == 1, rows
    return incident_detail(bot, rows[0]["number"])


def wait_for_alert_status(
    bot: httpx.Client, manager: Alertmanager, number: int, status: str
) -> dict[str, Any]:
    def check() -> dict[str, Any] | None:
        detail = incident_detail(bot, number)
        return detail if [a["status"] for a in detail["alerts"]] == [status] else None

    return manager.wait_for(check, f"INC-{number}'s alert to become {status}")


def log_types(detail: dict[str, Any]) -> list[str]:
    return [entry["type"] for entry in detail["log"]]


def test_alert_posted_to_alertmanager_opens_an_incident(
    serve: Callable[..., httpx.Client], alertmanager: StartAlertmanager
) -> None:
    bot = serve(webhook_token=TOKEN)
    manager = alertmanager(bot, TOKEN)
    starts_at = started_a_minute_ago()

    manager.post_alerts([gpu_alert("critical", starts_at)])

    incident = wait_for_incident(bot, manager)
    assert incident["status"] == "open"
    assert incident["severity"] == "critical"
    assert incident["title"] == SUMMARY
    assert incident["receiver"] == am.RECEIVER
    assert incident["group_labels"] == {"alertname": "GPUXIDError", "Hostname": "gpu-node-02"}
    [alert] = incident["alerts"]
    assert alert["status"] == "firing"
    assert alert["labels"] == gpu_labels("critical")
    assert alert["annotations"] == {"summary": SUMMARY}
    assert as_utc(datetime.fromisoformat(alert["starts_at"])) == starts_at
    assert alert["ends_at"] is None  # Alertmanager's zero time while firing
    assert log_types(incident)[:2] == ["incident.opened", "alert.firing"]
    opened = incident["log"][0]
    assert opened["actor"]["kind"] == "alertmanager"
    assert opened["actor"]["id"] == am.RECEIVER


@pytest.mark.parametrize(
    ("severity", "status_after", "closing_entry", "absent_entry"),
    [
        pytest.param(
            "critical", "open", "incident.alerts_cleared", "incident.resolved", id="critical"
        ),
        pytest.param(
            "warning", "resolved", "incident.resolved", "incident.alerts_cleared", id="warning"
        ),
    ],
)
def test_alertmanager_resolution_reaches_the_bot(
    serve: Callable[..., httpx.Client],
    alertmanager: StartAlertmanager,
    severity: str,
    status_after: str,
    closing_entry: str,
    absent_entry: str,
) -> None:
    bot = serve(webhook_token=TOKEN)
    manager = alertmanager(bot, TOKEN)
    starts_at = started_a_minute_ago()
    manager.post_alerts([gpu_alert(severity, starts_at)])
    number = wait_for_incident(bot, manager)["number"]

    ended = datetime.now(UTC) - timedelta(seconds=1)
    manager.post_alerts([gpu_alert(severity, starts_at, ends_at=ended)])

    incident = wait_for_alert_status(bot, manager, number, "resolved")
    assert incident["severity"] == severity
    assert incident["status"] == status_after
    [alert] = incident["alerts"]
    assert alert["ends_at"] is not None
    types = log_types(incident)
    assert types[:2] == ["incident.opened", "alert.firing"]
    assert "alert.resolved" in types
    assert closing_entry in types
    assert absent_entry not in types
    assert len(incidents(bot)) == 1


def test_alertmanager_with_wrong_token_is_refused_and_nothing_is_stored(
    serve: Callable[..., httpx.Client], alertmanager: StartAlertmanager
) -> None:
    bot = serve(webhook_token=TOKEN)
    manager = alertmanager(bot, "not-the-token")

    manager.post_alerts([gpu_alert("critical", started_a_minute_ago())])

    manager.wait_for(
        lambda: manager.metric("alertmanager_notifications_failed_total", integration="webhook"),
        "Alertmanager to count a failed webhook notification",
    )

    def refusals() -> float:
        response = bot.get("/metrics")
        assert response.status_code == 200, response.text
        return am.sample(
            response.text,
            "runbook_bot_http_requests_total",
            route="/webhooks/alertmanager",
            status="401",
        )

    manager.wait_for(refusals, "the bot to count a 401 on its webhook")
    assert incidents(bot) == []
    assert bot.get("/api/incidents/1").status_code == 404

"""deploy/alertmanager.yaml: Debian's amtool accepts it; every alert a shipped runbook
answers reaches the `runbook-bot` receiver, grouped as that runbook groups its incidents;
the info and self-monitoring alerts do not; the receiver is what the bot's webhook needs;
and a NotReady node can inhibit its GPU alerts because they carry its `node`.

End to end, Debian's real Alertmanager runs the shipped file (only the bot's URL, the token
file's path and the group timings changed) in front of the real bot with the shipped
runbooks: alerts POSTed to Alertmanager's API open one incident per runbook group, with the
right runbook, through the token file; and a NotReady node's GPU alert is inhibited."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from bot.clock import FrozenClock
from bot.config import load_settings
from bot.db import Database
from bot.runbooks import catalog as catalogs
from bot.runbooks.models import IncidentRunbook
from tests.deploy.conftest import (
    ALERTMANAGER,
    Expected,
    Routing,
    alert_rules,
    expected_alerts,
    load,
    run,
)
from tests.support import alertmanager as am
from tests.support import server

RUNBOOKS = Path(__file__).resolve().parents[2] / "runbooks"
BOT = "runbook-bot"


def _runbooks() -> list[dict[str, Any]]:
    return [load(path) for path in sorted(RUNBOOKS.glob("*.yaml"))]


def _amtool_receiver(amtool: str, labels: dict[str, str]) -> str:
    pairs = [f"{name}={value}" for name, value in sorted(labels.items())]
    tested = run(amtool, "config", "routes", "test", f"--config.file={ALERTMANAGER}", *pairs)
    assert tested.returncode == 0, tested.stdout + tested.stderr
    return tested.stdout.strip()


def test_amtool_check_config_accepts_it(amtool: str) -> None:
    checked = run(amtool, "check-config", ALERTMANAGER)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "SUCCESS" in checked.stdout
    assert " - 2 inhibit rules" in checked.stdout


def test_amtool_refuses_a_route_to_a_receiver_that_does_not_exist(
    amtool: str, tmp_path: Path
) -> None:
    """The check can fail: a typo in the bot's receiver name is caught."""
    broken = tmp_path / "alertmanager.yaml"
    broken.write_text(
        ALERTMANAGER.read_text().replace("- receiver: runbook-bot", "- receiver: runbook-b0t")
    )
    checked = run(amtool, "check-config", broken)
    assert checked.returncode == 1
    assert 'undefined receiver "runbook-b0t"' in checked.stdout + checked.stderr


def test_the_webhook_receiver_keeps_resolutions_all_alerts_and_a_token_file() -> None:
    (receiver,) = [r for r in load(ALERTMANAGER)["receivers"] if r["name"] == BOT]
    (webhook,) = receiver["webhook_configs"]
    assert webhook["url"].endswith("/webhooks/alertmanager")
    assert webhook["send_resolved"] is True
    assert webhook["max_alerts"] == 0
    # A file, so the token lives in a Secret and never in this config.
    assert set(webhook["http_config"]["authorization"]) == {"credentials_file"}


def test_every_alert_a_runbook_answers_reaches_the_bot_grouped_as_the_runbook_groups(
    amtool: str, routing: Routing
) -> None:
    for runbook in _runbooks():
        for alertname in runbook["match"].get("alerts", []):
            labels = {"alertname": alertname}
            route = routing.route(labels)
            assert _amtool_receiver(amtool, labels) == route.receiver == BOT, alertname
            assert list(route.group_by) == _alertmanager_group_by(runbook), alertname


def _alertmanager_group_by(runbook: dict[str, Any]) -> list[str]:
    """A runbook's labels; a topology level (`domain.row`) is no alert label: the bot
    correlates by it, so Alertmanager batches by alertname and a row's alerts come in one
    notification."""
    labels = [key for key in runbook["group_by"] if not key.startswith("domain.")]
    return labels or ["alertname"]


def test_info_and_self_monitoring_alerts_stay_away_from_the_bot(
    amtool: str, routing: Routing
) -> None:
    runbook_alerts = {a for rb in _runbooks() for a in rb["match"].get("alerts", [])}
    others = {rule["alert"] for rule in alert_rules()} - runbook_alerts
    assert others == {"GPUUtilizationLow", "RunbookBotTimersLate", "RunbookBotWorkerStalled"}
    for alertname in sorted(others):
        labels = {"alertname": alertname}
        assert _amtool_receiver(amtool, labels) == routing.route(labels).receiver != BOT


def test_each_expected_alert_routes_in_amtool_as_in_the_walk(amtool: str, routing: Routing) -> None:
    """The walk the ingest test relies on agrees with Alertmanager's own routing."""
    for expected in expected_alerts():
        labels = expected.labels
        assert _amtool_receiver(amtool, labels) == routing.route(labels).receiver, expected.id


def test_a_notready_node_inhibits_alerts_that_carry_its_node_label() -> None:
    (node_down,) = [
        rule
        for rule in load(ALERTMANAGER)["inhibit_rules"]
        if rule["source_matchers"] == ['alertname="KubeNodeNotReady"']
    ]
    assert node_down["equal"] == ["node"]
    (target,) = node_down["target_matchers"]
    targets = re.fullmatch(r'alertname=~"(.*)"', target)
    assert targets is not None
    inhibited = [e for e in expected_alerts() if re.fullmatch(targets[1], e.labels["alertname"])]
    assert {e.labels["alertname"] for e in inhibited} >= {
        "GPUXIDError",
        "GPUTemperatureHigh",
        "InfiniBandPortDown",
    }
    for expected in inhibited:
        labels = expected.labels
        assert labels.get("node") == labels.get("Hostname", labels.get("node")), expected.id
        assert labels.get("node"), f"{expected.id} has no node label: nothing could inhibit it"


def test_the_yaml_has_no_tabs_or_duplicate_keys() -> None:
    class Unique(yaml.SafeLoader):
        pass

    def mapping(loader: yaml.SafeLoader, node: yaml.MappingNode) -> dict[Any, Any]:
        keys = [loader.construct_object(key) for key, _ in node.value]
        assert len(keys) == len(set(keys)), f"duplicate keys at line {node.start_mark.line + 1}"
        return loader.construct_mapping(node)

    Unique.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, mapping)
    text = ALERTMANAGER.read_text(encoding="utf-8")
    assert "\t" not in text
    yaml.load(text, Loader=Unique)


# -- end to end: the real Alertmanager running the shipped file in front of the real bot ----
TOKEN = "am-to-bot-7f3c"


def _shipped_config(webhook_url: str, token_file: Path) -> dict[str, Any]:
    """deploy/alertmanager.yaml as shipped, but for the bot on loopback and a test's pace."""
    config: dict[str, Any] = load(ALERTMANAGER)
    (receiver,) = [r for r in config["receivers"] if r["name"] == BOT]
    (webhook,) = receiver["webhook_configs"]
    webhook["url"] = webhook_url
    webhook["http_config"]["authorization"]["credentials_file"] = str(token_file)
    (to_bot,) = [r for r in config["route"]["routes"] if r.get("receiver") == BOT]
    to_bot.update(group_wait="1s", group_interval="1s")
    return config


@pytest.fixture
def bot(db: Database, clock: FrozenClock, db_url: str) -> Iterator[httpx.Client]:
    """The bot on loopback with the shipped runbooks and a webhook token."""
    settings = load_settings(database_url=db_url, webhook_token=TOKEN, runbooks_dir=RUNBOOKS)
    with (
        server.running(settings, db, clock, catalog=catalogs.load(settings)) as url,
        httpx.Client(base_url=url, timeout=10) as client,
    ):
        yield client


@pytest.fixture
def shipped(bot: httpx.Client, tmp_path: Path) -> Iterator[am.Alertmanager]:
    """Debian's Alertmanager running deploy/alertmanager.yaml, notifying `bot`."""
    am.require_binary()
    token_file = tmp_path / "runbook-bot-token"
    token_file.write_text(TOKEN + "\n")
    webhook = str(bot.base_url.join("/webhooks/alertmanager"))
    with am.running(
        webhook,
        "unused: the token file is used",
        tmp_path / "alertmanager",
        document=_shipped_config(webhook, token_file),
    ) as manager:
        yield manager


def _firing(labels: dict[str, str], annotations: dict[str, str]) -> dict[str, Any]:
    started = (datetime.now(UTC) - timedelta(minutes=1)).replace(microsecond=0)
    return am.api_alert(labels, annotations, starts_at=started)


def _expected(alertname: str, **having: str) -> Expected:
    (found,) = [
        e
        for e in expected_alerts()
        if e.labels["alertname"] == alertname and having.items() <= e.labels.items()
    ]
    return found


def _incidents(bot: httpx.Client, count: int) -> list[dict[str, Any]] | None:
    response = bot.get("/api/incidents")
    assert response.status_code == 200, response.text
    rows: list[dict[str, Any]] = response.json()["incidents"]
    details = [bot.get(f"/api/incidents/{row['number']}").json() for row in rows]
    settled = len(rows) == count and all(len(d["alerts"]) == 2 for d in details)
    return details if settled else None


def _runbook(db: Database, number: int) -> str | None:
    with db.session() as session:
        frozen = session.get(IncidentRunbook, number)
        return frozen.runbook_id if frozen is not None else None


def test_the_shipped_config_opens_one_incident_per_runbook_group(
    shipped: am.Alertmanager, bot: httpx.Client, db: Database
) -> None:
    xid = _expected("GPUXIDError", window_size_in_ms="300000")
    second_gpu = {**xid.labels, "gpu": "4", "UUID": "GPU-66486582-0000-0000-0000-000000000004"}
    nfs = _expected("SharedFilesystemUnreachable", storage_kind="nfs")
    other_node = {**nfs.labels, "node": "gpu-node-05", "instance": "10.0.3.15:9100"}
    not_ready = _expected("KubeNodeNotReady")
    silent_bmc = _expected("BMCUnreachable")

    shipped.post_alerts(
        [
            _firing(xid.labels, xid.annotations),
            _firing(second_gpu, xid.annotations),
            _firing(nfs.labels, nfs.annotations),
            _firing(other_node, nfs.annotations),
            _firing(not_ready.labels, not_ready.annotations),
            _firing(silent_bmc.labels, silent_bmc.annotations),
        ]
    )

    details = shipped.wait_for(
        lambda: _incidents(bot, 3), "three incidents of two alerts each at the bot"
    )
    by_runbook = {_runbook(db, d["number"]): d for d in details}
    assert set(by_runbook) == {"gpu-xid", "storage-failure", "node-down"}
    assert by_runbook["gpu-xid"]["group_labels"] == {"Hostname": "gpu-node-02"}
    assert by_runbook["storage-failure"]["group_labels"] == {
        "storage": "nfs.storage.svc.cluster.local:/exports/datasets"
    }
    # node-down's route batches by alertname (the bot correlates by power feed): NotReady
    # and the silent BMC come in two notifications, and the bot joins them on the node.
    node_down = by_runbook["node-down"]
    assert set(node_down["group_labels"]) == {"alertname"}
    assert sorted(a["labels"]["alertname"] for a in node_down["alerts"]) == [
        "BMCUnreachable",
        "KubeNodeNotReady",
    ]
    assert {a["labels"]["node"] for a in node_down["alerts"]} == {"gpu-node-04"}
    assert all(d["receiver"] == BOT for d in details)
    assert (
        am.sample(
            httpx.get(f"{shipped.url}/metrics", timeout=am.HTTP_TIMEOUT).text,
            "alertmanager_notifications_failed_total",
            integration="webhook",
        )
        == 0
    )


def test_a_notready_node_inhibits_its_gpu_alert_at_the_real_alertmanager(
    shipped: am.Alertmanager, bot: httpx.Client
) -> None:
    not_ready = _expected("KubeNodeNotReady")
    node = not_ready.labels["node"]
    xid = _expected("GPUXIDError", window_size_in_ms="300000")
    same_node = {**xid.labels, "Hostname": node, "node": node}

    shipped.post_alerts(
        [_firing(not_ready.labels, not_ready.annotations), _firing(same_node, xid.annotations)]
    )

    def states() -> dict[str, dict[str, Any]] | None:
        response = httpx.get(f"{shipped.url}/api/v2/alerts", timeout=am.HTTP_TIMEOUT)
        response.raise_for_status()
        found = {a["labels"]["alertname"]: a["status"] for a in response.json()}
        return found if len(found) == 2 else None

    status = shipped.wait_for(states, "Alertmanager to hold both alerts")
    assert status["KubeNodeNotReady"]["state"] == "active"
    assert status["GPUXIDError"]["state"] == "suppressed"
    assert len(status["GPUXIDError"]["inhibitedBy"]) == 1

"""deploy/grafana-dashboard.json: valid JSON Grafana imports (schema 39, the Prometheus
data source as the DS_PROMETHEUS input and variable); every panel has a unique id, the
data source and a place of its own; every query is PromQL promtool parses, and names only
metrics a real bot serves on /metrics."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from bot.clock import FrozenClock
from bot.db import Database
from bot.incidents import log
from bot.incidents import service as incidents
from bot.runbooks.models import StepRun
from tests.deploy.conftest import DEPLOY, run
from tests.escalation.rig import EscRig
from tests.support.payloads import fixture

DASHBOARD = DEPLOY / "grafana-dashboard.json"
DATASOURCE = {"type": "prometheus", "uid": "${DS_PROMETHEUS}"}

# What is left of PromQL once strings, label matchers, ranges and grouping clauses are
# gone: functions (followed by "("), keywords, numbers, and the metric names.
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_MATCHERS = re.compile(r"\{[^}]*\}")
_RANGE = re.compile(r"\[[^\]]*\]")
_CLAUSE = re.compile(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)")
_NUMBER = re.compile(r"(?<![a-zA-Z0-9_:])[0-9][0-9a-zA-Z.]*")  # 0.99, 5m, 1e3
_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_KEYWORDS = {"and", "or", "unless", "bool", "offset", "by", "without", "on", "ignoring"}


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression reads."""
    text = _STRING.sub(" ", expr)
    for pattern in (_MATCHERS, _RANGE, _CLAUSE, _NUMBER):
        text = pattern.sub(" ", text)
    names: set[str] = set()
    for found in _NAME.finditer(text):
        rest = text[found.end() :].lstrip()
        if found[0] not in _KEYWORDS and not rest.startswith("("):
            names.add(found[0])
    return names


def _dashboard() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    return data


def _panels(panels: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for panel in panels:
        yield panel
        yield from _panels(panel.get("panels", []))  # a collapsed row holds its panels


def _queries(dashboard: dict[str, Any]) -> list[tuple[str, str]]:
    """(where, PromQL) for every panel target and every query variable."""
    found = [
        (f"panel {panel['id']} {panel['title']!r}", target["expr"])
        for panel in _panels(dashboard["panels"])
        for target in panel.get("targets", [])
    ]
    for variable in dashboard["templating"]["list"]:
        if variable["type"] == "query":
            query = variable["query"]["query"]
            inner = re.fullmatch(r"label_values\((.+),\s*\w+\)", query)
            assert inner is not None, f"variable {variable['name']}: {query}"
            found.append((f"variable {variable['name']}", inner[1]))
    return found


def test_metric_names_reads_the_names_and_nothing_else() -> None:
    expr = (
        "histogram_quantile(0.99, sum by (le) "
        '(rate(a_bucket{route="/x",le!="b"}[$__rate_interval])))'
        " / on (instance) group_left (row) b:rec offset 5m unless c > bool 2"
    )
    assert metric_names(expr) == {"a_bucket", "b:rec", "c"}


def test_it_is_grafana_schema_39_with_the_prometheus_input_and_variable() -> None:
    dashboard = _dashboard()
    assert dashboard["schemaVersion"] == 39
    assert dashboard["uid"] == "runbook-bot"
    (source,) = dashboard["__inputs"]
    assert (source["name"], source["type"], source["pluginId"]) == (
        "DS_PROMETHEUS",
        "datasource",
        "prometheus",
    )
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert (variables["DS_PROMETHEUS"]["type"], variables["DS_PROMETHEUS"]["query"]) == (
        "datasource",
        "prometheus",
    )


def test_panel_ids_are_unique_and_every_panel_has_the_datasource() -> None:
    panels = list(_panels(_dashboard()["panels"]))
    ids = [panel["id"] for panel in panels]
    assert len(ids) == len(set(ids)), f"duplicate panel ids: {ids}"
    for panel in panels:
        assert panel["datasource"] == DATASOURCE, panel["title"]
        for target in panel.get("targets", []):
            assert target["datasource"] == DATASOURCE, panel["title"]
            assert target["expr"].strip(), panel["title"]


def test_panels_do_not_overlap() -> None:
    taken: dict[tuple[int, int], str] = {}
    for panel in _panels(_dashboard()["panels"]):
        pos = panel["gridPos"]
        assert pos["x"] + pos["w"] <= 24, panel["title"]
        for x in range(pos["x"], pos["x"] + pos["w"]):
            for y in range(pos["y"], pos["y"] + pos["h"]):
                assert (x, y) not in taken, f"{panel['title']!r} overlaps {taken[(x, y)]!r}"
                taken[(x, y)] = panel["title"]


def test_the_panels_asked_for_are_there() -> None:
    queries = " ".join(expr for _, expr in _queries(_dashboard()))
    for metric in (
        "runbook_bot_incidents_active",
        "runbook_bot_pages",
        "runbook_bot_ingest_seconds_bucket",
        "runbook_bot_alerts_ingested_total",
        "runbook_bot_timers_late_seconds",
        "runbook_bot_worker_heartbeat_age_seconds",
        "runbook_bot_mtta_seconds",
        "runbook_bot_mttr_seconds",
        "runbook_bot_incidents_recent",
        "runbook_bot_step_runs_recent",
    ):
        assert metric in queries
    assert "histogram_quantile(0.5," in queries and "histogram_quantile(0.99," in queries


def test_every_query_is_promql_promtool_parses(promtool: str, tmp_path: Path) -> None:
    """Each query becomes a recording rule, Grafana's variables replaced by values."""
    rules = [
        {
            "record": f"dashboard:query_{n}",
            "expr": expr.replace("$__rate_interval", "5m").replace("$instance", ".*"),
        }
        for n, (_, expr) in enumerate(_queries(_dashboard()))
    ]
    path = tmp_path / "dashboard-rules.yaml"
    path.write_text(json.dumps({"groups": [{"name": "dashboard", "rules": rules}]}))
    checked = run(promtool, "check", "rules", path)
    assert checked.returncode == 0, checked.stdout + checked.stderr


@pytest.fixture
def served_metrics(
    serve: Callable[..., httpx.Client], db: Database, clock: FrozenClock
) -> set[str]:
    """The sample names a real bot serves on /metrics once an alert arrived, a worker
    beat (the heartbeat gauge appears only then), the incident was acknowledged and
    resolved (MTTA, MTTR) and a step finished."""
    client = serve()
    assert (
        client.post("/webhooks/alertmanager", json=fixture("xid79-firing.json")).status_code == 200
    )
    assert EscRig(db, clock).worker.run_once()
    alice = log.Actor.human("alice")
    with db.transaction() as session:
        incidents.acknowledge(session, 1, actor=alice, at=clock.now())
        incidents.resolve(session, 1, actor=alice, at=clock.now(), disposition="fixed")
        session.add(
            StepRun(
                incident_number=1,
                step_id="cordon",
                attempt=1,
                state="succeeded",
                kind="action",
                action="k8s.cordon",
                params={},
                params_hash="h",
                proposed_at=clock.now(),
                finished_at=clock.now(),
            )  # fmt: skip
        )
    text = client.get("/metrics").text
    return {s.name for family in text_string_to_metric_families(text) for s in family.samples}


def test_every_query_names_only_metrics_the_bot_serves(served_metrics: set[str]) -> None:
    assert "runbook_bot_worker_heartbeat_age_seconds" in served_metrics
    for where, expr in _queries(_dashboard()):
        names = metric_names(expr)
        assert names, f"{where}: no metric in {expr}"
        unknown = names - served_metrics
        assert not unknown, f"{where} reads {sorted(unknown)}, which /metrics does not serve"

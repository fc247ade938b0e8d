"""The monitoring examples in deploy/ (Prometheus rules, Alertmanager config, Grafana
dashboard) checked with the real tools Debian ships: promtool (package `prometheus`) and
amtool (`prometheus-alertmanager`). Missing tools skip locally and fail in CI.

`routing` walks deploy/alertmanager.yaml's route tree as Alertmanager does (first matching
child, settings inherited), for the group_by a notification of an alert would carry; the
receiver it finds is cross-checked against amtool's in test_alertmanager_config.py."""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.ci import skip_or_fail

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
RULES = DEPLOY / "prometheus-rules.yaml"
RULE_TESTS = DEPLOY / "prometheus-rules.test.yaml"
ALERTMANAGER = DEPLOY / "alertmanager.yaml"
TOOL_TIMEOUT = 60
"""Seconds one promtool/amtool run may take (they finish in well under one)."""


def _tool(name: str, package: str) -> str:
    path = shutil.which(name)
    if path is not None:
        return path
    skip_or_fail(f"{name} not found on PATH", install=f"apt-get install {package}")


@pytest.fixture
def promtool() -> str:
    return _tool("promtool", "prometheus")


@pytest.fixture
def amtool() -> str:
    return _tool("amtool", "prometheus-alertmanager")


def run(*command: str | Path, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """Run a tool with an argument list (no shell), bounded in time, output captured."""
    return subprocess.run(
        [str(part) for part in command],
        capture_output=True,
        text=True,
        timeout=TOOL_TIMEOUT,
        cwd=cwd,
        check=False,
    )


def load(path: Path) -> Any:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def alert_rules() -> list[dict[str, Any]]:
    """Every alerting rule of deploy/prometheus-rules.yaml (recording rules left out)."""
    return [rule for group in load(RULES)["groups"] for rule in group["rules"] if "alert" in rule]


@dataclass(frozen=True)
class Expected:
    """One alert a promtool unit test expects to fire: its labels as Alertmanager gets them."""

    test: str
    labels: dict[str, str]
    annotations: dict[str, str]

    @property
    def id(self) -> str:
        where = self.labels.get("Hostname") or self.labels.get("node") or ""
        return f"{self.labels['alertname']}-{self.labels.get('storage', where)}"


def expected_alerts() -> list[Expected]:
    found: list[Expected] = []
    for test in load(RULE_TESTS)["tests"]:
        for case in test.get("alert_rule_test", []):
            for alert in case.get("exp_alerts") or []:
                labels = {"alertname": case["alertname"], **alert["exp_labels"]}
                # YAML 1.1 reads 00000000:1D:00.0 as a number: quote such values.
                odd = {k: v for k, v in labels.items() if not isinstance(v, str)}
                assert not odd, f"{test['name']}: quote these label values: {odd}"
                found.append(Expected(test["name"], labels, alert.get("exp_annotations", {})))
    return found


_MATCHER = re.compile(r'^\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"(.*)"\s*$')


def _matches(matcher: str, labels: dict[str, str]) -> bool:
    parsed = _MATCHER.match(matcher)
    assert parsed is not None, f'matcher {matcher!r}: only name op "value" is understood here'
    name, op, value = parsed.groups()
    actual = labels.get(name, "")
    if op == "=":
        return actual == value
    if op == "!=":
        return actual != value
    found = re.fullmatch(value, actual) is not None
    return found if op == "=~" else not found


@dataclass(frozen=True)
class Route:
    receiver: str
    group_by: tuple[str, ...]


class Routing:
    """deploy/alertmanager.yaml's route tree (no `continue` routes: it uses none)."""

    def __init__(self, config: dict[str, Any]) -> None:
        self.config = config

    def route(self, labels: dict[str, str]) -> Route:
        node = self.config["route"]
        receiver, group_by = node["receiver"], tuple(node.get("group_by", ()))
        while True:
            child = next(
                (
                    c
                    for c in node.get("routes", [])
                    if all(_matches(m, labels) for m in c.get("matchers", []))
                ),
                None,
            )
            if child is None:
                return Route(receiver, group_by)
            assert not child.get("continue"), "the walk does not follow `continue` routes"
            receiver = child.get("receiver", receiver)
            group_by = tuple(child.get("group_by", group_by))
            node = child


@pytest.fixture
def routing() -> Routing:
    return Routing(load(ALERTMANAGER))

"""deploy/prometheus-rules.yaml: promtool accepts it and its unit tests pass; every alert
has a firing and a quiet case, the labels and annotations people and the bot rely on; and
each alert the unit tests expect, routed as deploy/alertmanager.yaml routes it and fed
through the bot's real ingest with the shipped runbooks, opens the runbook its
runbook_url names, with the facts that runbook needs."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from bot.clock import FrozenClock
from bot.db import Database
from tests.deploy.conftest import (
    ALERTMANAGER,
    RULE_TESTS,
    RULES,
    Expected,
    Routing,
    alert_rules,
    expected_alerts,
    load,
    run,
)
from tests.runbooks.rig import Rig
from tests.support.payloads import fingerprint, notification

RUNBOOKS = Path(__file__).resolve().parents[2] / "runbooks"
RUNBOOK_URL = re.compile(r"/runbooks/(?P<id>[a-z0-9-]+)\.yaml$")
SEVERITIES = {"critical", "warning", "info"}
BOT = "runbook-bot"


def test_promtool_check_rules_accepts_every_rule(promtool: str) -> None:
    checked = run(promtool, "check", "rules", RULES)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    rules = sum(len(group["rules"]) for group in load(RULES)["groups"])
    assert f"SUCCESS: {rules} rules found" in checked.stdout


def test_promtool_unit_tests_pass(promtool: str) -> None:
    tested = run(promtool, "test", "rules", RULE_TESTS.name, cwd=RULE_TESTS.parent)
    assert tested.returncode == 0, tested.stdout + tested.stderr
    assert "SUCCESS" in tested.stdout


def test_promtool_unit_tests_fail_when_a_label_is_wrong(promtool: str, tmp_path: Path) -> None:
    """The unit tests can fail: an XID alert expected with the wrong code does."""
    shutil.copy(RULES, tmp_path / RULES.name)
    text = RULE_TESTS.read_text(encoding="utf-8")
    assert 'xid: "79"' in text
    (tmp_path / RULE_TESTS.name).write_text(text.replace('xid: "79"', 'xid: "13"', 1))
    tested = run(promtool, "test", "rules", RULE_TESTS.name, cwd=tmp_path)
    assert tested.returncode == 1, tested.stdout + tested.stderr
    assert "FAILED" in tested.stdout + tested.stderr
    assert 'xid="79"' in tested.stdout + tested.stderr  # what the rule really produced


def test_every_alert_has_a_firing_and_a_quiet_unit_test() -> None:
    firing: set[str] = set()
    quiet: set[str] = set()
    for test in load(RULE_TESTS)["tests"]:
        for case in test.get("alert_rule_test", []):
            (firing if case.get("exp_alerts") else quiet).add(case["alertname"])
    names = {rule["alert"] for rule in alert_rules()}
    assert names - firing == set(), "alerts no unit test sees firing"
    assert names - quiet == set(), "alerts no unit test sees quiet"


def test_every_alert_says_how_long_how_bad_what_and_where_to_read() -> None:
    for rule in alert_rules():
        name = rule["alert"]
        assert rule.get("for"), f"{name}: no `for`"
        assert rule["labels"]["severity"] in SEVERITIES, name
        notes = rule["annotations"]
        assert notes.get("summary") and notes.get("description"), name
        assert notes["runbook_url"].startswith("https://"), name


def test_runbook_urls_name_shipped_runbooks() -> None:
    for rule in alert_rules():
        found = RUNBOOK_URL.search(rule["annotations"]["runbook_url"])
        if found is not None:
            assert (RUNBOOKS / f"{found['id']}.yaml").is_file(), rule["annotations"]["runbook_url"]


def test_the_xid_code_is_a_label_of_both_xid_rules() -> None:
    """The seed's increase() over the XID gauge hides the code; both rules carry it."""
    xid_rules = [rule for rule in alert_rules() if rule["alert"] == "GPUXIDError"]
    assert [rule["expr"].split()[0] for rule in xid_rules] == [
        "DCGM_EXP_XID_ERRORS_COUNT",
        "DCGM_FI_DEV_XID_ERRORS",
    ]
    assert "xid" not in xid_rules[0]["labels"]  # the counter has it as a series label
    assert xid_rules[1]["labels"]["xid"] == "{{ $value }}"
    assert all("increase(" not in rule["expr"] for rule in xid_rules)


ROUTING = Routing(load(ALERTMANAGER))
BOT_ALERTS = [e for e in expected_alerts() if ROUTING.route(e.labels).receiver == BOT]
"""The alerts the unit tests expect to fire that Alertmanager sends to the bot."""


def test_the_alerts_routed_to_the_bot_cover_the_five_runbooks() -> None:
    runbooks = {_runbook_of(e) for e in BOT_ALERTS}
    assert runbooks == {"gpu-xid", "overheating", "node-down", "ib-partition", "storage-failure"}


@pytest.mark.parametrize("expected", BOT_ALERTS, ids=lambda e: e.id)
def test_a_firing_alert_opens_the_runbook_its_url_names(
    expected: Expected,
    routing: Routing,
    db: Database,
    clock: FrozenClock,
    tmp_path: Path,
) -> None:
    rig = Rig(db, clock, tmp_path, runbooks_dir=RUNBOOKS)
    labels = expected.labels
    group_by = routing.route(labels).group_by
    alert = {
        "status": "firing",
        "labels": labels,
        "annotations": expected.annotations,
        "startsAt": "2026-11-29T22:05:22.257Z",
        "endsAt": "0001-01-01T00:00:00Z",
        "generatorURL": "http://prometheus:9090/graph?g0.expr=up",
        "fingerprint": fingerprint(labels),
    }
    # Alertmanager leaves a group_by label the alert lacks out of groupLabels.
    group = {key: labels[key] for key in group_by if key in labels}
    assert group, f"{labels['alertname']} lacks every label its route groups by: {group_by}"

    result = rig.ingest(notification([alert], group=group))

    assert result.opened
    assert result.runbook == _runbook_of(expected)
    frozen = rig.frozen(result.incident)
    assert frozen is not None
    facts = frozen.facts
    if "node" in facts:
        assert facts["node"] == labels.get("Hostname", labels.get("node"))
    if result.runbook == "storage-failure":
        assert (facts["storage"], facts["kind"]) == (labels["storage"], labels["storage_kind"])
    if result.runbook == "gpu-xid":
        assert (facts["xid"], facts["gpu"], facts["uuid"]) == (
            labels["xid"],
            labels["gpu"],
            labels["UUID"],
        )
    if result.runbook in ("ib-partition", "overheating"):
        # The scope is the bot's (the topology), not a count the rule carries.
        assert not {"scope", "nodes_down", "hot_in_row"} & set(facts)


def _runbook_of(expected: Expected) -> str:
    found = RUNBOOK_URL.search(expected.annotations["runbook_url"])
    assert found is not None, f"{expected.test}: runbook_url names no runbook"
    return found["id"]

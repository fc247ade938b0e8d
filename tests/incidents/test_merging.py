"""Merging: a node incident merged into its domain's stops paging and running steps, its
log says where it went and stays verifiable; the cross-runbook cause rule attaches a
rack's other alerts as symptoms; growth re-plans the runbook."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from bot.chat import cards, wording
from bot.chat.slack import blocks
from bot.clock import FrozenClock
from bot.db import Database
from bot.escalation.models import EscalationTimer
from bot.incidents import log
from bot.incidents import service as incidents
from bot.runbooks.models import StepRun
from tests.alerts.fleet import Fleet, node
from tests.support.cli import Run


def test_a_rack_that_lost_power_is_one_node_down_incident_with_its_fabric_alerts_as_symptoms(
    db: Database, clock: FrozenClock, tmp_path: Path
) -> None:
    fleet = Fleet(db, clock, tmp_path)
    rack = [node("a", i) for i in range(8)]  # rack a1
    # The fabric alerts arrive first, one Alertmanager group per node.
    early = [fleet.post([fleet.alert(n, "InfiniBandPortDown")]) for n in rack[:3]]
    clock.advance(timedelta(seconds=20))

    down = fleet.post(
        [fleet.alert(n, "KubeNodeNotReady") for n in rack], alertname="KubeNodeNotReady"
    )
    clock.advance(timedelta(seconds=10))
    late = fleet.post([fleet.alert(n, "InfiniBandPortDown") for n in rack[3:]])

    cause = fleet.incident(down.incident)
    assert (cause.scope, cause.domain) == ("domain", "rack/a1")
    assert late.incident == down.incident and not late.opened
    for result in early:
        merged = fleet.incident(result.incident)
        assert (merged.status, merged.merged_into) == ("resolved", down.incident)
    assert [i.number for i in fleet.active()] == [down.incident]
    alerts = fleet.alerts_of(down.incident)
    symptoms = sorted(a.labels["Hostname"] for a in alerts if a.symptom == "ib-partition")
    assert symptoms == rack
    assert sorted(a.labels["Hostname"] for a in alerts if a.symptom is None) == rack
    merged_entry = fleet.entries(down.incident, "incident.merged")[0]
    assert merged_entry["symptoms"] == ["ib-partition"]
    assert "3 ib-partition attached as symptoms" in merged_entry["why"]
    attached = fleet.entries(down.incident, "alert.symptom")
    assert sorted(e["node"] for e in attached) == rack[3:]
    assert {e["runbook"] for e in attached} == {"ib-partition"}


def test_a_symptom_outside_the_causes_domain_opens_its_own_incident(
    db: Database, clock: FrozenClock, tmp_path: Path
) -> None:
    fleet = Fleet(db, clock, tmp_path)
    down = fleet.post(
        [fleet.alert(node("a", i), "KubeNodeNotReady") for i in range(2)],
        alertname="KubeNodeNotReady",
    )

    elsewhere = fleet.post([fleet.alert(node("a", 20), "InfiniBandPortDown")])

    assert elsewhere.opened and elsewhere.incident != down.incident


def test_a_cause_opened_before_the_window_takes_no_symptoms(
    db: Database, clock: FrozenClock, tmp_path: Path
) -> None:
    fleet = Fleet(db, clock, tmp_path)
    down = fleet.post(
        [fleet.alert(node("a", i), "KubeNodeNotReady") for i in range(2)],
        alertname="KubeNodeNotReady",
    )
    clock.advance(timedelta(minutes=3))

    later = fleet.post([fleet.alert(node("a", 1), "InfiniBandPortDown")])

    assert later.opened and later.incident != down.incident
    assert fleet.entries(down.incident, "alert.symptom") == []


def test_a_merged_incident_stops_paging_cancels_its_steps_and_its_log_verifies(
    db: Database, clock: FrozenClock, tmp_path: Path, on_db: str, run: Run
) -> None:
    fleet = Fleet(db, clock, tmp_path)
    fleet.write(
        fleet.dir.joinpath("overheating.yaml").read_text().replace("min_nodes: 2", "min_nodes: 3"),
        "overheating.yaml",
    )
    one = fleet.post(fleet.hot([node("a", 1)], severity="critical"))
    two = fleet.post(fleet.hot([node("a", 2)], severity="critical"))
    fleet.propose()
    assert fleet.runs(two.incident)["status"].state in ("approved", "awaiting_approval")

    fleet.post(fleet.hot([node("a", 3)], severity="critical"))

    cancelled = fleet.runs(two.incident)["status"]
    assert cancelled.state == "cancelled"
    assert f"INC-{two.incident} resolved" in cancelled.summary
    with db.session() as session:
        pending = (
            session.query(EscalationTimer)
            .filter_by(incident_number=two.incident, state="pending")
            .count()
        )
        assert pending == 0
        for number in (one.incident, two.incident):
            incident = incidents.get(session, number)
            assert log.verify(incident, log.entries(session, number), db.log_key) is None
    assert run("log", "verify") == (
        0,
        "log verified: 2 incident(s), every entry intact (hash chain only (no log_key_file))\n",
        "",
    )


def test_growth_proposes_the_domain_step_its_when_skipped_and_supersedes_later_proposals(
    db: Database, clock: FrozenClock, tmp_path: Path
) -> None:
    fleet = Fleet(db, clock, tmp_path)
    first = fleet.post(fleet.hot([node("a", 1)]))
    fleet.propose()
    assert fleet.states(first.incident) == {"facility": "skipped", "status": "approved"}
    before = fleet.runs(first.incident)["status"]

    grown = fleet.post(fleet.hot([node("a", 2)]))

    assert grown.grown == [first.incident]
    facility = fleet.all_runs(first.incident, "facility")
    assert [r.state for r in facility] == ["skipped", "expired", "awaiting_approval"]
    assert facility[1].summary.startswith("decided again in its turn")
    assert facility[-1].summary == "Call the facility about the row's cooling"
    status: list[StepRun] = fleet.all_runs(first.incident, "status")
    assert status[0].id == before.id and status[0].state == "expired"
    assert status[0].summary.startswith("superseded:")
    assert fleet.entries(first.incident, "runbook.replanned")[0]["step"] == "facility"


def test_templates_see_the_incidents_scope_and_domain(
    db: Database, clock: FrozenClock, tmp_path: Path
) -> None:
    fleet = Fleet(db, clock, tmp_path)
    fleet.write(CORDON_FIRST, "overheating.yaml")
    opened = fleet.post(fleet.hot([node("a", i) for i in range(4)]), alertname="GPUTemperatureHigh")
    fleet.propose()

    cordon = fleet.runs(opened.incident)["cordon"]

    assert cordon.state == "awaiting_approval"
    assert cordon.params == {"node": node("a", 0), "reason": "domain row/a of 32"}


CORDON_FIRST = """\
    id: overheating
    title: Overheating
    version: 1
    match: {alerts: [GPUTemperatureHigh]}
    group_by: [domain.row]
    facts:
      node: "{{ labels.Hostname }}"
    steps:
      - id: cordon
        title: Cordon
        action: k8s.cordon
        with:
          node: "{{ facts.node }}"
          reason: >-
            {{ incident.scope }} {{ incident.domain.name ~ ' of ' ~ incident.domain.size
            if incident.domain else '' }}
"""


def test_growth_supersedes_a_proposal_whose_parameters_changed_and_asks_again(
    db: Database, clock: FrozenClock, tmp_path: Path
) -> None:
    fleet = Fleet(db, clock, tmp_path)
    fleet.write(CORDON_FIRST, "overheating.yaml")
    first = fleet.post(fleet.hot([node("a", 1)]))
    fleet.propose()
    proposed = fleet.runs(first.incident)["cordon"]
    assert (proposed.state, proposed.params["reason"]) == ("awaiting_approval", "node ")
    fleet.approve(first.incident, "cordon", "alice")  # binds to the node's parameters

    fleet.post(fleet.hot([node("a", 2)]))

    runs = fleet.all_runs(first.incident, "cordon")
    assert [(r.attempt, r.state) for r in runs] == [(1, "expired"), (2, "awaiting_approval")]
    assert runs[1].params["reason"] == "domain row/a of 32"
    assert runs[1].params_hash != runs[0].params_hash
    assert fleet.approvals(first.incident, "cordon") == []
    superseded = [e for e in fleet.entries(first.incident, "step.expired") if e.get("superseded")]
    assert superseded[0]["why"] == "its parameters render differently now"


def test_the_card_says_the_domain_the_node_count_merges_and_symptoms(
    db: Database, clock: FrozenClock, tmp_path: Path
) -> None:
    fleet = Fleet(db, clock, tmp_path)
    rack = [node("a", i) for i in range(8)]
    early = fleet.post([fleet.alert(rack[0], "InfiniBandPortDown")])
    down = fleet.post(
        [fleet.alert(n, "KubeNodeNotReady") for n in rack], alertname="KubeNodeNotReady"
    )
    fleet.post([fleet.alert(n, "InfiniBandPortDown") for n in rack[1:3]])

    with db.session() as session:
        cause = cards.card(session, down.incident, clock.now())
        merged = cards.card(session, early.incident, clock.now())

    assert (
        wording.scope_line(cause)
        == "rack/a1 · 8 nodes · 3 ib-partition alerts attached as symptoms"
    )
    assert wording.scope_line(merged) == f"merged into INC-{down.incident}"
    _, blocks_of_cause = blocks.card(cause)
    assert "rack/a1 · 8 nodes" in str(blocks_of_cause)
    _, blocks_of_merged = blocks.card(merged)
    assert f"merged into INC-{down.incident}" in str(blocks_of_merged)


def test_incidents_show_says_the_scope(
    db: Database, clock: FrozenClock, tmp_path: Path, on_db: str, run: Run
) -> None:
    fleet = Fleet(db, clock, tmp_path)
    opened = fleet.post(fleet.hot([node("a", i) for i in range(3)]), alertname="GPUTemperatureHigh")

    code, out, _ = run("incidents", "show", f"INC-{opened.incident}")

    assert code == 0
    assert "Scope:     row/a · 3 nodes\n" in out


def test_a_merged_incident_is_not_reopened_by_hand(
    db: Database,
    clock: FrozenClock,
    tmp_path: Path,
    on_db: str,
    run: Run,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("RUNBOOK_BOT_ROLES", '{"alice": ["responder"]}')
    fleet = Fleet(db, clock, tmp_path)
    fleet.write(
        fleet.dir.joinpath("overheating.yaml").read_text().replace("min_nodes: 2", "min_nodes: 3"),
        "overheating.yaml",
    )
    one = fleet.post(fleet.hot([node("a", 1)]))
    two = fleet.post(fleet.hot([node("a", 2)]))
    fleet.post(fleet.hot([node("a", 3)]))

    code, _, err = run("incidents", "reopen", f"INC-{two.incident}", "--as", "alice")

    assert code != 0
    assert f"merged into INC-{one.incident}" in err
    assert fleet.incident(two.incident).status == "resolved"


def test_the_grown_incident_takes_the_severity_of_the_most_severe_merged_one(
    db: Database, clock: FrozenClock, tmp_path: Path
) -> None:
    fleet = Fleet(db, clock, tmp_path)
    fleet.write(
        fleet.dir.joinpath("overheating.yaml").read_text().replace("min_nodes: 2", "min_nodes: 3"),
        "overheating.yaml",
    )
    one = fleet.post(fleet.hot([node("a", 1)]))
    fleet.post(fleet.hot([node("a", 2)], severity="critical"))

    fleet.post(fleet.hot([node("a", 3)]))

    assert fleet.incident(one.incident).severity == "critical"
    raised = fleet.entries(one.incident, "incident.severity_raised")
    assert raised == [{"from": "warning", "to": "critical"}]
    with db.session() as session:
        pending = (
            session.query(EscalationTimer)
            .filter_by(incident_number=one.incident, state="pending")
            .count()
        )
    assert pending == 1  # the critical ladder, from its first level


def test_a_node_joining_the_domain_incident_supersedes_a_proposal_naming_the_node_count(
    db: Database, clock: FrozenClock, tmp_path: Path
) -> None:
    fleet = Fleet(db, clock, tmp_path)
    fleet.write(
        CORDON_FIRST.replace("{{ incident.scope }}", "{{ incident.nodes | length }} nodes,"),
        "overheating.yaml",
    )
    opened = fleet.post(fleet.hot([node("a", 1), node("a", 2)]), alertname="GPUTemperatureHigh")
    fleet.propose()
    assert fleet.runs(opened.incident)["cordon"].params["reason"] == "2 nodes, row/a of 32"

    joined = fleet.post(fleet.hot([node("a", 3)]))

    assert joined.grown == [opened.incident]
    runs = fleet.all_runs(opened.incident, "cordon")
    assert [(r.attempt, r.state) for r in runs] == [(1, "expired"), (2, "awaiting_approval")]
    assert runs[1].params["reason"] == "3 nodes, row/a of 32"
    assert "now row/a's incident" in runs[0].summary

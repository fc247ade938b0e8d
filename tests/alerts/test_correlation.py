"""Correlation by failure domain through the real ingest, on SQLite and PostgreSQL: one
incident for a row's alerts, a lone node's incident growing into its row's, suppression,
storage correlation, the window, and runbooks that do not correlate left as they were."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from bot.chat import cards, wording
from bot.clock import FrozenClock
from bot.db import Database
from tests.alerts.fleet import Fleet, node
from tests.support.payloads import alert, notification


def _fleet(db: Database, clock: FrozenClock, tmp_path: Path) -> Fleet:
    return Fleet(db, clock, tmp_path)


def test_a_lone_hot_node_stays_a_node_incident(
    db: Database, clock: FrozenClock, tmp_path: Path
) -> None:
    fleet = _fleet(db, clock, tmp_path)

    result = fleet.post(fleet.hot([node("a", 3)]))

    incident = fleet.incident(result.incident)
    assert (result.opened, result.runbook) == (True, "overheating")
    assert (incident.scope, incident.domain, incident.merged_into) == ("node", None, None)
    assert incident.correlation_key is not None
    assert fleet.hosts(result.incident) == [node("a", 3)]


def test_a_row_in_one_notification_is_one_domain_incident(
    db: Database, clock: FrozenClock, tmp_path: Path
) -> None:
    fleet = _fleet(db, clock, tmp_path)
    hot = [node("a", i) for i in range(5)]

    result = fleet.post(fleet.hot(hot), alertname="GPUTemperatureHigh")

    assert [i.number for i in fleet.incidents()] == [result.incident]
    incident = fleet.incident(result.incident)
    assert (incident.scope, incident.domain, incident.domain_size) == ("domain", "row/a", 32)
    assert incident.title == "Overheating: 5 nodes of row/a"
    assert fleet.hosts(result.incident) == hot
    opened = fleet.entries(result.incident, "incident.opened")[0]
    assert opened["why"] == "5 nodes of row/a raised overheating within 2m"


def test_a_second_node_within_the_window_grows_the_first_into_the_rows_incident(
    db: Database, clock: FrozenClock, tmp_path: Path
) -> None:
    fleet = _fleet(db, clock, tmp_path)
    first = fleet.post(fleet.hot([node("a", 1)]))
    clock.advance(timedelta(seconds=50))
    second = fleet.post(fleet.hot([node("a", 2)]))
    clock.advance(timedelta(seconds=50))
    third = fleet.post(fleet.hot([node("a", 3)]))

    assert second.incident == third.incident == first.incident
    assert second.grown == [first.incident]
    incident = fleet.incident(first.incident)
    assert (incident.scope, incident.domain, incident.status) == ("domain", "row/a", "open")
    assert incident.title == "Overheating: 3 nodes of row/a"
    grew = fleet.entries(first.incident, "incident.grew")
    assert grew == [
        {
            "domain": "row/a",
            "nodes": [node("a", 1), node("a", 2)],
            "why": "2 nodes of row/a raised overheating within 2m",
        }
    ]
    assert fleet.hosts(first.incident) == [node("a", i) for i in (1, 2, 3)]
    assert len(fleet.incidents()) == 1
    with fleet.db.session() as session:
        assert wording.scope_line(cards.card(session, first.incident, clock.now())) == (
            "row/a · 3 nodes"
        )


def test_two_node_incidents_of_a_row_are_merged_when_a_third_node_makes_the_row(
    db: Database, clock: FrozenClock, tmp_path: Path
) -> None:
    fleet = Fleet(db, clock, tmp_path)
    fleet.write(
        fleet.dir.joinpath("overheating.yaml").read_text().replace("min_nodes: 2", "min_nodes: 3"),
        "overheating.yaml",
    )
    one = fleet.post(fleet.hot([node("a", 1)]))
    two = fleet.post(fleet.hot([node("a", 2)]))
    assert one.incident != two.incident

    three = fleet.post(fleet.hot([node("a", 3)]))

    assert three.incident == one.incident
    merged = fleet.incident(two.incident)
    assert (merged.status, merged.merged_into) == ("resolved", one.incident)
    assert fleet.alerts_of(two.incident) == []
    assert fleet.hosts(one.incident) == [node("a", i) for i in (1, 2, 3)]
    into = fleet.entries(one.incident, "incident.merged")
    assert into[0]["merged"] == [f"INC-{two.incident}"]
    assert into[0]["nodes"] == [node("a", 2)]
    assert into[0]["why"] == "3 nodes of row/a raised overheating within 2m"
    assert fleet.summaries(two.incident, "incident.merged") == [
        f"INC-{two.incident} merged into INC-{one.incident}: 3 nodes of row/a raised "
        "overheating within 2m"
    ]
    # a merged incident is over: no page, no reopening by a late repeat
    cancelled = fleet.summaries(two.incident, "escalation.cancelled")
    assert cancelled == [] or "merged" in cancelled[0]


def test_outside_the_window_a_second_node_opens_its_own_incident(
    db: Database, clock: FrozenClock, tmp_path: Path
) -> None:
    fleet = _fleet(db, clock, tmp_path)
    first = fleet.post(fleet.hot([node("a", 1)]))
    clock.advance(timedelta(minutes=2, seconds=1))

    second = fleet.post(fleet.hot([node("a", 2)]))

    assert second.opened and second.incident != first.incident
    assert [i.scope for i in fleet.incidents()] == ["node", "node"]
    assert fleet.entries(first.incident, "incident.grew") == []


def test_nodes_of_other_rows_never_join(db: Database, clock: FrozenClock, tmp_path: Path) -> None:
    fleet = _fleet(db, clock, tmp_path)
    a = fleet.post(fleet.hot([node("a", 1)]))

    b = fleet.post(fleet.hot([node("b", 1)]))

    assert a.incident != b.incident
    assert [i.scope for i in fleet.incidents()] == ["node", "node"]


def test_while_the_rows_incident_is_open_new_nodes_join_it_however_late(
    db: Database, clock: FrozenClock, tmp_path: Path
) -> None:
    fleet = _fleet(db, clock, tmp_path)
    domain = fleet.post(fleet.hot([node("a", 1), node("a", 2)]))
    clock.advance(timedelta(minutes=30))

    late = fleet.post(fleet.hot([node("a", 9)]))

    assert (late.incident, late.opened) == (domain.incident, False)
    assert fleet.hosts(domain.incident) == [node("a", i) for i in (1, 2, 9)]
    assert fleet.incident(domain.incident).title == "Overheating: 3 nodes of row/a"
    assert len(fleet.incidents()) == 1


def test_a_payload_of_two_rows_is_split_into_one_incident_per_row(
    db: Database, clock: FrozenClock, tmp_path: Path
) -> None:
    fleet = _fleet(db, clock, tmp_path)
    alerts = fleet.hot([node("a", 1), node("b", 1), node("a", 2), node("b", 2)])

    fleet.post(alerts, alertname="GPUTemperatureHigh")

    found = {i.domain: fleet.hosts(i.number) for i in fleet.incidents()}
    assert found == {
        "row/a": [node("a", 1), node("a", 2)],
        "row/b": [node("b", 1), node("b", 2)],
    }


def test_without_a_topology_a_level_correlates_nothing(
    db: Database, clock: FrozenClock, tmp_path: Path
) -> None:
    fleet = _fleet(db, clock, tmp_path)
    fleet.snapshot = None

    fleet.post(fleet.hot([node("a", 1), node("a", 2)]), alertname="GPUTemperatureHigh")

    assert [(i.scope, len(fleet.hosts(i.number))) for i in fleet.incidents()] == [
        ("node", 1),
        ("node", 1),
    ]


def test_two_hundred_nodes_of_one_storage_server_are_one_incident(
    db: Database, clock: FrozenClock, tmp_path: Path
) -> None:
    fleet = _fleet(db, clock, tmp_path)
    fleet.snapshot = None  # storage domains come from the alert, not the topology
    hosts = [f"gpu-node-{i:03d}" for i in range(200)]
    mounts = [fleet.alert(h, "StorageMountFailed", storage="nfs-01") for h in hosts]

    results = [fleet.post(mounts[i : i + 50], alertname="StorageMountFailed") for i in (0, 50)]
    results += [fleet.post(mounts[i : i + 50], alertname="StorageMountFailed") for i in (100, 150)]

    assert {r.incident for r in results} == {results[0].incident}
    incident = fleet.incident(results[0].incident)
    assert (incident.scope, incident.domain, incident.domain_size) == (
        "domain",
        "storage/nfs-01",
        None,
    )
    assert len(fleet.alerts_of(incident.number)) == 200
    assert incident.title == "Storage down: 200 nodes of storage/nfs-01"


def test_repeats_and_resolutions_land_on_the_incident_holding_the_alerts(
    db: Database, clock: FrozenClock, tmp_path: Path
) -> None:
    fleet = _fleet(db, clock, tmp_path)
    alerts = fleet.hot([node("a", 1), node("a", 2)])
    opened = fleet.post(alerts, alertname="GPUTemperatureHigh")
    clock.advance(timedelta(seconds=30))

    again = fleet.post(alerts, alertname="GPUTemperatureHigh")
    done = fleet.post([{**a, "status": "resolved"} for a in alerts], alertname="GPUTemperatureHigh")

    assert again.incident == done.incident == opened.incident
    assert (again.new, again.repeats) == (0, 2)
    assert done.resolved_alerts == 2
    assert fleet.incident(opened.incident).status == "resolved"  # a warning resolves itself
    assert len(fleet.incidents()) == 1


def test_a_runbook_that_does_not_correlate_groups_as_alertmanager_did(
    db: Database, clock: FrozenClock, tmp_path: Path
) -> None:
    fleet = _fleet(db, clock, tmp_path)
    xids = [alert(host=node("a", i)) for i in range(3)]

    result = fleet.post(xids, alertname="GPUXIDError")

    incident = fleet.incident(result.incident)
    assert len(fleet.incidents()) == 1
    assert (incident.scope, incident.correlation_key) == ("node", None)
    assert incident.group_key == notification(xids, group={"alertname": "GPUXIDError"})["groupKey"]
    assert len(fleet.alerts_of(result.incident)) == 3


def test_drill_alerts_never_join_a_real_rows_incident(
    db: Database, clock: FrozenClock, tmp_path: Path
) -> None:
    fleet = _fleet(db, clock, tmp_path)
    real = fleet.post(fleet.hot([node("a", 1), node("a", 2)]), alertname="GPUTemperatureHigh")

    drill = fleet.post(
        fleet.hot([node("a", 3)], runbook_bot_drill="d-1"), alertname="GPUTemperatureHigh"
    )

    assert drill.incident != real.incident
    rehearsed = fleet.incident(drill.incident)
    assert (rehearsed.drill, rehearsed.scope) == ("d-1", "node")
    assert fleet.hosts(real.incident) == [node("a", 1), node("a", 2)]


def test_a_notification_mixing_runbooks_lands_each_alert_where_its_runbook_says(
    db: Database, clock: FrozenClock, tmp_path: Path
) -> None:
    fleet = _fleet(db, clock, tmp_path)
    mixed = [alert(host=node("a", 5)), *fleet.hot([node("a", 1), node("a", 2)])]

    result = fleet.post(mixed, alertname="mixed")

    assert result.opened and result.new == 3
    by_scope = {i.scope: fleet.hosts(i.number) for i in fleet.incidents()}
    assert by_scope == {"node": [node("a", 5)], "domain": [node("a", 1), node("a", 2)]}
    plain = next(i for i in fleet.incidents() if i.scope == "node")
    assert result.incident == plain.number  # the Alertmanager group's part answers first

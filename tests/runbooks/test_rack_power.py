"""A rack that lost power, end to end: the cross-runbook cause rule with the shipped
runbooks. The simulator serves a fleet of two racks (a1, a2: 8 nodes each, one power feed
per rack, one InfiniBand leaf for both); `storms.rack_power` takes rack a1's feed away
(its machines off, their nodes NotReady, their ports Down) and gives the alerts
Prometheus would send, which reach the served webhook grouped by alertname, as
deploy/alertmanager.yaml routes them. The bot reads the topology from the nodes.

The rack is one node-down incident for its feed: NotReady and BMCUnreachable of its eight
machines are the incident's own alerts, their InfiniBand ports' alerts are attached to it
as symptoms (before or after it formed), no ib-partition incident stays open, and the
domain branch reads every BMC, asks for the feed once, and then acts on the set under
approvals naming the count. A lone machine down is still a node incident on the
single-node branch.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from sqlalchemy import select

from bot.clock import FrozenClock
from bot.db import Database
from bot.incidents import service as incidents
from bot.incidents.models import Incident
from bot.runbooks.models import IncidentRunbook
from bot.runbooks.nodes import incident_nodes
from bot.runbooks.schema import Runbook
from bot.sim import storms
from bot.sim.fleet import LEVELS, Fleet
from bot.sim.fleet import fleet as make_fleet
from tests.runbooks.drive import RUNBOOKS, Drive, simulator

RACK = "a1"
FEED = "power/pdu-a1"
LEAF = "leaf/ib-leaf-01"
BREAKER = {"breaker_max_fraction": 0.5, "breaker_max_nodes": 8}
"""A rack of eight of the fleet's sixteen nodes fits inside the breaker."""
FEED_READS = ("feed_power", "feed_sel", "feed")
FEED_ACTIONS = ("feed_cordon", "feed_pods", "feed_checkpoints")
NODE_READS = ("node_status", "power", "sel", "bmc_only")
NODE_ACTIONS = ("cordon", "pods", "out_of_service", "power_on", "power_cycle")


class Rack:
    """The served bot over the fleet's simulator, and the fleet's failure domains."""

    def __init__(self, drive: Drive, fleet: Fleet) -> None:
        self.drive, self.fleet = drive, fleet
        self.nodes = fleet.members("rack", RACK)

    def lose_power(self) -> dict[str, list[dict[str, Any]]]:
        """Rack a1's feed fails: the notifications of each alertname, as Alertmanager
        batches them."""
        alerts = storms.rack_power(self.fleet, RACK, sim=self.drive.sim)
        bodies = storms.notifications(alerts, ["alertname"])
        return {body["groupLabels"]["alertname"]: body for body in bodies}

    def incidents(self) -> list[tuple[Incident, str]]:
        """Every incident with its runbook, oldest first."""
        with self.drive.rig.db.session() as session:
            stmt = (
                select(Incident, IncidentRunbook.runbook_id)
                .join(IncidentRunbook, IncidentRunbook.incident_number == Incident.number)
                .order_by(Incident.number)
            )
            return [(incident, runbook) for incident, runbook in session.execute(stmt)]

    def active(self) -> list[tuple[Incident, str]]:
        return [(i, rb) for i, rb in self.incidents() if i.status in ("open", "acknowledged")]

    def symptoms(self, number: int) -> dict[str | None, int]:
        """The incident's alerts counted by the runbook they are a symptom of (None: its
        own)."""
        counts: dict[str | None, int] = {}
        with self.drive.rig.db.session() as session:
            for alert in incidents.alerts_of(session, number):
                counts[alert.symptom] = counts.get(alert.symptom, 0) + 1
        return counts

    def cordoned(self) -> list[bool]:
        return [self.drive.node(node).unschedulable for node in self.nodes]


@pytest.fixture
def rack(db: Database, clock: FrozenClock, tmp_path: Path) -> Iterator[Rack]:
    fleet = make_fleet(16, gpus=2, grace_seconds=5, startup_seconds=2)
    topology = {"levels": LEVELS}
    with (
        simulator(fleet.scenario) as sim,
        Drive(db, clock, tmp_path, sim, topology=topology, **BREAKER).serving() as drive,
    ):
        yield Rack(drive, fleet)


# -- how node-down is written ---------------------------------------------------------------

ACTS_ON_A_NODE = {
    "k8s.cordon",
    "k8s.uncordon",
    "k8s.drain",
    "k8s.taint",
    "k8s.untaint",
    "bmc.power_on",
    "bmc.power_cycle",
    "gpu.diag",
}


def _node_down() -> Runbook:
    text = (RUNBOOKS / "node-down.yaml").read_text(encoding="utf-8")
    return Runbook.model_validate(yaml.safe_load(text))


def test_node_down_groups_by_power_feed_and_correlates_within_two_minutes() -> None:
    runbook = _node_down()

    assert runbook.group_by == ["domain.power"]
    assert runbook.correlate is not None
    assert (runbook.correlate.window.total_seconds(), runbook.correlate.min_nodes) == (120, 2)
    assert runbook.version == 3
    assert "topology:" in (RUNBOOKS / "node-down.yaml").read_text(encoding="utf-8")


def test_each_branch_acts_on_its_own_nodes_the_feeds_over_the_set_the_machines_on_its_node() -> (
    None
):
    for step in _node_down().steps:
        feed = step.id.startswith("feed")
        if step.for_each is not None:
            assert feed and "{{ node }}" in str(step.with_), step.id
        if step.action in ACTS_ON_A_NODE:
            node = step.with_["node"]
            assert node == ("{{ node }}" if feed else "{{ facts.node }}"), step.id
            assert (step.for_each == "nodes") == feed, step.id
        first = (step.when or "").split(" and ")[0]
        if feed and 'incident.scope == "domain"' not in first:
            assert "steps.feed_" in first, f"{step.id}: not only for a feed's incident"
        if not feed and step.when and "incident.scope" in step.when:
            assert first == 'incident.scope == "node"', step.id


# -- end to end in the simulator --------------------------------------------------------------


def _one_feed_incident(rack: Rack) -> int:
    """The rack is one active incident: node-down's, for its power feed, with every
    machine; its number."""
    ((incident, runbook),) = rack.active()
    assert (runbook, incident.scope, incident.domain) == ("node-down", "domain", FEED)
    assert incident.title.endswith(f": 8 nodes of {FEED}"), incident.title
    with rack.drive.rig.db.session() as session:
        nodes = incident_nodes(session, incident.number, rack.drive.rig.settings.topology)
    assert nodes == rack.nodes
    return incident.number


@pytest.mark.parametrize("backend", ["sqlite"])
@pytest.mark.timeout(180)
def test_a_rack_that_lost_power_is_one_node_down_incident_with_its_ports_as_symptoms(
    rack: Rack,
) -> None:
    bodies = rack.lose_power()
    hcas = rack.fleet.scenario.hardware.ib_hcas

    opened = rack.drive.deliver(bodies["KubeNodeNotReady"])
    assert opened["opened"] is True
    rack.drive.deliver(bodies["BMCUnreachable"])
    ports = rack.drive.deliver(bodies["InfiniBandPortDown"])

    assert ports["opened"] is False
    number = _one_feed_incident(rack)
    assert [rb for _, rb in rack.incidents()] == ["node-down"]
    assert rack.symptoms(number) == {None: 16, "ib-partition": 8 * hcas}
    assert "alert.symptom" in rack.drive.types(number)

    # The domain branch: every BMC read without people, the feed asked for once.
    drive = rack.drive
    states = drive.states(number)
    assert (states["feed_power"], states["feed_sel"]) == ("succeeded", "succeeded")
    assert drive.rows(number)["feed_power"].params["nodes"] == rack.nodes
    for step in NODE_READS:
        assert states[step] == "skipped", step
    assert drive.waiting(number) == ("feed", 0)
    drive.done(number, "feed", "alice", "breaker of pdu-a1 tripped; the IDC reset it")

    # One approval names the count; the other rack is never touched.
    assert drive.waiting(number) == ("feed_cordon", 1)
    assert "--count 8" in drive.refused(number, "feed_cordon", "alice")
    drive.approve(number, "feed_cordon", "alice", count=8)
    assert rack.cordoned() == [True] * 8
    others = rack.fleet.members("rack", "a2")
    assert not any(drive.node(node).unschedulable for node in others)
    assert drive.waiting(number) == ("feed_checkpoints", 0)
    drive.done(number, "feed_checkpoints", "bob", "trainer-7 resumed from step 41000 (02:10)")

    # Power on in batches of four, under one approval naming the count.
    assert drive.waiting(number) == ("feed_power_on", 1)
    drive.approve(number, "feed_power_on", "bob", count=8)
    assert [drive.cycles(node) for node in rack.nodes] == [1] * 8
    assert drive.states(number)["feed_wait_ready"] == "succeeded"
    assert all(drive.node(node).ready for node in rack.nodes)
    assert rack.cordoned() == [True] * 8  # still out until verified
    assert drive.waiting(number) == ("feed_drain", 1)
    states = drive.states(number)
    for step in NODE_ACTIONS:
        assert states[step] == "skipped", step
    assert drive.verified(number)


@pytest.mark.parametrize("backend", ["sqlite"])
@pytest.mark.timeout(180)
def test_an_ib_incident_the_ports_opened_first_is_merged_into_the_feeds_incident(
    rack: Rack,
) -> None:
    bodies = rack.lose_power()

    # The ports' rule fires after 1m, NotReady's after 2m: the leaf's incident comes first.
    first = rack.drive.post(bodies["InfiniBandPortDown"])
    ((leaf, runbook),) = rack.active()
    assert (leaf.number, runbook, leaf.domain) == (first, "ib-partition", LEAF)
    rack.drive.deliver(bodies["KubeNodeNotReady"])

    number = _one_feed_incident(rack)
    with rack.drive.rig.db.session() as session:
        merged = incidents.get(session, first)
        assert (merged.status, merged.merged_into) == ("resolved", number)
    assert "incident.merged" in rack.drive.types(number)
    assert rack.drive.waiting(number) == ("feed", 0)


@pytest.mark.parametrize("backend", ["sqlite"])
@pytest.mark.timeout(180)
def test_a_lone_machine_down_in_a_labelled_rack_stays_a_node_incident_on_todays_branch(
    rack: Rack,
) -> None:
    node = rack.fleet.members("rack", "a2")[3]
    rack.drive.sim.cluster.set_node_ready(node, False)  # hung: the power is on
    number = rack.drive.fire(alertname="KubeNodeNotReady", host=node, node=node)

    ((incident, runbook),) = rack.active()
    assert (incident.number, runbook, incident.scope, incident.domain) == (
        number,
        "node-down",
        "node",
        None,
    )
    states = rack.drive.states(number)
    for step in ("node_status", "power", "sel"):
        assert states[step] == "succeeded", step
    assert rack.drive.results(number)["power"]["power"] == "on"
    for step in FEED_READS:
        assert states[step] == "skipped", step
    assert rack.drive.waiting(number) == ("cordon", 1)
    rack.drive.approve(number, "cordon", "alice")
    assert rack.drive.node(node).unschedulable
    assert rack.drive.waiting(number) == ("checkpoints", 0)
    rack.drive.done(number, "checkpoints", "bob", "no training job on it")

    # Hung with the power on: today's power cycle by two people, not the feed's power-on.
    assert rack.drive.waiting(number) == ("power_cycle", 2)
    states = rack.drive.states(number)
    for step in (*FEED_ACTIONS, "out_of_service", "power_on"):
        assert states[step] == "skipped", step
    assert [rack.drive.node(n).unschedulable for n in rack.nodes] == [False] * 8


@pytest.mark.parametrize("backend", ["sqlite"])
@pytest.mark.timeout(180)
def test_a_first_machine_alone_grows_into_the_feeds_incident_and_its_cordon_is_superseded(
    rack: Rack,
) -> None:
    body = rack.lose_power()["KubeNodeNotReady"]
    first, rest = body["alerts"][:1], body["alerts"][1:]

    number = rack.drive.post({**body, "alerts": first})
    assert rack.drive.waiting(number) == ("cordon", 1)  # one machine: the node branch
    rack.drive.deliver({**body, "alerts": first + rest})

    assert _one_feed_incident(rack) == number
    assert "incident.grew" in rack.drive.types(number)
    states = rack.drive.states(number)
    assert states["feed_power"] == states["feed_sel"] == "succeeded"
    assert rack.drive.rows(number)["feed_power"].params["nodes"] == rack.nodes
    # Every step of the feed's branch is decided again in its turn, the manual check too.
    assert rack.drive.waiting(number) == ("feed", 0)
    # The one machine's cordon, proposed before the incident grew, never runs: it was
    # superseded, and is decided again (skipped: the node branch's) in its turn.
    assert states["cordon"] == "expired"
    assert "step.expired" in rack.drive.types(number)
    assert rack.cordoned() == [False] * 8

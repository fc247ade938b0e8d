"""The three failure-domain runbooks (overheating by row, ib-partition by leaf switch,
storage-failure by storage): how they are written, and both of their branches end to end.

The first part reads the files: each groups by its domain and correlates; the scope comes
from `incident.scope`, never from an annotation; every step that acts on a node of a
domain incident runs over the incident's nodes (`for_each: nodes`) and says which branch
it belongs to; the validator lets only such a step's `with` use `{{ node }}`.

The second part drives them in the simulator with a labelled fleet (rows a and b, leaf
switches ib-leaf-1 and ib-leaf-2, four nodes each), the `topology` setting naming those
labels, the served webhook and the worker: alerts of four nodes of one domain become one
incident that reads, decides once and acts on the set under approvals naming the count;
one node of a labelled domain alone stays a node incident on the single-node branch.
(The single-node branches without a topology: tests/runbooks/test_e2e_*.py.)
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from bot.actions import registry
from bot.clock import FrozenClock
from bot.db import Database
from bot.incidents import service as incidents
from bot.runbooks.schema import Runbook, Step
from bot.runbooks.validate import validate_paths
from bot.sim import seed
from tests.runbooks.drive import RUNBOOKS, Drive, simulator
from tests.support.payloads import alert, notification

DOMAINS = {"overheating": "domain.row", "ib-partition": "domain.leaf", "storage-failure": "storage"}
DOMAIN = 'incident.scope == "domain"'
NODE_SCOPE = 'incident.scope == "node"'
TAKES_A_NODE = {
    "k8s.cordon",
    "k8s.uncordon",
    "k8s.drain",
    "k8s.stop_low_priority",
    "bmc.power_soft_off",
    "bmc.power_on",
}


def _load(name: str) -> Runbook:
    return Runbook.model_validate(yaml.safe_load((RUNBOOKS / f"{name}.yaml").read_text()))


def _domain_only(runbook: Runbook) -> set[str]:
    """Steps that run only for a domain incident: their `when` says so, or requires a step
    that does to have succeeded."""
    found: set[str] = set()
    for step in runbook.steps:
        when = step.when or ""
        needs = re.findall(r"steps\.([a-z0-9_]+)\.status == \"succeeded\"", when)
        if DOMAIN in when or any(name in found for name in needs):
            found.add(step.id)
    return found


# -- how they are written -------------------------------------------------------------------


@pytest.mark.parametrize("name", DOMAINS)
def test_each_groups_by_its_failure_domain_and_correlates_within_two_minutes(name: str) -> None:
    runbook = _load(name)

    assert runbook.group_by == [DOMAINS[name]]
    assert runbook.correlate is not None
    assert (runbook.correlate.window.total_seconds(), runbook.correlate.min_nodes) == (120, 2)
    assert runbook.version >= 2


@pytest.mark.parametrize("name", DOMAINS)
def test_the_scope_is_the_bots_never_a_count_an_alert_annotation_carries(name: str) -> None:
    text = (RUNBOOKS / f"{name}.yaml").read_text(encoding="utf-8")
    runbook = _load(name)
    templates = [*runbook.facts.values()]
    for step in runbook.steps:
        templates += [step.when or "", *(v for v in step.with_.values() if isinstance(v, str))]

    assert not [t for t in templates if "annotations." in t]
    for trick in ("hot_nodes_in_row", "ib_nodes_down", "hostname_row", "| query"):
        assert trick not in text, trick
    assert "topology:" in text  # the header shows the setting the team needs instead
    assert any(DOMAIN in (s.when or "") for s in runbook.steps)


@pytest.mark.parametrize("name", DOMAINS)
def test_every_step_that_acts_on_a_domains_nodes_runs_over_the_set(name: str) -> None:
    runbook = _load(name)
    domain_only = _domain_only(runbook)

    for step in runbook.steps:
        if step.id in domain_only and step.action in TAKES_A_NODE:
            assert step.for_each == "nodes", f"{name}/{step.id} acts on one node of a domain"
        if step.for_each is not None:
            assert step.id in domain_only, f"{name}/{step.id}: for_each outside the domain branch"
            assert step.with_.get("node") == "{{ node }}" or "{{ node }}" in str(step.with_)


@pytest.mark.parametrize("name", DOMAINS)
def test_the_single_node_branch_acts_on_the_alerts_node_only(name: str) -> None:
    runbook = _load(name)
    domain_only = _domain_only(runbook)

    for step in runbook.steps:
        if step.id not in domain_only and step.action in TAKES_A_NODE:
            assert step.for_each is None
            assert step.with_["node"] == "{{ facts.node }}", f"{name}/{step.id}"


def test_the_row_and_the_leaf_take_out_nodes_at_most_four_at_a_time_and_power_on_in_batches() -> (
    None
):
    steps: dict[str, Step] = {}
    for name in ("overheating", "ib-partition"):
        steps.update({f"{name}/{s.id}": s for s in _load(name).steps})

    for key in ("overheating/row_drain", "overheating/row_soft_off", "ib-partition/leaf_drain"):
        assert steps[key].max_parallel == 4, key
    power_on = steps["overheating/row_power_on"]
    assert (power_on.batch, power_on.pause is not None) == (4, True)
    after = [s.id for s in _load("overheating").steps]
    assert after.index("row_power_on") < after.index("row_temperatures_after")
    assert registry.get("k8s.stop_low_priority").risk.value == "change"


def test_the_facility_is_called_once_for_a_row_and_the_switch_checked_once_for_a_leaf() -> None:
    for name, step_id in (("overheating", "facility"), ("ib-partition", "check_fabric")):
        step = next(s for s in _load(name).steps if s.id == step_id)
        assert step.manual is not None and step.for_each is None
        assert DOMAIN in (step.when or "")


def test_node_is_a_name_only_in_the_with_of_a_step_over_many_nodes(tmp_path: Path) -> None:
    body = """\
        id: t
        title: t
        version: 1
        match: {alerts: [A]}
        steps:
          - id: each
            title: t
            action: k8s.cordon
            with: {node: "{{ node }}"}
            for_each: nodes
          - id: one
            title: t
            action: k8s.cordon
            with: {node: "{{ node }}"}
          - id: said
            title: t
            action: k8s.cordon
            with: {node: "n"}
            for_each: nodes
            when: node == "n"
        """
    path = tmp_path / "t.yaml"
    path.write_text("\n".join(line[8:] for line in body.splitlines()) + "\n", encoding="utf-8")

    problems = [str(p) for p in validate_paths([path])]

    assert len(problems) == 2, problems
    assert all("unknown name 'node'" in p for p in problems)
    assert [int(p.split(":")[1]) for p in problems] == [
        14,
        20,
    ]  # `one` (no for_each) and `said` (a when)
    assert validate_paths([RUNBOOKS]) == []


# -- end to end in the simulator ------------------------------------------------------------
# These need the domain incidents (corr: incident.scope / incident.domain, correlation in
# the webhook), the topology read from the nodes (topo) and for_each runs with approvals
# naming the count (each).

ROW_LABEL = "topology.example.com/row"
LEAF_LABEL = "topology.example.com/ib-leaf"
TOPOLOGY = {"levels": [{"name": "row", "label": ROW_LABEL}, {"name": "leaf", "label": LEAF_LABEL}]}
BREAKER = {"breaker_max_fraction": 0.5, "breaker_max_nodes": 8}
"""A domain of four of the fleet's eight nodes fits inside the breaker."""
ROW_A = [f"gpu-node-0{i}" for i in range(1, 5)]
ROW_B = [f"gpu-node-0{i}" for i in range(5, 9)]
HCA = "mlx5_1"
STORAGE = "nfs.storage.svc.cluster.local:/exports/datasets"


@pytest.fixture
def fleet(db: Database, clock: FrozenClock, tmp_path: Path) -> Iterator[Drive]:
    """Eight nodes: gpu-node-01..04 in row a under leaf ib-leaf-1 (the seed's trainers run
    there), 05..08 in row b under ib-leaf-2; the topology setting names both labels."""
    scenario = seed(nodes=4, grace_seconds=5, startup_seconds=2)
    pool = scenario.nodes[0]
    pools = [
        pool.model_copy(
            update={"labels": {**pool.labels, ROW_LABEL: "a", LEAF_LABEL: "ib-leaf-1"}}
        ),
        pool.model_copy(
            update={
                "first": 5,
                "labels": {**pool.labels, ROW_LABEL: "b", LEAF_LABEL: "ib-leaf-2"},
            }
        ),
    ]
    with (
        simulator(scenario.model_copy(update={"nodes": pools})) as sim,
        Drive(db, clock, tmp_path, sim, topology=TOPOLOGY, **BREAKER).serving() as drive,
    ):
        yield drive


def _alerts(nodes: list[str], *, named: bool = False, **labels: Any) -> dict[str, Any]:
    """One notification with an alert per node (`Hostname`, and `node` too if `named`),
    grouped by alertname, as the bot wants its alerts routed."""
    alerts = [alert(host=n, **({"node": n} if named else {}), **labels) for n in nodes]
    return notification(alerts, group={"alertname": labels["alertname"]})


def _domain(drive: Drive, number: int) -> dict[str, Any]:
    """The incident's scope and domain as the engine gives them to templates."""
    with drive.rig.db.session() as session:
        incident: Any = incidents.get(session, number)
        return {"scope": incident.scope, "domain": incident.domain}


def _cordoned(drive: Drive, nodes: list[str]) -> list[bool]:
    return [drive.node(node).unschedulable for node in nodes]


@pytest.mark.parametrize("backend", ["sqlite"])
@pytest.mark.timeout(180)
def test_a_hot_row_calls_the_facility_once_sheds_low_priority_jobs_and_returns_the_row(
    fleet: Drive,
) -> None:
    for node in ROW_A:
        fleet.sim.cluster.heat_gpu(node, 0, 91)
    trainers = {
        f"trainer-{i}": fleet.sim.cluster.get("Pod", "ml", f"trainer-{i}") for i in range(4)
    }
    number = fleet.post(_alerts(ROW_A, alertname="GPUTemperatureHigh", gpu=0))

    assert _domain(fleet, number) == {"scope": "domain", "domain": "row/a"}
    states = fleet.states(number)
    assert states["row_temperatures"] == "succeeded"
    for step in ("temperatures", "gpus"):
        assert states[step] == "skipped", step
    assert states["fans"] == "not_reached"  # the node branch's, after the facility's step
    assert fleet.rows(number)["row_temperatures"].params["nodes"] == ROW_A
    assert fleet.waiting(number) == ("facility", 0)
    fleet.done(number, "facility", "alice", "CRAC-2 of row A tripped; facilities on it")

    assert fleet.waiting(number) == ("row_cordon", 1)
    assert "4" in fleet.refused(number, "row_cordon", "alice")  # the count must be named
    fleet.approve(number, "row_cordon", "alice", count=4)
    assert _cordoned(fleet, ROW_A) == [True] * 4 and _cordoned(fleet, ROW_B) == [False] * 4
    jobs = fleet.results(number)["row_jobs"]
    assert {p["name"] for p in jobs["pods"] if p["low"]} >= set(trainers)

    assert fleet.waiting(number) == ("stop_low_priority", 1)
    fleet.approve(number, "stop_low_priority", "bob", count=4)
    for name, pod in trainers.items():
        now = fleet.sim.cluster.get("Pod", "ml", name)
        assert now is None or now["metadata"]["uid"] != pod["metadata"]["uid"], name

    assert fleet.waiting(number) == ("row_drain", 1)
    fleet.skip(number, "row_drain", "carol", "temperatures falling after the load was shed")
    states = fleet.states(number)
    for step in ("row_soft_off", "cooling_back", "row_power_on", "row_wait_ready"):
        assert states[step] == "skipped", step
    assert states["row_temperatures_after"] == "succeeded"
    assert fleet.waiting(number) == ("watch_cooling", 0)
    fleet.done(number, "watch_cooling", "carol", "inlets at 24 C for 30 min; jobs restarted")
    fleet.approve(number, "row_uncordon", "alice", count=4)

    assert _cordoned(fleet, ROW_A) == [False] * 4
    assert fleet.types(number)[-1] == "runbook.finished"
    assert all(fleet.cycles(node) == 0 for node in ROW_A)
    assert fleet.verified(number)


@pytest.mark.parametrize("backend", ["sqlite"])
@pytest.mark.timeout(180)
def test_a_lone_hot_machine_in_a_labelled_row_stays_a_node_incident_on_its_fans(
    fleet: Drive,
) -> None:
    fleet.sim.cluster.heat_gpu("gpu-node-06", 2, 93)
    number = fleet.post(_alerts(["gpu-node-06"], alertname="GPUTemperatureHigh", gpu=2))

    assert _domain(fleet, number) == {"scope": "node", "domain": None}
    states = fleet.states(number)
    assert states["temperatures"] == states["fans"] == "succeeded"
    for step in ("row_temperatures", "facility", "row_cordon", "stop_low_priority", "row_drain"):
        assert states[step] == "skipped", step
    assert fleet.waiting(number) == ("replace_fan", 0)
    assert _cordoned(fleet, ROW_B) == [False] * 4


@pytest.mark.parametrize("backend", ["sqlite"])
@pytest.mark.timeout(180)
def test_a_dead_leaf_switch_is_one_incident_that_cordons_drains_and_returns_its_nodes(
    fleet: Drive,
) -> None:
    for node in ROW_B:
        fleet.sim.cluster.set_ib_port(node, HCA, False)
    number = fleet.post(_alerts(ROW_B, named=True, alertname="InfiniBandPortDown", device=HCA))

    assert _domain(fleet, number) == {"scope": "domain", "domain": "leaf/ib-leaf-2"}
    assert fleet.states(number)["ports"] == "skipped"
    assert fleet.waiting(number) == ("check_fabric", 0)
    fleet.done(number, "check_fabric", "carol", "ib-leaf-2 lost power")
    assert fleet.waiting(number) == ("leaf_cordon", 1)
    fleet.approve(number, "leaf_cordon", "alice", count=4)
    assert _cordoned(fleet, ROW_B) == [True] * 4
    fleet.approve(number, "leaf_drain", "bob", count=4)

    for node in ROW_B:
        fleet.sim.cluster.set_ib_port(node, HCA, True)
    fleet.done(number, "repair_leaf", "carol", "PSU of ib-leaf-2 replaced")
    fleet.skip(number, "restart_opensm", "carol", "the SM was fine")
    fleet.done(number, "error_counters", "carol", "counters cleared, quiet for 10 min")
    assert fleet.states(number)["leaf_verify"] == "succeeded"
    fleet.done(number, "leaf_bandwidth", "bob", "ib_write_bw 196 Gb/s on all pairs")
    fleet.approve(number, "leaf_uncordon", "alice", count=4)

    assert _cordoned(fleet, ROW_B) == [False] * 4
    assert _cordoned(fleet, ROW_A) == [False] * 4
    states = fleet.states(number)
    for step in ("check_node", "cordon", "drain", "verify_ports", "uncordon"):
        assert states[step] == "skipped", step
    assert fleet.types(number)[-1] == "runbook.finished"
    assert fleet.verified(number)


@pytest.mark.parametrize("backend", ["sqlite"])
@pytest.mark.timeout(180)
def test_an_nfs_export_lost_by_many_nodes_finds_its_jobs_and_cordons_them_if_the_queue_fails(
    fleet: Drive,
) -> None:
    number = fleet.post(
        _alerts(
            ROW_A,
            named=True,
            alertname="SharedFilesystemUnreachable",
            storage=STORAGE,
            storage_kind="nfs",
            volcano_queue="no-such-queue",
        )
    )

    assert _domain(fleet, number) == {"scope": "domain", "domain": f"storage/{STORAGE}"}
    impact = fleet.results(number)["impact_mounts"]
    assert impact["nodes"] == ROW_A and impact["jobs"] == ["StatefulSet ml/trainer"]
    fleet.done(number, "checkpoint_writable", "alice", "touch in /datasets hangs")
    fleet.approve(number, "close_queue", "alice")
    assert fleet.states(number)["close_queue"] == "failed"  # no such queue
    assert fleet.waiting(number) == ("cordon_mounting", 1)
    fleet.approve(number, "cordon_mounting", "bob", count=4)
    assert _cordoned(fleet, ROW_A) == [True] * 4
    assert fleet.states(number)["client_mount"] == "skipped"

    for step in ("nfs_server", "rw_test", "resume_check"):
        fleet.done(number, step, "bob", f"{step}: ok")
    fleet.skip(number, "data_loss", "bob", "nothing lost")
    assert fleet.states(number)["reopen_queue"] == "skipped"
    fleet.approve(number, "uncordon_mounting", "carol", count=4)

    assert _cordoned(fleet, ROW_A) == [False] * 4
    assert fleet.types(number)[-1] == "runbook.finished"
    assert fleet.verified(number)

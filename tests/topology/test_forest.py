"""The forest `runbook-bot topology` prints: each domain under the narrowest wider domain
that holds all its nodes, names in the order people count them, and where a set of nodes
sits in it."""

from __future__ import annotations

from bot.config import load_settings
from bot.sim import fleet
from bot.sim.fleet import LEAF, LEVELS, PDU, RACK, ROW
from bot.topology import Domain, Topology
from bot.topology.forest import enclosing, natural, nest


def fleet_topology(nodes: int) -> Topology:
    layout = fleet(nodes)
    labels = {node: dict(pool.labels) for pool in layout.scenario.nodes for node in pool.names()}
    return Topology.from_labels(load_settings(topology={"levels": LEVELS}).topology, labels)


def test_names_sort_as_people_count_them() -> None:
    names = ["aa", "b", "z", "a", "rack-10", "rack-9", "ab"]

    assert sorted(names, key=natural) == ["a", "b", "z", "aa", "ab", "rack-9", "rack-10"]


def test_each_domain_sits_under_the_narrowest_wider_one_holding_it() -> None:
    branches = nest(fleet_topology(1000))
    by_name = {b.domain.name: b for b in branches}
    rows = [b.domain.value for b in branches if b.depth == 0]

    assert rows[:3] == ["a", "b", "c"] and rows[25:28] == ["z", "aa", "ab"] and len(rows) == 32
    assert by_name["rack/a1"].parent == Domain("row", "a")
    assert by_name["leaf/ib-leaf-02"].parent == Domain("row", "a")  # two racks: beside them
    assert by_name["power/pdu-a1"].parent == Domain("rack", "a1")
    assert by_name["power/pdu-a1"].depth == 2
    order = [b.domain.name for b in branches]
    assert order[:4] == ["row/a", "rack/a1", "power/pdu-a1", "rack/a2"]
    assert order.index("leaf/ib-leaf-02") < order.index("row/b")


def test_a_set_of_nodes_belongs_to_the_narrowest_domains_holding_all_of_it() -> None:
    branches = nest(fleet_topology(64))
    row_a = [f"gpu-node-{i:04d}" for i in range(1, 33)]

    assert enclosing(branches, ["gpu-node-0003"]) == [
        Domain("power", "pdu-a1"),
        Domain("leaf", "ib-leaf-01"),
    ]
    assert enclosing(branches, row_a[16:]) == [Domain("leaf", "ib-leaf-02")]
    assert enclosing(branches, row_a) == [Domain("row", "a")]
    assert enclosing(branches, ["gpu-node-0001", "gpu-node-0064"]) == []  # two rows
    assert enclosing(branches, []) == []


def test_a_node_without_labels_is_in_no_branch() -> None:
    settings = load_settings(topology={"levels": LEVELS}).topology
    labels = {"gpu-a": {ROW: "a", RACK: "a1", LEAF: "l1", PDU: "p1"}, "gpu-bare": {}}
    branches = nest(Topology.from_labels(settings, labels))

    assert [b.domain.name for b in branches] == ["row/a", "rack/a1", "leaf/l1", "power/p1"]
    assert enclosing(branches, ["gpu-bare"]) == []

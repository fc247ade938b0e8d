"""The node cache against the simulated API server, through the real `kubernetes` client:
one list, then a watch that keeps it current; a re-list once the watch is broken and the
snapshot stale; the stale snapshot kept (and one warning) while the API is down."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from kubernetes import client

from bot.clock import FrozenClock
from bot.config import Settings, load_settings
from bot.sim import SimHandle, running
from bot.sim.fleet import LEVELS, RACK, fleet
from bot.topology import Domain, NodeCache
from tests.deploy import chart
from tests.sim.waiting import TIME_SCALE, eventually

START = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)
FIRST = "gpu-node-0001"


@pytest.fixture
def clock() -> FrozenClock:
    return FrozenClock(START)


@pytest.fixture
def cache(fleet_settings: Settings, clock: FrozenClock) -> Iterator[NodeCache]:
    nodes = NodeCache(fleet_settings, clock=clock, watch_seconds=1, backoff=(60.0, 60.0))
    yield nodes
    nodes.stop()


def lists(sim: SimHandle) -> int:
    """How many times the nodes were listed (not watched)."""
    made = sim.cluster.requests_made("GET", "/api/v1/nodes")
    return sum(1 for r in made if r.query.get("watch") not in ("true", "1"))


def relabel(sim: SimHandle, node: str, rack: str) -> None:
    core = client.CoreV1Api(sim.api_client())
    core.patch_node(node, {"metadata": {"labels": {RACK: rack}}})


def test_the_first_list_places_every_node_in_its_domains(
    cache: NodeCache, fleet_sim: SimHandle
) -> None:
    topology = cache.start()

    assert len(topology.nodes) == 40
    assert topology.read_at == START
    assert topology.domains_of(FIRST) == [
        Domain("row", "a"),
        Domain("rack", "a1"),
        Domain("leaf", "ib-leaf-01"),
        Domain("power", "pdu-a1"),
        Domain("node", FIRST),
    ]
    tree = topology.tree()
    assert {row: len(nodes) for row, nodes in tree["row"].items()} == {"a": 32, "b": 8}
    assert {leaf: len(nodes) for leaf, nodes in tree["leaf"].items()} == {
        "ib-leaf-01": 16,
        "ib-leaf-02": 16,
        "ib-leaf-03": 8,
    }
    assert len(tree["rack"]) == len(tree["power"]) == 5
    assert lists(fleet_sim) == 1


def test_a_label_change_is_seen_through_the_watch_without_listing_again(
    cache: NodeCache, fleet_sim: SimHandle
) -> None:
    cache.start()
    eventually(lambda: cache.healthy, what="the watch to stream")

    relabel(fleet_sim, FIRST, "a9")

    eventually(
        lambda: cache.current().domain_of(FIRST, "rack") == Domain("rack", "a9"),
        what="the new rack label through the watch",
    )
    assert cache.current().members(Domain("rack", "a1")) == [
        f"gpu-node-{i:04d}" for i in range(2, 9)
    ]
    assert lists(fleet_sim) == 1


def test_a_deleted_node_leaves_its_domains(cache: NodeCache, fleet_sim: SimHandle) -> None:
    cache.start()
    eventually(lambda: cache.healthy, what="the watch to stream")

    fleet_sim.cluster.remove_node("gpu-node-0040")

    eventually(lambda: not cache.current().knows("gpu-node-0040"), what="the deletion")
    assert len(cache.current().members(Domain("row", "b"))) == 7


def test_a_node_without_a_level_label_is_its_own_domain_there(
    cache: NodeCache, fleet_sim: SimHandle
) -> None:
    cache.start()
    eventually(lambda: cache.healthy, what="the watch to stream")

    fleet_sim.cluster.add_node("gpu-node-spare")  # no topology labels at all

    eventually(lambda: cache.current().knows("gpu-node-spare"), what="the new node")
    topology = cache.current()
    assert topology.domain_of("gpu-node-spare", "row") == Domain("node", "gpu-node-spare")
    assert topology.domains_of("gpu-node-spare") == [Domain("node", "gpu-node-spare")]
    assert "gpu-node-spare" not in topology.members(Domain("row", "a"))


def test_a_watch_whose_history_expired_lists_again_at_once(
    tmp_path: Path, clock: FrozenClock
) -> None:
    with running(fleet(16).scenario, time_scale=TIME_SCALE, history=4) as sim:
        settings = load_settings(
            kubeconfig=sim.write_kubeconfig(tmp_path / "kubeconfig"), topology={"levels": LEVELS}
        )
        cache = NodeCache(settings, clock=clock, backoff=(60.0, 60.0))
        try:
            cache.start()
            eventually(lambda: cache.healthy, what="the watch to stream")
            # Ten changes at once: more than the server keeps, so the watch gets 410 Gone.
            sim.cluster.label_nodes({f"gpu-node-{i:04d}": {RACK: "z9"} for i in range(1, 11)})
            eventually(
                lambda: len(cache.current().members(Domain("rack", "z9"))) == 10,
                what="the nodes listed again after the 410",
            )
            listed = lists(sim)
        finally:
            cache.stop()

    assert listed == 2  # the first list, and one after the 410: no back-off in between


def test_a_broken_watch_is_listed_again_once_the_snapshot_is_stale(
    cache: NodeCache, fleet_sim: SimHandle, clock: FrozenClock
) -> None:
    cache.start()
    eventually(lambda: cache.healthy, what="the watch to stream")
    # The watch's streams last a second; the next one is refused, and the watch thread
    # then backs off for a minute.
    fleet_sim.cluster.fail_requests("/api/v1/nodes", 500, times=1, method="GET")
    eventually(lambda: not cache.healthy, what="the watch to break")
    relabel(fleet_sim, FIRST, "a9")

    fresh = cache.current()
    clock.advance(timedelta(seconds=61))
    relisted = cache.current()

    assert fresh.domain_of(FIRST, "rack") == Domain("rack", "a1")  # not stale yet: kept
    assert relisted.domain_of(FIRST, "rack") == Domain("rack", "a9")
    assert relisted.read_at == START + timedelta(seconds=61)
    assert lists(fleet_sim) == 2


def test_while_the_api_is_down_the_stale_snapshot_is_kept_with_one_warning(
    tmp_path: Path, clock: FrozenClock, caplog: pytest.LogCaptureFixture
) -> None:
    with running(fleet(16).scenario, time_scale=TIME_SCALE) as sim:
        settings = load_settings(
            kubeconfig=sim.write_kubeconfig(tmp_path / "kubeconfig"),
            kube_timeout="2s",
            topology={"levels": LEVELS},
        )
        cache = NodeCache(settings, clock=clock, watch_seconds=1, backoff=(60.0, 60.0))
        cache.start()
    try:
        eventually(lambda: not cache.healthy, what="the watch to fail")  # the API is gone
        caplog.set_level(logging.WARNING, logger="bot.topology.cache")
        caplog.clear()
        seen = []
        for _ in range(3):
            clock.advance(timedelta(seconds=61))
            seen.append(cache.current())
        warnings = [r.getMessage() for r in caplog.records if "cannot be listed" in r.getMessage()]
    finally:
        cache.stop()

    assert [len(t.nodes) for t in seen] == [16, 16, 16]
    assert all(t.read_at is not None and t.read_at <= START + timedelta(seconds=1) for t in seen)
    assert len(warnings) == 1
    assert "keeping the node labels read at 2026-12-03T12:00" in warnings[0]


def test_the_shipped_rbac_lets_the_service_account_list_and_watch_the_nodes(
    tmp_path: Path, clock: FrozenClock
) -> None:
    with running(fleet(16).scenario, time_scale=TIME_SCALE, rbac=chart.shipped_rbac()) as sim:
        settings = load_settings(
            kubeconfig=sim.write_kubeconfig(tmp_path / "kubeconfig"),  # the account's token
            topology={"levels": LEVELS},
        )
        cache = NodeCache(settings, clock=clock)
        try:
            topology = cache.start()
            eventually(lambda: cache.healthy, what="the watch to stream")
        finally:
            cache.stop()
        made = sim.cluster.requests_made("GET", "/api/v1/nodes")

    assert len(topology.nodes) == 16
    assert {(r.query.get("watch", "list"), r.status) for r in made} == {
        ("list", 200),
        ("true", 200),
    }


def test_without_levels_nothing_is_listed_and_every_node_is_its_own_domain(
    fleet_sim: SimHandle, tmp_path: Path, clock: FrozenClock
) -> None:
    settings = load_settings(kubeconfig=fleet_sim.write_kubeconfig(tmp_path / "kc"))
    cache = NodeCache(settings, clock=clock)

    topology = cache.start()
    cache.stop()

    assert topology.nodes == {} and topology.read_at is None
    assert topology.domains_of(FIRST) == [Domain("node", FIRST)]
    assert fleet_sim.cluster.requests_made() == []


def test_without_a_cluster_the_topology_is_empty(
    tmp_path: Path, clock: FrozenClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.kube/config either
    settings = load_settings(topology={"levels": LEVELS})
    cache = NodeCache(settings, clock=clock)

    topology = cache.start()

    assert cache.enabled is False
    assert topology.nodes == {} and topology.level_names() == ["row", "rack", "leaf", "power"]

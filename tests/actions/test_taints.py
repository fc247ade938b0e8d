"""k8s.taint, k8s.untaint and k8s.label on the simulated cluster: the node's taints,
labels and the bot's records after, the requests made, and concurrent writers."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from kubernetes import client

from bot.actions import ActionContext, execute, registry
from bot.clock import FrozenClock
from bot.config import load_settings
from bot.sim import SimHandle
from tests.actions.conftest import Recorder, RunAction

MERGE = "application/merge-patch+json"
XID = {"key": "runbook-bot/xid", "value": "79", "effect": "NoSchedule"}
MAINTENANCE = {"key": "maintenance", "value": "true", "effect": "NoSchedule"}


def _node(sim: SimHandle, name: str = "gpu-node-02") -> Any:
    return sim.cluster.snapshot().nodes[name]


def _records(sim: SimHandle, name: str = "gpu-node-02") -> list[dict[str, str]]:
    raw = _node(sim, name).annotations.get("runbook-bot/taints")
    return json.loads(raw) if raw else []


def _human_taint(sim: SimHandle, node: str, taint: dict[str, str]) -> None:
    """Someone adds a taint with kubectl (taints replace as a list, so send them all)."""
    taints = [*_node(sim, node).taints, taint]
    client.CoreV1Api(sim.api_client()).patch_node(
        node, {"spec": {"taints": taints}}, _content_type=MERGE
    )


def test_taint_adds_the_taint_and_the_bots_record_and_a_second_run_changes_nothing(
    run_action: RunAction, sim: SimHandle, recorder: Recorder
) -> None:
    first: Any = run_action("k8s.taint", node="gpu-node-02", reason="XID 79 on GPU 5", **XID).result
    second: Any = run_action("k8s.taint", node="gpu-node-02", **XID).result

    assert _node(sim).taints == [XID]
    assert _records(sim) == [
        {
            "key": "runbook-bot/xid",
            "effect": "NoSchedule",
            "incident": "INC-7",
            "by": "alice",
            "reason": "XID 79 on GPU 5",
            "at": "2026-11-29T22:10:00Z",
        }
    ]
    assert (first.ok, first.changed, first.taints) == (
        True,
        True,
        ["runbook-bot/xid=79:NoSchedule"],
    )
    assert first.summary == "gpu-node-02 tainted runbook-bot/xid=79:NoSchedule"
    assert (second.ok, second.changed) == (True, False)
    assert (
        second.summary
        == "gpu-node-02 already has taint runbook-bot/xid=79:NoSchedule; nothing to do"
    )
    assert len(sim.cluster.requests_made("PATCH", "/api/v1/nodes/gpu-node-02")) == 1
    assert recorder.progress == ["gpu-node-02 tainted runbook-bot/xid=79:NoSchedule"]


def test_taint_with_another_value_updates_the_one_taint_in_place(
    run_action: RunAction, sim: SimHandle
) -> None:
    run_action("k8s.taint", node="gpu-node-02", **XID)

    result: Any = run_action("k8s.taint", node="gpu-node-02", **{**XID, "value": "48"}).result

    assert _node(sim).taints == [{**XID, "value": "48"}]
    assert [r["key"] for r in _records(sim)] == ["runbook-bot/xid"]
    assert (result.changed, result.taints) == (True, ["runbook-bot/xid=48:NoSchedule"])


def test_a_no_execute_taint_carries_the_time_it_was_added(
    run_action: RunAction, sim: SimHandle
) -> None:
    run_action("k8s.taint", node="gpu-node-02", key="runbook-bot/xid", effect="NoExecute")

    assert _node(sim).taints == [
        {"key": "runbook-bot/xid", "effect": "NoExecute", "timeAdded": "2026-11-29T22:10:00Z"}
    ]


def test_dry_run_taint_is_sent_with_dry_run_all_and_changes_nothing(
    run_action: RunAction, sim: SimHandle
) -> None:
    before = sim.cluster.snapshot()

    result: Any = run_action("k8s.taint", ctx_={"dry_run": True}, node="gpu-node-02", **XID).result

    assert sim.cluster.snapshot() == before
    assert (result.ok, result.dry_run, result.changed) == (True, True, True)
    assert result.summary == "gpu-node-02 tainted runbook-bot/xid=79:NoSchedule (dry run)"
    [patch] = sim.cluster.requests_made("PATCH", "/api/v1/nodes/gpu-node-02")
    assert patch.query.get("dryRun") == "All"


def test_breaker_refuses_a_no_schedule_taint_on_another_gpu_node(
    run_action: RunAction, sim: SimHandle
) -> None:
    run_action("k8s.cordon", node="gpu-node-01")

    refused: Any = run_action("k8s.taint", node="gpu-node-02", **XID).result
    soft: Any = run_action(
        "k8s.taint", node="gpu-node-02", key="runbook-bot/xid", effect="PreferNoSchedule"
    ).result

    assert refused.ok is False
    assert "(gpu-node-01); the limit is 1" in refused.summary
    assert soft.ok is True  # PreferNoSchedule takes nothing out of service
    assert _node(sim).taints == [{"key": "runbook-bot/xid", "effect": "PreferNoSchedule"}]


def test_breaker_counts_gpu_nodes_the_bot_tainted_no_schedule(
    run_action: RunAction, sim: SimHandle
) -> None:
    run_action("k8s.taint", node="gpu-node-01", **XID)

    second: Any = run_action("k8s.taint", node="gpu-node-02", **XID).result

    assert second.ok is False
    assert _node(sim).taints == []


class HumanWritesFirst(client.ApiClient):
    """The bot's client, except that just before its first PATCH of `node` a human adds a
    taint through the API: the bot's read is then stale, as in a real race."""

    def __init__(self, sim: SimHandle, node: str, taint: dict[str, str]) -> None:
        config = client.Configuration()
        config.host = sim.url
        super().__init__(config)
        self.sim, self.node, self.taint, self.raced = sim, node, taint, False

    def call_api(self, method: str, url: str, *args: Any, **kwargs: Any) -> Any:
        if method == "PATCH" and f"/api/v1/nodes/{self.node}" in url and not self.raced:
            self.raced = True
            _human_taint(self.sim, self.node, self.taint)
        return super().call_api(method, url, *args, **kwargs)


def test_a_taint_added_between_the_bots_read_and_write_is_kept_after_a_conflict(
    sim: SimHandle, recorder: Recorder
) -> None:
    racing = HumanWritesFirst(sim, "gpu-node-02", MAINTENANCE)
    ctx = ActionContext(
        actor="alice",
        settings=load_settings(),
        clock=FrozenClock(datetime(2026, 11, 29, 22, 10, tzinfo=UTC)),
        incident="INC-7",
        kube_factory=lambda: racing,
        progress=recorder.progress.append,
    )
    try:
        result: Any = execute(registry.get("k8s.taint"), {"node": "gpu-node-02", **XID}, ctx).result
    finally:
        racing.close()

    assert result.ok is True
    assert _node(sim).taints == [MAINTENANCE, XID]
    # The human's write, the bot's stale one refused, the bot's again after a fresh read.
    assert [r.status for r in sim.cluster.requests_made("PATCH")] == [200, 409, 200]
    assert len(sim.cluster.requests_made("GET", "/api/v1/nodes/gpu-node-02")) == 2
    assert "gpu-node-02 changed while the bot edited it; reading it again" in recorder.progress


def test_taint_gives_up_after_repeated_conflicts_with_a_retry_later(
    run_action: RunAction, sim: SimHandle
) -> None:
    sim.cluster.fail_requests("/api/v1/nodes/gpu-node-02", 409, times=5, method="PATCH")

    outcome = run_action("k8s.taint", node="gpu-node-02", **XID)

    assert outcome.result.ok is False
    assert "the node changed 5 times while the bot edited it; try again" in outcome.result.summary
    assert outcome.retry_after == 5
    assert len(sim.cluster.requests_made("PATCH", "/api/v1/nodes/gpu-node-02")) == 5
    assert _node(sim).taints == []


def test_untaint_removes_the_bots_taint_and_its_record_and_keeps_a_humans(
    run_action: RunAction, sim: SimHandle
) -> None:
    _human_taint(sim, "gpu-node-02", MAINTENANCE)
    run_action("k8s.taint", node="gpu-node-02", **XID)

    result: Any = run_action("k8s.untaint", node="gpu-node-02", key="runbook-bot/xid").result

    assert (result.ok, result.changed) == (True, True)
    assert result.summary == "gpu-node-02: removed runbook-bot/xid=79:NoSchedule"
    assert _node(sim).taints == [MAINTENANCE]
    assert "runbook-bot/taints" not in _node(sim).annotations


def test_untaint_refuses_a_taint_the_bot_did_not_add_unless_forced(
    run_action: RunAction, sim: SimHandle
) -> None:
    _human_taint(sim, "gpu-node-02", MAINTENANCE)

    refused: Any = run_action("k8s.untaint", node="gpu-node-02", key="maintenance").result
    kept = _node(sim).taints
    forced: Any = run_action(
        "k8s.untaint", node="gpu-node-02", key="maintenance", force=True
    ).result

    assert (refused.ok, refused.changed, kept) == (False, False, [MAINTENANCE])
    assert refused.summary == (
        "maintenance=true:NoSchedule on gpu-node-02 was not added by the bot; leaving it "
        "(pass force=true to remove it anyway)"
    )
    assert (forced.ok, forced.changed) == (True, True)
    assert "(forced: the bot had not added maintenance=true:NoSchedule)" in forced.summary
    assert _node(sim).taints == []


def test_untaint_with_an_effect_removes_only_that_effect(
    run_action: RunAction, sim: SimHandle
) -> None:
    run_action("k8s.taint", node="gpu-node-02", **{**XID, "effect": "PreferNoSchedule"})
    run_action("k8s.taint", node="gpu-node-02", **XID)

    run_action("k8s.untaint", node="gpu-node-02", key="runbook-bot/xid", effect="NoSchedule")

    assert _node(sim).taints == [{**XID, "effect": "PreferNoSchedule"}]
    assert [(r["key"], r["effect"]) for r in _records(sim)] == [
        ("runbook-bot/xid", "PreferNoSchedule")
    ]


def test_untaint_after_a_human_removed_the_bots_taint_drops_the_record_and_logs_it(
    run_action: RunAction, sim: SimHandle, recorder: Recorder
) -> None:
    run_action("k8s.taint", node="gpu-node-02", **XID)
    client.CoreV1Api(sim.api_client()).patch_node(
        "gpu-node-02", {"spec": {"taints": None}}, _content_type=MERGE
    )

    result: Any = run_action("k8s.untaint", node="gpu-node-02", key="runbook-bot/xid").result

    assert (result.ok, result.changed) == (True, False)
    assert result.summary == "gpu-node-02 has no taint runbook-bot/xid; nothing to do"
    assert _records(sim) == []
    [(_, summary, data)] = [r for r in recorder.records if r[0] == "k8s.untainted_by_human"]
    assert data == {"node": "gpu-node-02", "taints": ["runbook-bot/xid:NoSchedule"]}


def test_untaint_of_a_taint_that_is_not_there_makes_no_write(
    run_action: RunAction, sim: SimHandle
) -> None:
    result: Any = run_action("k8s.untaint", node="gpu-node-02", key="runbook-bot/xid").result

    assert (result.ok, result.changed) == (True, False)
    assert sim.cluster.requests_made("PATCH") == []


def test_label_sets_and_removes_and_a_second_run_changes_nothing(
    run_action: RunAction, sim: SimHandle
) -> None:
    labels = {"runbook-bot/quarantine": "xid-79", "topology.kubernetes.io/zone": None}

    first: Any = run_action("k8s.label", node="gpu-node-02", labels=labels).result
    second: Any = run_action("k8s.label", node="gpu-node-02", labels=labels).result

    node_labels = _node(sim).labels
    assert node_labels["runbook-bot/quarantine"] == "xid-79"
    assert "topology.kubernetes.io/zone" not in node_labels
    assert node_labels["nvidia.com/gpu.present"] == "true"  # others untouched
    assert (first.changed, first.applied, first.removed) == (
        True,
        {"runbook-bot/quarantine": "xid-79"},
        ["topology.kubernetes.io/zone"],
    )
    assert first.summary == (
        "gpu-node-02 labelled runbook-bot/quarantine=xid-79 topology.kubernetes.io/zone-"
    )
    assert (second.ok, second.changed) == (True, False)
    assert len(sim.cluster.requests_made("PATCH", "/api/v1/nodes/gpu-node-02")) == 1


def test_dry_run_label_changes_nothing(run_action: RunAction, sim: SimHandle) -> None:
    before = sim.cluster.snapshot()

    result: Any = run_action(
        "k8s.label", ctx_={"dry_run": True}, node="gpu-node-02", labels={"a": "b"}
    ).result

    assert (result.ok, result.changed, result.dry_run) == (True, True, True)
    assert sim.cluster.snapshot() == before
    [patch] = sim.cluster.requests_made("PATCH", "/api/v1/nodes/gpu-node-02")
    assert patch.query.get("dryRun") == "All"


def test_label_refuses_the_label_the_circuit_breaker_counts_gpu_nodes_by(
    run_action: RunAction, sim: SimHandle
) -> None:
    result: Any = run_action(
        "k8s.label", node="gpu-node-02", labels={"nvidia.com/gpu.present": None}
    ).result

    assert result.ok is False
    assert "nvidia.com/gpu.present" in result.summary and "circuit breaker" in result.summary
    assert sim.cluster.requests_made() == []


def test_taint_untaint_and_label_name_a_node_that_does_not_exist(
    run_action: RunAction, sim: SimHandle
) -> None:
    results = [
        run_action("k8s.taint", node="gpu-node-99", **XID).result,
        run_action("k8s.untaint", node="gpu-node-99", key="runbook-bot/xid").result,
        run_action("k8s.label", node="gpu-node-99", labels={"a": "b"}).result,
    ]

    for result in results:
        assert result.ok is False
        assert result.summary.startswith("node gpu-node-99 does not exist in the cluster")
    assert sim.cluster.requests_made("PATCH") == []

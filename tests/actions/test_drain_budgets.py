"""k8s.drain waits on a PodDisruptionBudget's status, not on a fixed retry (issue 20,
"Drain at fleet scale"): a pod the budget refuses is evicted again the moment the budget
allows one more disruption, and a budget that never allows is named with its status.

A small fleet (time x50): ReplicaSet ml/web, one pod on each of gpu-node-01..03 (or three
on gpu-node-01), under web-pdb (maxUnavailable 1, or minAvailable 3 for one that never
allows); replacements land on the spare nodes and are Ready 0.5 s after binding. Drains
on a `FrozenClock` show when they evicted on the drain's own clock; kubectl's fixed
schedule would have retried no sooner than 5 s after a refusal.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from kubernetes import client

from bot.actions import ActionContext, execute, registry
from bot.actions.context import Allowance
from bot.actions.kubernetes import draining
from bot.actions.kubernetes.drain import DrainResult
from bot.clock import FrozenClock, ScaledClock
from bot.config import load_settings
from bot.sim import Rbac, SimHandle, running
from bot.sim.scenario import parse
from tests.actions.conftest import START
from tests.deploy import chart
from tests.sim.waiting import TIME_SCALE, eventually

NODES = ["gpu-node-01", "gpu-node-02", "gpu-node-03"]


def _fleet(budget: dict[str, Any], placement: list[str]) -> Any:
    return parse(
        {
            "name": "pdb-fleet",
            "termination_grace_seconds": 1,
            "startup_seconds": 0.5,
            "nodes": [{"count": 6}],
            "workloads": [
                {
                    "kind": "ReplicaSet",
                    "namespace": "ml",
                    "name": "web",
                    "replicas": 3,
                    "image": "busybox:1.36",
                    "nodes": placement,
                    "budget": {"name": "web-pdb", **budget},
                }
            ],
        },
        source="test_drain_budgets",
    )


@pytest.fixture
def spread() -> Iterator[SimHandle]:
    with running(_fleet({"max_unavailable": 1}, NODES), time_scale=TIME_SCALE) as sim:
        yield sim


@pytest.fixture
def stacked() -> Iterator[SimHandle]:
    with running(_fleet({"max_unavailable": 1}, NODES[:1]), time_scale=TIME_SCALE) as sim:
        yield sim


@pytest.fixture
def locked() -> Iterator[SimHandle]:
    with running(_fleet({"min_available": 3}, NODES[:1]), time_scale=TIME_SCALE) as sim:
        yield sim


def _run(sim: SimHandle, node: str, clock: Any, allowance: Any = None, **raw: Any) -> Any:
    ctx = ActionContext(
        actor="alice",
        settings=load_settings(),
        clock=clock,
        incident="INC-9",
        kube_factory=sim.api_client,
        allowance=allowance,
    )
    return execute(registry.get("k8s.drain"), {"node": node, **raw}, ctx).result


def _drain(sim: SimHandle, node: str, clock: Any, **raw: Any) -> DrainResult:
    result = _run(sim, node, clock, **raw)
    assert isinstance(result, DrainResult), result.summary
    return result


def _evictions(sim: SimHandle) -> list[tuple[str, int]]:
    """(pod, status) of each eviction of the budget's pods, in the order the API answered."""
    return [
        (r.path.split("/")[-2], r.status)
        for r in sim.cluster.requests_made("POST", "/api/v1/namespaces/ml/pods/*/eviction")
    ]


def test_pods_one_budget_refuses_go_one_by_one_as_soon_as_it_allows_each(
    stacked: SimHandle,
) -> None:
    clock = FrozenClock(START)

    result = _drain(stacked, "gpu-node-01", clock, grace_period=0)

    assert result.ok, result.summary
    assert len(result.evicted) == 3
    answered = _evictions(stacked)
    accepted = [pod for pod, status in answered if status == 201]
    # One accepted at once; each other refused once, then accepted when its turn came.
    assert len(accepted) == 3 and len(set(accepted)) == 3
    refused = [pod for pod, status in answered if status == 429]
    assert sorted(refused) == sorted(accepted[1:])
    # Their second tries followed the budget's status: no retry waited for kubectl's 5 s,
    # and the drain's clock never slept that long.
    assert draining.RETRY_INTERVAL not in clock.slept
    assert result.duration_seconds < draining.RETRY_INTERVAL


def test_drains_across_nodes_under_one_budget_evict_in_the_turns_it_allows(
    spread: SimHandle,
) -> None:
    clock = FrozenClock(START)
    # One approval names the three nodes (six GPU nodes: the per-action bound is one).
    allowance = Allowance(nodes=frozenset(NODES), count=3, domain="rack/r1")
    results: dict[str, Any] = {}

    def drain(node: str) -> None:
        results[node] = _run(spread, node, clock, allowance, grace_period=0, timeout="60s")

    threads = [threading.Thread(target=drain, args=(node,)) for node in NODES]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)

    assert sorted(results) == NODES
    assert all(isinstance(r, DrainResult) and r.ok for r in results.values()), [
        r.summary for r in results.values()
    ]
    answered = _evictions(spread)
    accepted = [pod for pod, status in answered if status == 201]
    assert len(accepted) == 3 and len(set(accepted)) == 3
    # The budget allowed one disruption at a time: every pod was accepted once, and no pod
    # was refused more often than there were turns before it.
    refusals = {pod: sum(1 for p, s in answered if p == pod and s == 429) for pod in accepted}
    assert all(count <= len(NODES) - 1 for count in refusals.values()), answered
    for node in NODES:
        assert not [p for p in spread.cluster.snapshot().pods_on(node) if p[0] == "ml"]


def test_a_budget_that_never_allows_is_named_with_its_status_when_the_drain_gives_up(
    locked: SimHandle,
) -> None:
    clock = FrozenClock(START)

    result = _drain(locked, "gpu-node-01", clock, grace_period=0, timeout="2s")

    assert not result.ok
    assert result.evicted == []
    assert len(result.remaining) == 3
    for note in result.remaining:
        assert "eviction refused once: PDB ml/web-pdb (needs 3 healthy pods, has 3)" in (
            note.reason
        )
        assert "PDB ml/web-pdb never allowed it meanwhile" in note.reason
        assert "(disruptionsAllowed 0: 3 healthy pods, 3 needed)" in note.reason
    assert result.summary.startswith("gpu-node-01 not drained after 2s: 0 pods gone, 3 pods")
    # Each pod was tried once: the wait was on the budget's status, not a retry schedule.
    assert sorted(status for _, status in _evictions(locked)) == [429, 429, 429]
    assert result.duration_seconds == 2.0


def _budget_status(sim: SimHandle) -> tuple[int, int, int]:
    policy = client.PolicyV1Api(sim.api_client())
    status = policy.read_namespaced_pod_disruption_budget("web-pdb", "ml").status
    return status.disruptions_allowed, status.current_healthy, status.desired_healthy


def test_the_simulated_budget_status_is_spent_at_eviction_and_back_when_the_replacement_is_ready(
    spread: SimHandle,
) -> None:
    core = client.CoreV1Api(spread.api_client())
    (pod, *_) = sorted(p["metadata"]["name"] for p in spread.cluster.objects("Pod", "ml"))
    before = _budget_status(spread)

    core.create_namespaced_pod_eviction(
        pod, "ml", client.V1Eviction(metadata=client.V1ObjectMeta(name=pod, namespace="ml"))
    )
    spent = _budget_status(spread)  # read at once: the eviction itself wrote it

    assert before == (1, 3, 2)
    assert spent == (0, 2, 2)
    eventually(lambda: _budget_status(spread) == (1, 3, 2), what="the replacement to be Ready")
    live = {
        p["metadata"]["name"]
        for p in spread.cluster.objects("Pod", "ml")
        if "deletionTimestamp" not in p["metadata"]
    }
    assert pod not in live and len(live) == 3


@pytest.fixture
def unwatched() -> Iterator[SimHandle]:
    """The stacked fleet, its API held to the shipped RBAC less `watch` on budgets (a
    cluster whose role predates it)."""
    text = chart.RBAC_FILE.read_text(encoding="utf-8").replace(
        "verbs: [list, watch]", "verbs: [list]"
    )
    documents = list(yaml.safe_load_all(text))
    rbac = Rbac.from_manifests(
        documents, namespace=chart.NAMESPACE, name=chart.SERVICE_ACCOUNT, token=chart.TOKEN
    )
    scenario = _fleet({"max_unavailable": 1}, NODES[:1])
    scenario = scenario.model_copy(update={"namespaces": [*scenario.namespaces, "runbook-bot"]})
    with running(scenario, time_scale=TIME_SCALE, rbac=rbac) as sim:
        yield sim


def test_without_watch_on_budgets_a_refused_pod_is_retried_on_kubectls_schedule(
    unwatched: SimHandle,
) -> None:
    # The simulator's pace: the fixed retries must give replacements time to get Ready.
    clock = ScaledClock(TIME_SCALE, timeline=FrozenClock(START))

    result = _drain(unwatched, "gpu-node-01", clock, grace_period=0, timeout="60s")

    assert result.ok, result.summary
    assert len(result.evicted) == 3
    budgets = "/apis/policy/v1/namespaces/ml/poddisruptionbudgets"
    watches = [r for r in unwatched.cluster.requests_made("GET", budgets) if "watch" in r.query]
    assert [r.status for r in watches] == [403]  # tried once, then the fixed schedule
    answered = _evictions(unwatched)
    assert sorted(s for _, s in answered).count(201) == 3
    assert any(s == 429 for _, s in answered)

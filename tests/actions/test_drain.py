"""k8s.drain and k8s.drain_unsafe against the simulated cluster, through the real client.

The seed cluster (time x50: a 5 s grace period takes 0.1 s): gpu-node-01 has trainer-0,
two DaemonSet pods, the kube-proxy mirror pod and a bare pod (debug-shell); gpu-node-02
has trainer-1 and an llm-inference pod with an emptyDir cache; trainer-pdb keeps three of
four trainers up. The drain's 1 s poll keeps the simulator's pace by
default; the tests of budgets and timeouts run the drain on a `FrozenClock` instead, with
pods that leave at once (grace_period 0), so each poll, retry and deadline falls at an
exact moment and what the test arranges happens between two of them.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from kubernetes import client

from bot.actions.kubernetes import api, draining, marks, waits
from bot.actions.kubernetes.drain import DrainResult
from bot.clock import FrozenClock
from bot.errors import ParamsInvalid
from bot.sim import SimHandle
from tests.actions.conftest import START, Recorder, RunAction
from tests.sim.waiting import eventually

EVICTIONS = "/api/v1/namespaces/*/pods/*/eviction"


def _drain(run_action: RunAction, action: str = "k8s.drain", **raw: Any) -> DrainResult:
    result = run_action(action, **raw).result
    assert isinstance(result, DrainResult)
    return result


def _on(sim: SimHandle, node: str) -> set[tuple[str, str]]:
    return sim.cluster.snapshot().pods_on(node)


def _inference_pod(sim: SimHandle, node: str) -> str:
    (name,) = [name for ns, name in _on(sim, node) if ns == "serving"]
    return name


def _uids(sim: SimHandle, namespace: str) -> set[str]:
    return {p["metadata"]["uid"] for p in sim.cluster.objects("Pod", namespace)}


def _evictions(sim: SimHandle, namespace: str, name: str) -> list[int]:
    path = f"/api/v1/namespaces/{namespace}/pods/{name}/eviction"
    return [r.status for r in sim.cluster.requests_made("POST", path)]


@pytest.fixture
def clock() -> FrozenClock:
    return FrozenClock(START)


def _stuck_trainer_0(sim: SimHandle) -> str:
    """Evict trainer-0 and make it hang terminating: trainer-pdb has no disruption left.
    Its uid."""
    core = client.CoreV1Api(sim.api_client())
    sim.cluster.make_stuck("ml", "trainer-0")
    core.create_namespaced_pod_eviction(
        "trainer-0", "ml", client.V1Eviction(metadata=client.V1ObjectMeta(name="trainer-0"))
    )
    stuck = sim.cluster.get("Pod", "ml", "trainer-0")
    assert stuck is not None
    return str(stuck["metadata"]["uid"])


def _replaced_and_ready(sim: SimHandle, namespace: str, name: str, old_uid: str) -> bool:
    pod = sim.cluster.get("Pod", namespace, name)
    if pod is None or pod["metadata"]["uid"] == old_uid:
        return False
    conditions = pod.get("status", {}).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def test_drain_evicts_controller_pods_and_leaves_daemonset_and_mirror_pods_running(
    sim: SimHandle, run_action: RunAction
) -> None:
    kept = {p for p in _on(sim, "gpu-node-02") if p[0] in ("gpu-operator", "kube-system")}
    uids = _uids(sim, "gpu-operator") | _uids(sim, "kube-system")
    cache = _inference_pod(sim, "gpu-node-02")

    result = _drain(run_action, node="gpu-node-02", reason="ECC errors")

    assert result.ok, result.summary
    assert sorted(result.evicted) == ["ml/trainer-1", f"serving/{cache}"]
    assert len(kept) == 3 and _on(sim, "gpu-node-02") == kept
    assert _uids(sim, "gpu-operator") | _uids(sim, "kube-system") == uids
    assert sim.cluster.snapshot().terminating == frozenset()
    assert sorted((n.pod, n.reason.split()[0]) for n in result.skipped) == sorted(
        (f"{ns}/{name}", "mirror" if ns == "kube-system" else "DaemonSet") for ns, name in kept
    )
    assert sim.cluster.requests_made("POST", "/api/v1/namespaces/gpu-operator/*") == []
    assert sim.cluster.requests_made("POST", "/api/v1/namespaces/kube-system/*") == []
    daemon_set_reads = sim.cluster.requests_made("GET", "/apis/apps/v1/namespaces/*/daemonsets/*")
    assert len(daemon_set_reads) == 2 and {r.status for r in daemon_set_reads} == {200}


def test_emptydir_pod_is_evicted_and_the_data_loss_is_reported(
    sim: SimHandle, run_action: RunAction, recorder: Recorder
) -> None:
    cache = f"serving/{_inference_pod(sim, 'gpu-node-02')}"

    result = _drain(run_action, node="gpu-node-02")

    assert result.ok, result.summary
    assert result.emptydir_deleted == [cache] and cache in result.evicted
    assert result.delete_emptydir_data is True
    assert f"deleting emptyDir data of {cache}" in recorder.progress
    assert "emptyDir data deleted for 1" in result.summary
    assert ("serving", cache.split("/")[1]) not in _on(sim, "gpu-node-02")
    started = next(data for kind, _, data in recorder.records if kind == "drain.started")
    assert started["emptydir"] == [cache]


def test_a_bare_pod_refuses_the_whole_node_before_any_eviction(
    sim: SimHandle, run_action: RunAction, recorder: Recorder
) -> None:
    before = _on(sim, "gpu-node-01")

    result = _drain(run_action, node="gpu-node-01")

    assert result.ok is False
    assert [(n.pod, "k8s.drain_unsafe" in n.reason) for n in result.refused] == [
        ("default/debug-shell", True)
    ]
    assert "nothing evicted" in result.summary and "default/debug-shell" in result.summary
    assert sim.cluster.requests_made("POST", EVICTIONS) == []
    assert sim.cluster.requests_made("DELETE") == []
    assert _on(sim, "gpu-node-01") == before
    assert sim.cluster.snapshot().terminating == frozenset()
    assert sim.cluster.snapshot().nodes["gpu-node-01"].unschedulable is True  # as kubectl
    assert recorder.types() == ["action.started", "drain.started", "drain.refused", "action.failed"]


def test_drain_unsafe_with_force_evicts_the_bare_pod_for_good(
    sim: SimHandle, run_action: RunAction
) -> None:
    result = _drain(run_action, "k8s.drain_unsafe", node="gpu-node-01", force=True)

    assert result.ok, result.summary
    assert sorted(result.evicted) == ["default/debug-shell", "ml/trainer-0"]
    assert _evictions(sim, "default", "debug-shell") == [201]
    assert sim.cluster.get("Pod", "default", "debug-shell") is None
    assert {ns for ns, _ in _on(sim, "gpu-node-01")} == {"gpu-operator", "kube-system"}


def test_drain_unsafe_with_disable_eviction_deletes_without_evicting(
    sim: SimHandle, run_action: RunAction
) -> None:
    result = _drain(run_action, "k8s.drain_unsafe", node="gpu-node-02", disable_eviction=True)

    assert result.ok, result.summary
    assert sim.cluster.requests_made("POST", EVICTIONS) == []
    deletes = sim.cluster.requests_made("DELETE", "/api/v1/namespaces/*/pods/*")
    assert sorted(r.path.split("/")[-1] for r in deletes) == sorted(
        p.split("/")[1] for p in result.evicted
    )
    assert len(deletes) == 2 and {r.status for r in deletes} == {200}


@pytest.mark.parametrize("flag", ["force", "disable_eviction"])
def test_k8s_drain_refuses_disruptive_flags_and_points_at_drain_unsafe(
    sim: SimHandle, run_action: RunAction, flag: str
) -> None:
    with pytest.raises(ParamsInvalid, match=rf"{flag}=True: .*use k8s\.drain_unsafe"):
        run_action("k8s.drain", node="gpu-node-01", **{flag: True})

    assert sim.cluster.requests_made() == []


def test_pdb_blocked_eviction_goes_the_moment_the_budget_allows_it(
    sim: SimHandle, run_action: RunAction, recorder: Recorder, clock: FrozenClock
) -> None:
    # trainer-0 hangs terminating, so trainer-pdb (3 of 4) has no disruption left.
    stuck = _stuck_trainer_0(sim)

    def release() -> None:
        # 2 s in: trainer-0 goes, and its replacement is Ready elsewhere before the drain's
        # clock moves on; the budget's status now allows one disruption.
        sim.cluster.remove_pod("ml", "trainer-0")
        eventually(
            lambda: _replaced_and_ready(sim, "ml", "trainer-0", stuck),
            what="trainer-0's replacement to be Ready",
        )

    clock.call_later(2, release)

    result = _drain(run_action, ctx_={"clock": clock}, node="gpu-node-02", grace_period=0)

    assert result.ok, result.summary
    assert "ml/trainer-1" in result.evicted
    assert _evictions(sim, "ml", "trainer-1") == [429, 201]
    # Evictions at 0 s; the inference pod read gone at 1 s; trainer-1 evicted again at 2 s,
    # when the budget allowed it (not at kubectl's 5 s), and read gone a poll later.
    assert clock.slept == [waits.STILL_CLOCK_STEP, waits.STILL_CLOCK_STEP, draining.POLL_INTERVAL]
    assert result.duration_seconds == 2 + draining.POLL_INTERVAL
    cache = next(pod for pod in result.evicted if pod.startswith("serving/"))
    blocked = "waiting on ml/trainer-1: PDB ml/trainer-pdb (needs 3 healthy pods, has 3)"
    # A bare "0/2 evicted" comes first when the inference pod's eviction answers before
    # trainer-1's refusal; from then on the lines are the clock's.
    assert [line for line in recorder.progress if line != "0/2 evicted"] == [
        "gpu-node-02 cordoned",
        f"deleting emptyDir data of {cache}",
        f"0/2 evicted, {blocked}",
        f"1/2 evicted, {blocked}",
        "1/2 evicted",
        "2/2 evicted",
    ]
    assert result.summary == (
        "gpu-node-02 drained: evicted 2 pods (emptyDir data deleted for 1), 3 left in place in 3.0s"
    )
    trainer = sim.cluster.get("Pod", "ml", "trainer-1")
    assert trainer is None or trainer["spec"].get("nodeName") != "gpu-node-02"


def test_pods_one_budget_refuses_retry_in_turn_and_never_within_5s() -> None:
    refusals: Counter[str] = Counter()

    def first_retry(name: str, budget: str) -> float:
        pod = draining._Pod(draining.PodRef("ml", name, "uid"))
        answer = draining._Answer("blocked", budget, budget)
        delay = draining._apply(pod, answer, 0.0, False, refusals)
        return -1.0 if delay is None else delay

    shards = [first_retry(f"shard-{i}", "PDB ml/shard-pdb") for i in range(4)]
    other = first_retry("trainer-0", "PDB ml/trainer-pdb")

    assert shards[0] == other == draining.RETRY_INTERVAL
    assert all(draining.RETRY_INTERVAL <= s < 2 * draining.RETRY_INTERVAL for s in shards)
    assert len({round(s, 2) for s in shards}) == 4  # four different moments in the cycle


def test_eviction_answered_404_counts_as_already_gone(
    sim: SimHandle, run_action: RunAction
) -> None:
    sim.cluster.fail_evictions("ml", "trainer-1", 404)

    result = _drain(run_action, node="gpu-node-02")

    assert result.ok, result.summary
    assert [(n.pod, n.reason) for n in result.gone] == [("ml/trainer-1", "already gone")]
    assert _evictions(sim, "ml", "trainer-1") == [404]
    assert sim.cluster.requests_made("GET", "/api/v1/namespaces/ml/pods/trainer-1") == []


def test_a_pod_rebound_to_another_node_is_not_evicted_again(
    sim: SimHandle, run_action: RunAction, clock: FrozenClock
) -> None:
    stuck = _stuck_trainer_0(sim)

    def move_and_release() -> None:
        # 2 s in, while trainer-1 waits on its budget: it is replaced on gpu-node-03, and
        # trainer-0 goes, so the budget allows a disruption again.
        sim.cluster.rebind("ml", "trainer-1", "gpu-node-03")
        sim.cluster.remove_pod("ml", "trainer-0")
        eventually(
            lambda: _replaced_and_ready(sim, "ml", "trainer-0", stuck),
            what="trainer-0's replacement to be Ready",
        )

    clock.call_later(2, move_and_release)

    result = _drain(run_action, ctx_={"clock": clock}, node="gpu-node-02", grace_period=0)

    assert result.ok, result.summary
    assert [(n.pod, n.reason) for n in result.gone] == [
        ("ml/trainer-1", "replaced by a new pod of that name on gpu-node-03 while waiting")
    ]
    assert _evictions(sim, "ml", "trainer-1") == [429]
    # kubectl re-reads the pod before evicting it again, and finds it moved.
    assert result.duration_seconds == 2.0
    moved = sim.cluster.get("Pod", "ml", "trainer-1")
    assert moved is not None and moved["spec"]["nodeName"] == "gpu-node-03"
    assert "deletionTimestamp" not in moved["metadata"]


def test_timeout_returns_the_pods_that_remain_and_why(
    sim: SimHandle, run_action: RunAction, recorder: Recorder, clock: FrozenClock
) -> None:
    sim.cluster.make_stuck("ml", "trainer-3")

    outcome = run_action("k8s.drain", ctx_={"clock": clock}, node="gpu-node-04", timeout="2s")

    result = outcome.result
    assert isinstance(result, DrainResult)
    assert result.ok is False and outcome.retry_after is None
    assert [n.pod for n in result.remaining] == ["ml/trainer-3"]
    assert result.remaining[0].reason.startswith("evicted 2s ago, still terminating")
    assert result.summary.startswith("gpu-node-04 not drained after 2s: 0 pods gone, 1 pod")
    assert ("ml", "trainer-3") in sim.cluster.snapshot().terminating
    # Evicted at 0 s, read at 1 s, and at the 2 s deadline the drain stops waiting.
    assert clock.slept == [draining.POLL_INTERVAL] * 2
    assert result.duration_seconds == 2.0
    reads = sim.cluster.requests_made("GET", "/api/v1/namespaces/ml/pods/trainer-3")
    assert len(reads) == 1
    finished = next(data for kind, _, data in recorder.records if kind == "drain.finished")
    assert finished["timed_out"] is True and finished["remaining"][0]["pod"] == "ml/trainer-3"
    assert finished["duration_seconds"] == 2.0
    assert recorder.types() == [
        "action.started",
        "drain.started",
        "drain.finished",
        "action.failed",
    ]


def test_dry_run_reports_the_plan_and_changes_nothing(
    sim: SimHandle, run_action: RunAction
) -> None:
    before = sim.cluster.snapshot()

    result = _drain(run_action, ctx_={"dry_run": True}, node="gpu-node-02")

    after = sim.cluster.snapshot()
    assert result.ok and result.dry_run, result.summary
    assert len(result.evicted) == 2 and "would drain" in result.summary
    assert (after.nodes, after.pods, after.terminating) == (
        before.nodes,
        before.pods,
        before.terminating,
    )
    writes = [r for r in sim.cluster.requests_made() if r.method != "GET"]
    assert [r.method for r in writes] == ["PATCH", "POST", "POST"]
    assert all(r.query.get("dryRun") == "All" for r in writes)
    assert not [r for r in sim.cluster.requests_made("GET", "/api/v1/namespaces/*/pods/*")]


def test_breaker_refuses_a_drain_when_the_bot_holds_its_limit_of_gpu_nodes(
    sim: SimHandle, run_action: RunAction
) -> None:
    held = run_action("k8s.cordon", node="gpu-node-03").result  # the limit of 4 nodes is 1
    before = _on(sim, "gpu-node-02")

    result = run_action("k8s.drain", node="gpu-node-02").result  # a plain Result: it failed

    assert held.ok and result.ok is False
    assert "refusing to take gpu-node-02 out of service" in result.summary
    assert "gpu-node-03" in result.summary
    assert sim.cluster.snapshot().nodes["gpu-node-02"].unschedulable is False
    assert sim.cluster.requests_made("POST", EVICTIONS) == []
    assert _on(sim, "gpu-node-02") == before


def test_admin_override_lets_a_drain_through_the_breaker_and_is_recorded(
    sim: SimHandle, run_action: RunAction, recorder: Recorder
) -> None:
    run_action("k8s.cordon", node="gpu-node-03")

    result = _drain(run_action, ctx_={"admin_override": True}, node="gpu-node-02")

    assert result.ok, result.summary
    overrides = [data for kind, _, data in recorder.records if kind == "breaker.override"]
    assert overrides == [
        {"node": "gpu-node-02", "held": ["gpu-node-03"], "limit": 1, "gpu_nodes": 4}
    ]
    assert sim.cluster.snapshot().nodes["gpu-node-02"].unschedulable is True


def test_a_node_cordoned_by_a_human_stays_theirs_and_still_drains(
    sim: SimHandle, run_action: RunAction, recorder: Recorder
) -> None:
    core = client.CoreV1Api(sim.api_client())
    body = {"spec": {"unschedulable": True}}
    core.patch_node("gpu-node-02", body, _content_type=api.MERGE_PATCH)

    result = _drain(run_action, node="gpu-node-02")

    node = sim.cluster.snapshot().nodes["gpu-node-02"]
    assert result.ok, result.summary
    assert node.unschedulable is True
    assert not set(node.annotations) & set(marks.KEYS)
    assert "gpu-node-02 is already cordoned (by someone else); draining it" in recorder.progress
    assert len(sim.cluster.requests_made("PATCH")) == 1  # the human's, not ours
    assert len(result.evicted) == 2


def test_pod_selector_drains_only_the_pods_it_matches(
    sim: SimHandle, run_action: RunAction
) -> None:
    cache = _inference_pod(sim, "gpu-node-02")

    result = _drain(run_action, node="gpu-node-02", pod_selector="app=llm-inference")

    assert result.ok, result.summary
    assert result.evicted == [f"serving/{cache}"] and result.skipped == []
    assert ("ml", "trainer-1") in _on(sim, "gpu-node-02")
    listed = sim.cluster.requests_made("GET", "/api/v1/pods")
    assert listed[-1].query["labelSelector"] == "app=llm-inference"


def test_an_eviction_error_fails_that_pod_and_the_others_still_leave(
    sim: SimHandle, run_action: RunAction
) -> None:
    cache = _inference_pod(sim, "gpu-node-02")
    sim.cluster.fail_evictions("serving", cache, 403)

    result = _drain(run_action, node="gpu-node-02")

    assert result.ok is False
    assert result.evicted == ["ml/trainer-1"]
    assert [n.pod for n in result.remaining] == [f"serving/{cache}"]
    assert "403" in result.remaining[0].reason and "RBAC" in result.remaining[0].reason
    assert ("serving", cache) in _on(sim, "gpu-node-02")


@pytest.mark.parametrize(
    "raw",
    [
        {"node": "gpu-node-01; rm -rf /"},
        {"node": "gpu-node-01$(reboot)"},
        {"node": "a" * 10240},
        {"node": "gpu-node-02", "reason": "x" * 10240},
        {"node": "gpu-node-02", "pod_selector": "app=x;rm -rf /"},
        {"node": "gpu-node-02", "pod_selector": "a" * 10240},
        {"node": "gpu-node-02", "timeout": "3h"},
        {"node": "gpu-node-02", "timeout": "0s"},
        {"node": "gpu-node-02", "grace_period": -2},
        {"node": "gpu-node-02", "shell": "true"},
    ],
    ids=lambda raw: ",".join(f"{k}={str(v)[:12]}" for k, v in raw.items()),
)
def test_bad_parameters_are_refused_before_any_api_request(
    sim: SimHandle, run_action: RunAction, recorder: Recorder, raw: dict[str, Any]
) -> None:
    with pytest.raises(ParamsInvalid, match="k8s.drain: invalid parameters"):
        run_action("k8s.drain", **raw)

    assert sim.cluster.requests_made() == []
    assert recorder.records == [] and recorder.progress == []

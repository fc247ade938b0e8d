"""Steps over many nodes (`for_each: nodes`), proposed, approved and run for real: the
proposal holds one set of parameters per node and binds to the node list, approving a
change to many nodes names the count, and the claimed run cordons the nodes in the
simulated cluster (the real `kubernetes` client) at most `max_parallel` at once, batch
after batch, until the end, the first failure or a person stopping the rest.

Concurrency is counted, not timed: the simulated API server holds each node's read until
the test releases it, so the nodes in flight are the holds that arrived."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from bot.actions import registry
from bot.clock import FrozenClock
from bot.db import Database
from bot.errors import ApprovalRefused, ProposalSuperseded, TransitionRefused
from bot.runbooks import claims, engine, foreach, service, validate
from bot.runbooks.schema import Step
from bot.sim import SimHandle, running, seed
from bot.sim.cluster import RequestHold
from bot.worker import Worker
from tests.runbooks.conftest import Write
from tests.runbooks.rig import Rig
from tests.sim.waiting import TIME_SCALE, eventually
from tests.support.payloads import alert, notification

WAIT = 60.0
NODES = [f"gpu-node-0{n}" for n in range(1, 7)]
GROUP = {"alertname": "GPUXIDError"}


def runbook(**shape: Any) -> str:
    extra = "".join(f"        {key}: {value}\n" for key, value in shape.items())
    return (
        """\
    id: row-cordon
    title: t
    version: 1
    match: {alerts: [GPUXIDError]}
    steps:
      - id: cordon
        title: Cordon the set
        action: k8s.cordon
        for_each: nodes
        with: {node: "{{ node }}", reason: "row {{ incident.ref }}"}
"""
        + extra
    )


@pytest.fixture
def sim() -> Iterator[SimHandle]:
    with running(seed(nodes=8, grace_seconds=5, startup_seconds=2), time_scale=TIME_SCALE) as h:
        yield h


@pytest.fixture
def rig(db: Database, clock: FrozenClock, tmp_path: Path) -> Rig:
    # The breaker (its own tests) is opened wide: these tests are about the set.
    return Rig(
        db,
        clock,
        tmp_path,
        breaker_max_fraction=1.0,
        breaker_max_nodes=64,
        breaker_global_max_fraction=1.0,
        kube_timeout=timedelta(minutes=5),
    )


@pytest.fixture
def holds(sim: SimHandle) -> Iterator[list[RequestHold]]:
    made: list[RequestHold] = []
    yield made
    for hold in made:
        hold.release()


def _open(rig: Rig, nodes: list[str]) -> int:
    """One incident whose alerts name `nodes`, its first step proposed."""
    body = notification([alert(host=node) for node in nodes], group=GROUP)
    result = rig.ingest(body)
    assert result.opened
    Worker(rig.db, rig.settings, rig.clock).propose()
    return result.incident


def _grow(rig: Rig, nodes: list[str]) -> None:
    """More alerts of the same group (the incident's nodes grow), then the engine plans."""
    result = rig.ingest(notification([alert(host=node) for node in nodes], group=GROUP))
    with rig.db.transaction() as session:
        engine.advance(session, result.incident, rig.clock.now(), rig.settings)


def _worker(rig: Rig, sim: SimHandle) -> Worker:
    return Worker(rig.db, rig.settings, rig.clock, kube_factory=sim.api_client, owner="w1")


def _hold(sim: SimHandle, holds: list[RequestHold], node: str) -> RequestHold:
    hold = sim.cluster.hold_requests(f"/api/v1/nodes/{node}", method="GET")
    holds.append(hold)
    return hold


def _cordoned(sim: SimHandle) -> set[str]:
    return {name for name, node in sim.cluster.snapshot().nodes.items() if node.unschedulable}


def _progress(rig: Rig, number: int) -> foreach.Tally:
    run = rig.runs(number)["cordon"]
    return foreach.tally(run.progress, run.params)


def test_a_for_each_proposal_holds_each_nodes_parameters_bound_by_one_hash(rig: Rig) -> None:
    rig.write(runbook())
    number = _open(rig, NODES[:4])

    run = rig.runs(number)["cordon"]
    assert run.state == "awaiting_approval" and run.approvals_required == 1
    assert run.params == {
        "for_each": "nodes",
        "nodes": NODES[:4],
        "with": [{"node": n, "reason": f"row INC-{number}"} for n in NODES[:4]],
        "domain": None,
    }
    assert run.params_hash == engine.params_hash(run.params)
    assert run.summary.startswith(
        "k8s.cordon on 4 nodes (gpu-node-01 ... gpu-node-04): needs one person naming the "
        "count (4) before"
    )
    proposed = [e for e in rig.log(number) if e.type == "step.awaiting_approval"][-1]
    assert "k8s.cordon on 4 nodes (gpu-node-01 ... gpu-node-04) needs approval" in (
        proposed.summary
    )
    assert proposed.data["params_hash"] == run.params_hash


def test_a_step_over_no_nodes_is_skipped_saying_why(rig: Rig) -> None:
    rig.write(runbook())
    body = notification([alert(host="")], group=GROUP)
    body["alerts"][0]["labels"].pop("Hostname")
    result = rig.ingest(body)
    Worker(rig.db, rig.settings, rig.clock).propose()

    run = rig.runs(result.incident)["cordon"]
    assert run.state == "skipped"
    assert (
        run.summary
        == "skipped: the incident's alerts name no node, so there is nothing to run it on"
    )


def test_approving_a_change_to_many_nodes_names_the_count(rig: Rig) -> None:
    rig.write(runbook())
    number = _open(rig, NODES[:4])

    with pytest.raises(ApprovalRefused, match=r"names the count; send --count 4 "):
        rig.approve(number, "cordon", "alice")
    with pytest.raises(ApprovalRefused, match=r"you named 3 nodes but step cordon runs"):
        rig.approve(number, "cordon", "alice", count=3)
    assert rig.approvals(number, "cordon") == []

    run = rig.approve(number, "cordon", "alice", count=4)
    assert run.state == "approved" and run.approved_count == 4
    approved = [e for e in rig.log(number) if e.type == "step.approved"][-1]
    assert approved.data["count"] == 4


def test_a_changed_node_list_supersedes_the_proposal_and_the_old_approval_is_refused(
    rig: Rig,
) -> None:
    rig.write(runbook())
    number = _open(rig, NODES[:3])
    first = rig.runs(number)["cordon"]

    rig.ingest(notification([alert(host=NODES[3])], group=GROUP))  # a fourth node joins
    with pytest.raises(ProposalSuperseded, match=r"now name 4 nodes; it is proposed again"):
        rig.approve(number, "cordon", "alice", count=3)

    runs = rig.all_runs(number, "cordon")
    assert [(r.attempt, r.state) for r in runs] == [(1, "expired"), (2, "awaiting_approval")]
    assert runs[1].params["nodes"] == NODES[:4] and runs[1].params_hash != first.params_hash
    superseded = next(e for e in rig.log(number) if e.type == "step.superseded")
    assert superseded.data["added"] == [NODES[3]] and superseded.data["removed"] == []
    # An approval pinned to the old list is refused; the new one names the new count.
    with pytest.raises(ApprovalRefused, match=r"the parameters changed since you saw them"):
        rig.approve(number, "cordon", "alice", count=4, params_hash=first.params_hash)
    with pytest.raises(ApprovalRefused, match=r"you named 3 nodes"):
        rig.approve(number, "cordon", "alice", count=3)
    assert rig.approve(number, "cordon", "alice", count=4).state == "approved"


def test_the_engine_supersedes_an_awaiting_proposal_when_the_incident_grows(rig: Rig) -> None:
    rig.write(runbook())
    number = _open(rig, NODES[:2])
    _grow(rig, NODES[2:3])

    runs = rig.all_runs(number, "cordon")
    assert [r.state for r in runs] == ["expired", "awaiting_approval"]
    assert runs[0].summary.startswith("superseded: the incident's nodes changed (2 -> 3: +1")
    assert runs[1].params["nodes"] == NODES[:3]


def test_max_parallel_bounds_the_cordons_in_flight(
    rig: Rig, sim: SimHandle, holds: list[RequestHold]
) -> None:
    rig.write(runbook(max_parallel=2))
    held = {node: _hold(sim, holds, node) for node in NODES[:4]}
    number = _open(rig, NODES[:4])
    rig.approve(number, "cordon", "alice", count=4)
    worker = _worker(rig, sim)

    assert worker.run_once() is True
    assert held[NODES[0]].arrived.wait(WAIT) and held[NODES[1]].arrived.wait(WAIT)
    counted = eventually(
        lambda: (t := _progress(rig, number)).running == 2 and t,
        timeout=WAIT,
        what="two nodes running",
    )
    assert (counted.running, counted.left, counted.succeeded) == (2, 2, 0)
    assert not held[NODES[2]].arrived.is_set() and not held[NODES[3]].arrived.is_set()

    held[NODES[0]].release()  # one ends: the third starts, never a fourth beside it
    assert held[NODES[2]].arrived.wait(WAIT)
    eventually(lambda: _progress(rig, number).succeeded == 1, timeout=WAIT, what="one done")
    assert _progress(rig, number).running == 2
    assert not held[NODES[3]].arrived.is_set()

    for node in NODES[1:4]:
        held[node].release()
    assert worker.settle(WAIT) is True
    run = rig.runs(number)["cordon"]
    assert run.state == "succeeded"
    assert run.result is not None
    assert (run.result["succeeded"], run.result["failed"], run.result["left"]) == (4, 0, 0)
    assert set(run.result["nodes"]) == set(NODES[:4])
    assert all(n["state"] == "succeeded" for n in run.result["nodes"].values())
    assert run.summary == "k8s.cordon succeeded on all 4 nodes"
    assert _cordoned(sim) == set(NODES[:4])


def test_batches_wait_their_pause_on_the_clock(rig: Rig, sim: SimHandle) -> None:
    rig.write(runbook(max_parallel=4, batch=2, pause="10m"))
    number = _open(rig, NODES[:5])
    rig.approve(number, "cordon", "alice", count=5)
    worker = _worker(rig, sim)
    before = len(rig.clock.slept)

    assert worker.run_once() is True
    assert worker.settle(WAIT) is True

    run = rig.runs(number)["cordon"]
    assert run.state == "succeeded" and _cordoned(sim) == set(NODES[:5])
    # Three batches (2, 2, 1): two pauses of ten minutes on the injected clock.
    pauses = [s for s in rig.clock.slept[before:] if s >= 1.0]
    assert sum(pauses) == 2 * 600
    patches = [
        r.path.rsplit("/", 1)[-1]
        for r in sim.cluster.requests_made(method="PATCH")
        if r.path.startswith("/api/v1/nodes/")
    ]
    assert sorted(patches[:2]) == NODES[:2] and sorted(patches[2:4]) == NODES[2:4]


def test_stop_on_first_failure_starts_no_node_after_it(rig: Rig, sim: SimHandle) -> None:
    rig.write(runbook())
    nodes = [NODES[0], "gpu-node-01-gone", NODES[1], NODES[2]]  # sorted: the ghost is second
    number = _open(rig, nodes)
    rig.approve(number, "cordon", "alice", count=4)
    worker = _worker(rig, sim)

    assert worker.run_once() is True and worker.settle(WAIT) is True

    run = rig.runs(number)["cordon"]
    assert run.state == "failed" and run.result is not None
    assert (run.result["succeeded"], run.result["failed"], run.result["left"]) == (1, 1, 2)
    assert run.result["nodes"]["gpu-node-01-gone"]["state"] == "failed"
    assert "stopped at the first failure" in run.summary and "gpu-node-01-gone:" in run.summary
    assert _cordoned(sim) == {NODES[0]}
    assert "runbook.stopped" in rig.types(number)


def test_stop_on_never_goes_on_past_a_failure(rig: Rig, sim: SimHandle) -> None:
    rig.write(runbook(stop_on="never"))
    nodes = [NODES[0], "gpu-node-01-gone", NODES[1], NODES[2]]
    number = _open(rig, nodes)
    rig.approve(number, "cordon", "alice", count=4)
    worker = _worker(rig, sim)

    assert worker.run_once() is True and worker.settle(WAIT) is True

    run = rig.runs(number)["cordon"]
    assert run.state == "failed" and run.result is not None
    assert (run.result["succeeded"], run.result["failed"], run.result["left"]) == (3, 1, 0)
    assert run.summary.startswith("k8s.cordon on 4 nodes failed: 3 of 4 succeeded, 1 failed")
    assert _cordoned(sim) == set(NODES[:3])


def test_stopping_the_rest_lets_the_running_finish_and_starts_none(
    rig: Rig, sim: SimHandle, holds: list[RequestHold]
) -> None:
    rig.write(runbook(max_parallel=2))
    held = {node: _hold(sim, holds, node) for node in NODES[:2]}
    number = _open(rig, NODES[:6])
    with pytest.raises(TransitionRefused, match=r"no node has started: cancel it instead"):
        service.stop(
            rig.db, number, "cordon", who=rig.who("bob"), clock=rig.clock, settings=rig.settings
        )
    rig.approve(number, "cordon", "alice", count=6)
    worker = _worker(rig, sim)
    assert worker.run_once() is True
    assert held[NODES[0]].arrived.wait(WAIT) and held[NODES[1]].arrived.wait(WAIT)

    service.stop(
        rig.db,
        number,
        "cordon",
        who=rig.who("bob"),
        clock=rig.clock,
        settings=rig.settings,
        note="wrong row",
    )
    with pytest.raises(ApprovalRefused, match=r"bob already stopped the rest of step cordon"):
        service.stop(
            rig.db, number, "cordon", who=rig.who("carol"), clock=rig.clock, settings=rig.settings
        )
    for hold in held.values():
        hold.release()
    assert worker.settle(WAIT) is True
    worker.run_once()

    run = rig.runs(number)["cordon"]
    assert run.state == "cancelled" and run.result is not None
    assert (run.result["succeeded"], run.result["left"], run.result["stopped_by"]) == (2, 4, "bob")
    assert run.summary.startswith("k8s.cordon on 6 nodes stopped by bob: 2 of 6 succeeded")
    assert _cordoned(sim) == set(NODES[:2])  # the two running finished; none started after
    requested = next(e for e in rig.log(number) if e.type == "step.stop_requested")
    assert requested.actor_id == "bob" and requested.data["note"] == "wrong row"
    ended = next(e for e in rig.log(number) if e.type == "step.cancelled")
    assert ended.data["left_nodes"] == NODES[2:6]
    assert "runbook.stopped" in rig.types(number)


def test_the_steps_timeout_holds_for_the_whole_run_and_no_node_starts_after_it(
    rig: Rig, sim: SimHandle, holds: list[RequestHold]
) -> None:
    rig.write(runbook(timeout="30s"))
    first = _hold(sim, holds, NODES[0])
    number = _open(rig, NODES[:3])
    rig.approve(number, "cordon", "alice", count=3)
    worker = _worker(rig, sim)

    assert worker.run_once() is True
    assert first.arrived.wait(WAIT)
    rig.clock.advance(timedelta(seconds=31))
    worker.run_once()  # past the timeout: recorded, and the run cancelled
    first.release()
    assert worker.settle(WAIT) is False  # nothing in hand: the result was recorded already

    run = rig.runs(number)["cordon"]
    assert run.state == "timed_out" and run.result is not None
    assert run.result["nodes"][NODES[0]]["state"] == "running"  # where it was at the timeout
    assert (run.result["running"], run.result["left"], run.result["succeeded"]) == (1, 2, 0)
    eventually(lambda: "action.failed" in rig.types(number), timeout=WAIT, what="the cancel")
    assert _cordoned(sim) == set()
    started = [r.path for r in sim.cluster.requests_made(method="GET") if r.path.endswith(NODES[1])]
    assert started == []  # the second node never started


def test_later_steps_see_the_result_per_node_and_the_counts(rig: Rig, sim: SimHandle) -> None:
    rig.write(
        runbook(stop_on="never", on_failure="continue")
        + """\
      - id: again
        title: Uncordon what was cordoned
        action: k8s.uncordon
        for_each: nodes
        when: steps.cordon.result.failed == 1 and steps.cordon.result.succeeded == 2
        with: {node: "{{ node }}"}
"""
    )
    nodes = [NODES[0], "gpu-node-01-gone", NODES[1]]
    number = _open(rig, nodes)
    rig.approve(number, "cordon", "alice", count=3)
    worker = _worker(rig, sim)
    assert worker.run_once() is True and worker.settle(WAIT) is True

    runs = rig.runs(number)
    assert runs["cordon"].state == "failed" and runs["cordon"].result is not None
    assert runs["cordon"].result["nodes"]["gpu-node-01-gone"]["state"] == "failed"
    assert runs["again"].state == "awaiting_approval"  # its `when` read the counts
    assert runs["again"].params["nodes"] == nodes


def test_a_claimed_run_carries_its_plan_and_the_count_its_approval_named(rig: Rig) -> None:
    rig.write(runbook(max_parallel=3, batch=2, pause="1m", stop_on="never"))
    number = _open(rig, NODES[:4])
    rig.approve(number, "cordon", "alice", count=4)

    taken = claims.claim(rig.db, owner="w1", settings=rig.settings, clock=rig.clock)

    assert taken is not None and taken.incident == number
    assert taken.plan == foreach.Plan(max_parallel=3, batch=2, pause=60.0, stop_on="never", count=4)
    assert taken.params["nodes"] == NODES[:4]


def test_validate_lets_a_for_each_steps_with_see_node_and_nothing_else(write: Write) -> None:
    path = write(
        runbook()
        + """\
      - id: look
        title: t
        action: k8s.node_status
        when: node == "x"
        with: {node: "{{ node }}"}
"""
    )
    problems = [str(problem).split(" ", 1)[1] for problem in validate.validate_paths([path])]
    seen = "(templates here see annotations, facts, incident, labels, steps)"
    assert problems == [  # the for_each step's `node` is fine; the next step's is not
        f"steps[1].when: unknown name 'node' {seen}",
        f"steps[1].with.node: unknown name 'node' {seen}",
    ]


def test_a_domain_incidents_set_is_named_with_its_domain() -> None:
    step = Step.model_validate(
        {
            "id": "cordon",
            "title": "t",
            "action": "k8s.cordon",
            "for_each": "nodes",
            "with": {"node": "{{ node }}", "reason": "{{ incident.domain.name }} is hot"},
        }
    )
    nodes = [f"a-{n:02d}" for n in range(1, 33)]
    domain = {"level": "row", "value": "a", "name": "row/a", "size": 32}
    context = {"incident": {"ref": "INC-9", "nodes": nodes, "domain": domain}, "steps": {}}

    given = foreach.params(step, context, registry.get("k8s.cordon"))

    assert given["domain"] == "row/a" and given["with"][31] == {
        "node": "a-32",
        "reason": "row/a is hot",
    }
    assert engine.brief(given, "k8s.cordon") == "on 32 nodes of row/a (a-01 ... a-32)"
    assert foreach.needs_count(given, "k8s.cordon")
    assert not foreach.needs_count({**given, "nodes": nodes[:1]}, "k8s.cordon")
    assert not foreach.needs_count(given, "k8s.node_status")  # a read names no count


def test_a_disruptive_step_over_many_nodes_needs_two_people_each_naming_the_count(
    rig: Rig,
) -> None:
    rig.write(
        runbook()
        .replace("k8s.cordon", "k8s.drain_unsafe")
        .replace(', reason: "row {{ incident.ref }}"', "")
    )
    number = _open(rig, NODES[:3])
    assert rig.runs(number)["cordon"].approvals_required == 2

    assert rig.approve(number, "cordon", "alice", count=3).state == "awaiting_approval"
    with pytest.raises(ApprovalRefused, match=r"names the count; send --count 3"):
        rig.approve(number, "cordon", "bob")
    with pytest.raises(ApprovalRefused, match=r"you already approved step cordon"):
        rig.approve(number, "cordon", "alice", count=3)
    run = rig.approve(number, "cordon", "bob", count=3)
    assert run.state == "approved" and run.approved_count == 3
    assert rig.approvals(number, "cordon") == ["alice", "bob"]

"""The worker runs approved steps against the simulated cluster, once, and survives crashes.

Runs on SQLite and PostgreSQL; the race of several workers and many approvals is
PostgreSQL's (SKIP LOCKED), as DESIGN invariant 9 says.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from pathlib import Path
from typing import TypeVar

import httpx
import pytest

from bot.clock import FrozenClock
from bot.db import Database
from bot.errors import ApprovalRefused
from bot.sim import SimHandle
from bot.worker import Worker
from tests.runbooks.rig import TWO_STEPS, Rig
from tests.sim.waiting import eventually
from tests.support import people, server, working
from tests.support.payloads import alert, notification

NODE = "/api/v1/nodes/gpu-node-01"
WAIT = 60.0
T = TypeVar("T")


def _worker(rig: Rig, sim: SimHandle, owner: str = "w1") -> Worker:
    return Worker(rig.db, rig.settings, rig.clock, kube_factory=sim.api_client, owner=owner)


def _drain(worker: Worker, limit: int = 20) -> int:
    """run_once until there is no work; how many times it worked."""
    for done in range(limit):
        if not working.passed(worker):
            return done
    pytest.fail(f"the worker still had work after {limit} rounds")


def _patches(sim: SimHandle) -> int:
    return len(sim.cluster.requests_made(method="PATCH", path=NODE))


def _cordoned(sim: SimHandle) -> bool:
    return bool(sim.cluster.snapshot().nodes["gpu-node-01"].unschedulable)


def test_a_read_step_runs_without_people_and_the_next_one_waits(rig: Rig, sim: SimHandle) -> None:
    rig.write(TWO_STEPS)
    number = rig.fire()

    assert _drain(_worker(rig, sim)) == 1

    runs = rig.runs(number)
    assert runs["status"].state == "succeeded" and runs["status"].actor == "runbook-bot"
    assert runs["status"].result is not None and runs["status"].result["ok"] is True
    assert runs["cordon"].state == "awaiting_approval"
    assert _patches(sim) == 0 and not _cordoned(sim)
    types = rig.types(number)
    start = types.index("step.running")
    assert types[start:] == [
        "step.running",
        "action.started",
        "action.finished",
        "step.succeeded",
        "step.awaiting_approval",
    ]


def test_an_approved_change_runs_once_as_its_approver(rig: Rig, sim: SimHandle) -> None:
    rig.write(TWO_STEPS)
    number = rig.fire()
    worker = _worker(rig, sim)
    _drain(worker)

    rig.approve(number, "cordon", "alice")
    assert _drain(worker) == 1

    assert rig.states(number) == {"status": "succeeded", "cordon": "succeeded"}
    assert _patches(sim) == 1 and _cordoned(sim)
    started = [e for e in rig.log(number) if e.type == "action.started"][-1]
    assert (started.actor_kind, started.actor_id) == ("human", "alice")
    assert started.summary.startswith("alice started k8s.cordon (node=gpu-node-01")
    assert rig.types(number)[-1] == "runbook.finished"


FAILING = """\
    id: gpu-xid
    title: t
    version: 1
    match: {{alerts: [GPUXIDError]}}
    steps:
      - id: cordon
        title: Cordon
        action: k8s.cordon
        with: {{node: "{{{{ labels.Hostname }}}}"}}
        on_failure: {policy}
        retries: {retries}
      - {{id: after, title: After, manual: look}}
"""


@pytest.mark.parametrize(
    "policy, after, logged",
    [
        ("stop", None, "runbook.stopped"),
        ("continue", "awaiting_approval", None),
        ("escalate", "awaiting_approval", "runbook.escalate"),
    ],
)
def test_a_step_that_fails_follows_its_on_failure(
    rig: Rig, sim: SimHandle, policy: str, after: str | None, logged: str | None
) -> None:
    rig.write(FAILING.format(policy=policy, retries=0))
    sim.cluster.fail_requests(NODE, 403, times=5, method="PATCH")
    number = rig.fire()
    rig.approve(number, "cordon", "alice")

    _drain(_worker(rig, sim))

    states = rig.states(number)
    assert states["cordon"] == "failed" and states.get("after") == after
    assert "403" in rig.runs(number)["cordon"].summary or "forbidden" in (
        rig.runs(number)["cordon"].summary.lower()
    )
    types = rig.types(number)
    for kind in ("runbook.stopped", "runbook.escalate"):
        assert types.count(kind) == (1 if kind == logged else 0)
    assert not _cordoned(sim)


def test_a_temporary_failure_is_retried_with_the_same_parameters_once_it_is_due(
    rig: Rig, sim: SimHandle
) -> None:
    rig.write(FAILING.format(policy="stop", retries=2))
    # The client retries 503 itself (4 tries); the fifth PATCH is the worker's retry.
    sim.cluster.fail_requests(NODE, 503, times=4, method="PATCH")
    number = rig.fire()
    rig.approve(number, "cordon", "alice")
    worker = _worker(rig, sim)

    assert _drain(worker) == 1  # ran attempt 1; attempt 2 is not due yet

    runs = rig.all_runs(number, "cordon")
    assert [(r.attempt, r.state) for r in runs] == [(1, "failed"), (2, "approved")]
    assert runs[1].not_before == rig.clock.now() + timedelta(seconds=5)  # the error's delay
    assert _patches(sim) == 4 and not _cordoned(sim)
    retried = [e for e in rig.log(number) if e.type == "step.approved"][-1]
    assert retried.data["retry_of"] == runs[0].id and retried.data["retry_after"] == 5.0
    # The failure came back at 22:05:33.5, after the client's backoff (0.5 + 1 + 2 s on the
    # worker's clock); attempt 2 is due the error's 5 s later.
    assert "not before 22:05:38 UTC (the failure was temporary: try again in 5s)" in (
        retried.summary
    )

    rig.clock.advance(timedelta(seconds=4))
    assert worker.run_once() is False
    rig.clock.advance(timedelta(seconds=1))
    assert _drain(worker) == 1

    runs = rig.all_runs(number, "cordon")
    assert [(r.attempt, r.state) for r in runs] == [(1, "failed"), (2, "succeeded")]
    assert runs[0].params_hash == runs[1].params_hash and runs[1].actor == "alice"
    assert _patches(sim) == 5 and _cordoned(sim)
    assert "runbook.stopped" not in rig.types(number)
    assert rig.states(number)["after"] == "awaiting_approval"


def test_a_permanent_failure_is_not_retried_and_the_log_says_why(rig: Rig, sim: SimHandle) -> None:
    rig.write(FAILING.format(policy="stop", retries=2))
    sim.cluster.fail_requests(NODE, 403, times=1, method="PATCH")
    number = rig.fire()
    rig.approve(number, "cordon", "alice")

    assert _drain(_worker(rig, sim)) == 1

    runs = rig.all_runs(number, "cordon")
    assert [(r.attempt, r.state) for r in runs] == [(1, "failed")]
    assert _patches(sim) == 1 and not _cordoned(sim)
    types = rig.types(number)
    assert types[types.index("step.failed") :] == [
        "step.failed",
        "step.not_retried",
        "runbook.stopped",
    ]
    why = next(e for e in rig.log(number) if e.type == "step.not_retried")
    assert why.summary == (
        "step cordon is not retried (2 retries left): the failure is permanent (refused, "
        "forbidden or not found), and retrying a refused action cannot help"
    )


def test_a_killed_workers_run_is_interrupted_and_proposed_again_not_rerun(
    rig: Rig, sim: SimHandle
) -> None:
    rig.write(TWO_STEPS)
    number = rig.fire()
    _drain(_worker(rig, sim))
    rig.approve(number, "cordon", "alice")

    crashed = _worker(rig, sim, owner="crashed")
    claim = crashed.claim()  # marked running, then the process dies before running it
    assert claim is not None and claim.step == "cordon"
    rig.clock.advance(rig.settings.worker_lease + timedelta(seconds=1))

    survivor = _worker(rig, sim, owner="survivor")
    assert survivor.run_once() is True  # it reaped
    assert survivor.run_once() is False  # and ran nothing

    runs = rig.all_runs(number, "cordon")
    assert [(r.attempt, r.state) for r in runs] == [(1, "interrupted"), (2, "awaiting_approval")]
    assert runs[1].approvals_required == 1
    assert _patches(sim) == 0 and not _cordoned(sim)
    interrupted = next(e for e in rig.log(number) if e.type == "step.interrupted")
    assert "worker crashed lost its lease" in interrupted.summary
    assert "not re-run" in interrupted.summary

    crashed.perform(claim)  # the dead worker's late result is dropped, not applied
    assert rig.types(number)[-1] == "step.result_dropped"
    assert rig.all_runs(number, "cordon")[0].state == "interrupted"


def test_a_read_step_interrupted_by_a_crash_needs_a_person_to_run_again(
    rig: Rig, sim: SimHandle
) -> None:
    rig.write(TWO_STEPS)
    number = rig.fire()
    assert _worker(rig, sim, owner="crashed").claim() is not None
    rig.clock.advance(timedelta(minutes=5))

    _drain(_worker(rig, sim))

    runs = rig.all_runs(number, "status")
    assert [(r.attempt, r.state) for r in runs] == [(1, "interrupted"), (2, "awaiting_approval")]
    assert runs[1].approvals_required == 1
    assert sim.cluster.requests_made(method="GET", path=NODE) == []


def test_a_long_action_keeps_its_lease(rig: Rig, sim: SimHandle) -> None:
    rig.write(TWO_STEPS)
    number = rig.fire()
    worker = _worker(rig, sim)
    claim = worker.claim()
    assert claim is not None
    rig.clock.advance(timedelta(seconds=50))

    worker._renew(claim)
    rig.clock.advance(timedelta(seconds=50))  # past the first lease, inside the renewed one

    assert _worker(rig, sim, owner="other").reap() == 0
    worker.perform(claim)
    assert rig.runs(number)["status"].state == "succeeded"


def _all_at_once(jobs: list[Callable[[], T]]) -> list[T | Exception]:
    barrier = threading.Barrier(len(jobs), timeout=WAIT)

    def released(job: Callable[[], T]) -> T | Exception:
        barrier.wait()
        try:
            return job()
        except Exception as exc:  # refusals are results here
            return exc

    with ThreadPoolExecutor(max_workers=len(jobs)) as pool:
        futures = [pool.submit(released, job) for job in jobs]
        return [future.result(timeout=WAIT) for future in futures]


@pytest.mark.postgres
def test_three_workers_and_fifty_concurrent_approvals_run_the_action_exactly_once(
    pg_url: str, clock: FrozenClock, tmp_path: Path, sim: SimHandle
) -> None:
    db = Database(pg_url)
    try:
        people = {f"p{i:02d}": ["responder"] for i in range(50)}
        rig = Rig(db, clock, tmp_path, roles=people)
        rig.write(TWO_STEPS)
        number = rig.fire()
        workers = [_worker(rig, sim, owner=f"w{i}") for i in range(3)]
        _drain(workers[0])
        stop = threading.Event()
        threads = [threading.Thread(target=w.run_forever, args=(stop,)) for w in workers]
        for thread in threads:
            thread.start()
        try:
            outcomes = _all_at_once([lambda p=p: rig.approve(number, "cordon", p) for p in people])
            for _ in range(int(WAIT / 0.05)):
                if rig.states(number)["cordon"] == "succeeded":
                    break
                stop.wait(0.05)
            for _ in range(5):  # the workers poll again: nothing more to do
                for worker in workers:
                    worker.wake()
                stop.wait(0.05)
        finally:
            stop.set()
            for worker in workers:
                worker.wake()
            for thread in threads:
                thread.join(timeout=WAIT)
        accepted = [o for o in outcomes if not isinstance(o, Exception)]
        refused = [o for o in outcomes if isinstance(o, ApprovalRefused)]
        assert len(accepted) == 1 and len(refused) == 49
        assert all("already approved by" in str(r) for r in refused)
        assert rig.states(number)["cordon"] == "succeeded"
        assert _patches(sim) == 1
        types = rig.types(number)
        assert types.count("action.started") == 2  # the status read, then the cordon once
        assert types.count("step.running") == 2
        assert len(rig.approvals(number, "cordon")) == 1
    finally:
        db.dispose()


def test_a_step_that_outlives_its_timeout_times_out_and_stops_the_runbook(
    rig: Rig, sim: SimHandle
) -> None:
    rig.write(
        """\
        id: node-down
        title: t
        version: 1
        match: {alerts: [GPUXIDError]}
        steps:
          - id: ready
            title: Wait for Ready
            action: k8s.wait_node_ready
            with: {node: "{{ labels.Hostname }}", timeout: 2s, ready_for: 0s}
            timeout: 1s
          - {id: after, title: After, manual: never reached}
        """
    )
    sim.cluster.set_node_ready("gpu-node-01", False)
    released = threading.Event()
    # A second into its wait the action hangs (as on an API call that never answers) until
    # the test lets it go, so it outlives the step's timeout however fast the machine is.
    rig.clock.call_later(1, lambda: released.wait(WAIT))
    number = rig.fire()

    _drain(_worker(rig, sim))

    run = rig.runs(number)["ready"]
    assert (run.state, run.result) == ("timed_out", None)
    assert run.summary.startswith("no result within the step's timeout (1s)")
    assert rig.states(number) == {"ready": "timed_out"}
    assert rig.types(number).count("runbook.stopped") == 1
    released.set()
    for thread in threading.enumerate():  # the abandoned action ends by its own timeout
        if thread.name.startswith("step-"):
            thread.join(timeout=WAIT)
    assert rig.types(number)[-1] == "action.failed"
    assert rig.runs(number)["ready"].state == "timed_out"


def test_a_webhook_opens_an_incident_whose_approved_step_the_served_worker_runs(
    rig: Rig, sim: SimHandle
) -> None:
    rig.write(TWO_STEPS)
    worker = _worker(rig, sim)
    stop = threading.Event()
    thread = threading.Thread(target=worker.run_forever, args=(stop,))
    thread.start()
    try:
        with (
            server.running(
                rig.settings, rig.db, rig.clock, catalog=rig.catalog(), wake=worker.wake
            ) as url,
            httpx.Client(base_url=url, timeout=10) as client,
        ):
            posted = client.post(
                "/webhooks/alertmanager", json=notification([alert(host="gpu-node-01")])
            )
            assert posted.status_code == 200 and posted.json()["opened"] is True
            number = int(posted.json()["incident"].removeprefix("INC-"))
            eventually(
                lambda: rig.states(number).get("cordon") == "awaiting_approval",
                timeout=WAIT,
                what="the status step to run and the cordon to be proposed",
            )
            approved = client.post(
                f"/api/incidents/{number}/steps/cordon/approve",
                json={},
                headers=people.bearer(rig.db, rig.settings, "alice"),
            )
            assert approved.status_code == 200
            eventually(
                lambda: rig.states(number)["cordon"] == "succeeded",
                timeout=WAIT,
                what="the served worker to run the cordon",
            )
    finally:
        stop.set()
        worker.wake()
        thread.join(timeout=WAIT)
    assert not thread.is_alive()
    assert _patches(sim) == 1 and _cordoned(sim)


CORDON_ONLY = """\
    id: gpu-xid
    title: t
    version: 1
    match: {alerts: [GPUXIDError]}
    steps:
      - id: cordon
        title: Cordon
        action: k8s.cordon
        with: {node: "{{ labels.Hostname }}"}
"""


def test_the_worker_expires_a_step_nobody_approved_in_time_and_proposes_it_afresh(
    rig: Rig, sim: SimHandle
) -> None:
    rig.write(CORDON_ONLY)
    number = rig.fire()
    worker = _worker(rig, sim)
    first = rig.runs(number)["cordon"]
    assert first.expires_at == rig.clock.now() + rig.settings.approval_ttl

    rig.clock.advance(rig.settings.approval_ttl)  # exactly at expires_at: still waiting
    assert worker.run_once() is False
    rig.clock.advance(timedelta(seconds=1))
    assert worker.run_once() is True
    assert worker.run_once() is False  # once

    runs = rig.all_runs(number, "cordon")
    assert [(r.attempt, r.state) for r in runs] == [(1, "expired"), (2, "awaiting_approval")]
    assert runs[1].expires_at == rig.clock.now() + rig.settings.approval_ttl
    assert runs[1].params == first.params and runs[1].approvals_required == 1
    types = rig.types(number)
    assert types[-2:] == ["step.expired", "step.awaiting_approval"]
    expired = next(e for e in rig.log(number) if e.type == "step.expired")
    assert expired.actor_id == "runbook-bot"
    assert expired.summary == "step cordon expired: not approved by 22:20:30 UTC"
    assert _patches(sim) == 0


def test_an_approved_step_not_yet_claimed_is_not_expired_and_still_runs(
    rig: Rig, sim: SimHandle
) -> None:
    rig.write(CORDON_ONLY)
    number = rig.fire()
    rig.approve(number, "cordon", "alice")
    rig.clock.advance(rig.settings.approval_ttl + timedelta(minutes=5))
    worker = _worker(rig, sim)

    assert worker.expire() == 0
    assert _drain(worker) == 1

    assert [(r.attempt, r.state) for r in rig.all_runs(number, "cordon")] == [(1, "succeeded")]
    assert "step.expired" not in rig.types(number)
    assert _patches(sim) == 1 and _cordoned(sim)


def test_a_manual_step_waits_for_its_person_without_expiring(rig: Rig, sim: SimHandle) -> None:
    rig.write(FAILING.format(policy="continue", retries=0))
    sim.cluster.fail_requests(NODE, 403, times=1, method="PATCH")
    number = rig.fire()
    rig.approve(number, "cordon", "alice")
    _drain(_worker(rig, sim))
    rig.clock.advance(timedelta(days=1))

    assert _worker(rig, sim).expire() == 0
    assert rig.states(number)["after"] == "awaiting_approval"


@pytest.mark.postgres
def test_several_workers_expire_each_overdue_step_exactly_once(
    pg_url: str, clock: FrozenClock, tmp_path: Path
) -> None:
    db = Database(pg_url)
    try:
        rig = Rig(db, clock, tmp_path)
        rig.write(CORDON_ONLY)
        numbers = [rig.fire() for _ in range(8)]
        rig.clock.advance(rig.settings.approval_ttl + timedelta(seconds=1))
        workers = [Worker(db, rig.settings, clock, owner=f"w{i}") for i in range(4)]

        counts = _all_at_once([w.expire for w in workers])

        assert sum(c for c in counts if isinstance(c, int)) == 8
        assert all(isinstance(c, int) for c in counts)
        for number in numbers:
            runs = rig.all_runs(number, "cordon")
            assert [(r.attempt, r.state) for r in runs] == [
                (1, "expired"),
                (2, "awaiting_approval"),
            ]
            assert rig.types(number).count("step.expired") == 1
        assert [w.expire() for w in workers] == [0, 0, 0, 0]
    finally:
        db.dispose()

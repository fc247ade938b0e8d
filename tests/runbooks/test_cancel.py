"""Cancelling a step stops the runbook; resolving an incident cancels what has not run."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from pathlib import Path

import pytest

from bot import cli
from bot.clock import FrozenClock
from bot.db import Database
from bot.errors import ApprovalRefused, TransitionRefused
from bot.incidents import log
from bot.incidents import service as incidents
from bot.runbooks import service
from bot.sim import SimHandle
from bot.worker import Worker
from tests.runbooks.rig import Rig
from tests.sim.waiting import eventually

NODE = "/api/v1/nodes/gpu-node-01"
RUNBOOK = """\
    id: gpu-xid
    title: t
    version: 1
    match: {alerts: [GPUXIDError]}
    steps:
      - id: cordon
        title: Cordon
        action: k8s.cordon
        with: {node: "{{ labels.Hostname }}"}
        retries: 2
      - {id: call, title: Call the vendor, manual: call them}
"""


@pytest.fixture
def rig(db: Database, clock: FrozenClock, tmp_path: Path) -> Rig:
    rig = Rig(db, clock, tmp_path)
    rig.write(RUNBOOK)
    return rig


def _cancel(rig: Rig, number: int, step: str, person: str, note: str | None = None) -> None:
    service.cancel(
        rig.db, number, step, who=rig.who(person), clock=rig.clock, settings=rig.settings, note=note
    )


def _resolve(rig: Rig, number: int) -> list[str]:
    _, cancelled = service.resolve(
        rig.db, number, actor=log.Actor.human("carol"), clock=rig.clock, disposition="fixed"
    )
    return [run.step_id for run in cancelled]


def _worker(rig: Rig, sim: SimHandle) -> Worker:
    return Worker(rig.db, rig.settings, rig.clock, kube_factory=sim.api_client, owner="w1")


def _patches(sim: SimHandle) -> int:
    return len(sim.cluster.requests_made(method="PATCH", path=NODE))


def test_a_cancelled_step_never_runs_and_stops_the_runbook(rig: Rig, sim: SimHandle) -> None:
    number = rig.fire()
    rig.approve(number, "cordon", "alice")

    _cancel(rig, number, "cordon", "bob", note="cordoned by hand")

    assert _worker(rig, sim).run_once() is False
    run = rig.runs(number)["cordon"]
    assert (run.state, run.actor, run.summary) == (
        "cancelled",
        "bob",
        "cancelled by bob: cordoned by hand",
    )
    assert rig.states(number) == {"cordon": "cancelled"}  # `call` is never proposed
    assert rig.types(number)[-2:] == ["step.cancelled", "runbook.stopped"]
    entries = rig.log(number)
    assert entries[-2].summary == (
        "bob (responder) cancelled step cordon: cordoned by hand; the runbook stops here"
    )
    assert (entries[-2].actor_kind, entries[-2].actor_id) == ("human", "bob")
    assert entries[-1].summary.startswith("runbook stopped: step cordon cancelled")
    assert _patches(sim) == 0


def test_cancelling_needs_a_role_and_a_step_that_has_not_ended(rig: Rig) -> None:
    number = rig.fire()

    with pytest.raises(ApprovalRefused, match="mallory has no role"):
        _cancel(rig, number, "cordon", "mallory")
    assert rig.states(number) == {"cordon": "awaiting_approval"}

    rig.skip(number, "cordon", "alice")
    with pytest.raises(TransitionRefused, match="cannot cancel step cordon: it already ended"):
        _cancel(rig, number, "cordon", "alice")
    assert rig.states(number) == {"cordon": "skipped", "call": "awaiting_approval"}


def test_a_running_step_cannot_be_cancelled(rig: Rig, sim: SimHandle) -> None:
    number = rig.fire()
    rig.approve(number, "cordon", "alice")
    claim = _worker(rig, sim).claim()
    assert claim is not None

    with pytest.raises(TransitionRefused, match="its action is running and cannot be called"):
        _cancel(rig, number, "cordon", "alice")

    assert rig.states(number) == {"cordon": "running"}


def test_resolving_cancels_the_steps_that_have_not_run(rig: Rig, sim: SimHandle) -> None:
    number = rig.fire()
    rig.approve(number, "cordon", "alice")

    assert _resolve(rig, number) == ["cordon"]

    assert _worker(rig, sim).run_once() is False
    run = rig.runs(number)["cordon"]
    assert (run.state, run.actor) == ("cancelled", "carol")
    assert rig.states(number) == {"cordon": "cancelled"}
    types = rig.types(number)
    assert types[-2:] == ["incident.resolved", "step.cancelled"]
    assert (
        rig.log(number)[-1].summary == f"step cordon cancelled: INC-{number} was resolved by carol"
    )
    assert _patches(sim) == 0
    rig.clock.advance(timedelta(hours=1))
    assert _worker(rig, sim).run_once() is False  # nothing expires, nothing is proposed
    assert rig.types(number) == types


def test_a_step_running_at_resolution_finishes_and_nothing_runs_after_it(
    rig: Rig, sim: SimHandle
) -> None:
    number = rig.fire()
    rig.approve(number, "cordon", "alice")
    worker = _worker(rig, sim)
    claim = worker.claim()
    assert claim is not None

    assert _resolve(rig, number) == []
    worker.perform(claim)

    assert rig.states(number) == {"cordon": "succeeded"}  # `call` is never proposed
    types = rig.types(number)
    assert types[types.index("incident.resolved") :] == [
        "incident.resolved",
        "step.left_running",
        "action.started",
        "action.progress",  # the running step still reports what it does
        "action.finished",
        "step.succeeded",
    ]
    assert _patches(sim) == 1


def test_a_temporary_failure_after_resolution_is_not_retried(rig: Rig, sim: SimHandle) -> None:
    sim.cluster.fail_requests(NODE, 503, times=4, method="PATCH")
    number = rig.fire()
    rig.approve(number, "cordon", "alice")
    worker = _worker(rig, sim)
    claim = worker.claim()
    assert claim is not None
    _resolve(rig, number)

    worker.perform(claim)

    assert [(r.attempt, r.state) for r in rig.all_runs(number, "cordon")] == [(1, "failed")]
    why = rig.log(number)[-1]
    assert why.type == "step.not_retried"
    assert why.summary == f"step cordon is not retried (2 retries left): INC-{number} is resolved"


def test_the_cli_cancels_a_step_and_resolving_cancels_the_rest(
    rig: Rig, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    first, second = rig.fire(), rig.fire()
    monkeypatch.setenv("RUNBOOK_BOT_DATABASE_URL", rig.db.url)
    monkeypatch.setenv("RUNBOOK_BOT_ROLES", '{"alice": ["responder"], "bob": []}')

    inc = f"INC-{first}"
    assert cli.main(["cancel", inc, "cordon", "--as", "alice", "--note", "not needed"]) == 0
    assert cli.main(["cancel", inc, "cordon", "--as", "alice"]) == 1
    resolve = ["incidents", "resolve", f"INC-{second}", "--as", "bob", "--note", "fixed"]
    assert cli.main(resolve) == 0

    out, err = capsys.readouterr()
    assert out.splitlines() == [
        "step cordon cancelled; the runbook stops there",
        f"INC-{second} resolved (owner: bob); cancelled steps not yet run: cordon",
    ]
    assert err.strip() == "runbook-bot: cannot cancel step cordon: it already ended (cancelled)"
    assert rig.runs(first)["cordon"].summary == "cancelled by alice: not needed"
    assert rig.runs(second)["cordon"].actor == "bob"
    assert rig.types(second)[-2:] == ["incident.resolved", "step.cancelled"]


def test_a_step_approved_as_its_incident_was_resolved_is_cancelled_not_run(
    rig: Rig, sim: SimHandle
) -> None:
    number = rig.fire()
    rig.approve(number, "cordon", "alice")
    with rig.db.transaction() as session:  # resolved behind the runbooks' back, as in a race
        incidents.resolve(
            session, number, actor=log.Actor.human("carol"), at=rig.clock.now(), disposition="x"
        )

    assert _worker(rig, sim).run_once() is False

    run = rig.runs(number)["cordon"]
    assert (run.state, run.actor) == ("cancelled", "runbook-bot")
    assert rig.types(number)[-2:] == ["incident.resolved", "step.cancelled"]
    assert _patches(sim) == 0


def test_a_resolved_incidents_waiting_step_cannot_be_approved(rig: Rig) -> None:
    number = rig.fire()
    with rig.db.transaction() as session:
        incidents.resolve(
            session, number, actor=log.Actor.human("carol"), at=rig.clock.now(), disposition="x"
        )

    with pytest.raises(ApprovalRefused, match=f"INC-{number} is resolved: its steps no longer"):
        rig.approve(number, "cordon", "alice")

    assert rig.approvals(number, "cordon") == []


@pytest.mark.postgres
def test_resolving_while_people_approve_and_workers_claim_never_starts_a_step_afterwards(
    pg_url: str, clock: FrozenClock, tmp_path: Path, sim: SimHandle
) -> None:
    db = Database(pg_url)
    try:
        rig = Rig(db, clock, tmp_path)
        rig.write(RUNBOOK)
        numbers = [rig.fire() for _ in range(6)]
        workers = [_worker(rig, sim) for _ in range(2)]
        stop = threading.Event()
        threads = [threading.Thread(target=w.run_forever, args=(stop,)) for w in workers]
        for thread in threads:
            thread.start()
        try:
            jobs: list[Callable[[], object]] = []
            for number in numbers:
                jobs.append(lambda n=number: rig.approve(n, "cordon", "alice"))
                jobs.append(lambda n=number: _resolve(rig, n))
            outcomes = _all_at_once(jobs)
            for worker in workers:
                worker.wake()
            eventually(
                lambda: all(
                    rig.states(n)["cordon"] in ("succeeded", "failed", "cancelled") for n in numbers
                ),
                timeout=60,
                what="every cordon to end or be cancelled",
            )
        finally:
            stop.set()
            for worker in workers:
                worker.wake()
            for thread in threads:
                thread.join(timeout=60)
        errors = [o for o in outcomes if isinstance(o, Exception)]
        assert all(isinstance(e, ApprovalRefused | TransitionRefused) for e in errors), errors
        for number in numbers:
            types = rig.types(number)
            resolved = types.index("incident.resolved")
            assert "step.running" not in types[resolved:]
            assert types.count("step.running") <= 1
            assert "call" not in rig.states(number)
    finally:
        db.dispose()


def _all_at_once(jobs: list[Callable[[], object]]) -> list[object]:
    barrier = threading.Barrier(len(jobs), timeout=60)

    def released(job: Callable[[], object]) -> object:
        barrier.wait()
        try:
            return job()
        except Exception as exc:  # refusals are results here
            return exc

    with ThreadPoolExecutor(max_workers=len(jobs)) as pool:
        return [f.result(timeout=60) for f in [pool.submit(released, job) for job in jobs]]

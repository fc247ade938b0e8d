"""The worker never waits on an action (issue 19 item 3): actions run in a bounded pool of
their own while the loop proposes, pages, expires and reaps on time; a timed-out action
is cancelled and cannot pass the breaker or patch the node afterwards.

A slow action is a real one against a slow API server: the simulated cluster holds the
requests of one node (`Cluster.hold_requests`) until the test releases them, while the
test moves the frozen clock. Runs on SQLite and PostgreSQL.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path

import httpx
import pytest

from bot import escalation
from bot.alerts import ingest
from bot.alerts.payload import WebhookPayload
from bot.chat.outbox import OutboxChat
from bot.clock import FrozenClock
from bot.db import Database
from bot.escalation import health
from bot.incidents.models import LogEntry
from bot.runbooks.models import IncidentRunbook
from bot.sim import SimHandle
from bot.sim.cluster import RequestHold
from bot.worker import Worker
from tests.runbooks.rig import Rig
from tests.sim.waiting import eventually
from tests.support import server
from tests.support.payloads import alert, notification

WAIT = 60.0
CHANNEL = "C0INCIDENTS"
SLACK = {
    "slack_bot_token": "xoxb-test-token",
    "slack_signing_secret": "signing-secret",
    "slack_channel": CHANNEL,
}
STATUS_FIRST = """\
    id: gpu-xid
    title: t
    version: 1
    match: {alerts: [GPUXIDError]}
    steps:
      - id: status
        title: Node status
        action: k8s.node_status
        with: {node: "{{ labels.Hostname }}"}
"""
CORDON_WITH_TIMEOUT = """\
    id: gpu-xid
    title: t
    version: 1
    match: {alerts: [GPUXIDError]}
    steps:
      - id: cordon
        title: Cordon
        action: k8s.cordon
        with: {node: "{{ labels.Hostname }}"}
        timeout: 30s
"""


@pytest.fixture
def rig(db: Database, clock: FrozenClock, tmp_path: Path) -> Rig:
    return Rig(db, clock, tmp_path, kube_timeout=timedelta(minutes=5), **SLACK)


@pytest.fixture
def holds(sim: SimHandle) -> Iterator[list[RequestHold]]:
    """Holds the test makes; every one released at the end, so no request hangs on."""
    made: list[RequestHold] = []
    yield made
    for hold in made:
        hold.release()


def _hold_node(sim: SimHandle, holds: list[RequestHold], node: str) -> RequestHold:
    hold = sim.cluster.hold_requests(f"/api/v1/nodes/{node}", method="GET")
    holds.append(hold)
    return hold


def _open(rig: Rig, host: str) -> int:
    """Open an incident as the webhook does (runbook frozen, escalation armed), without
    proposing: the worker under test proposes."""
    result = ingest.ingest(
        rig.db,
        WebhookPayload.model_validate(notification([alert(host=host)])),
        clock=rig.clock,
        reopen_window=rig.settings.reopen_window,
        catalog=rig.catalog(),
        escalation=escalation.frozen_policy(rig.settings),
    )
    assert result.opened
    return result.incident


def _worker(rig: Rig, sim: SimHandle, **settings: object) -> Worker:
    configured = rig.settings.model_copy(update=settings) if settings else rig.settings
    return Worker(
        rig.db,
        configured,
        rig.clock,
        kube_factory=sim.api_client,
        owner="w1",
        chat=OutboxChat(CHANNEL),
    )


def _passes_until(worker: Worker, check: Callable[[], bool], what: str) -> None:
    """Let the worker make passes until `check` holds."""

    def passed() -> bool:
        worker.run_once()
        return check()

    eventually(passed, timeout=WAIT, what=what)


def _entry(rig: Rig, number: int, kind: str) -> LogEntry:
    return next(e for e in rig.log(number) if e.type == kind)


def test_an_hour_long_action_delays_no_other_incidents_proposal_page_or_heartbeat(
    rig: Rig, sim: SimHandle, holds: list[RequestHold]
) -> None:
    rig.write(STATUS_FIRST)
    slow = _hold_node(sim, holds, "gpu-node-01")
    first = _open(rig, "gpu-node-01")
    worker = _worker(rig, sim)

    assert worker.run_once() is True  # proposes, claims and starts the read; does not wait
    assert slow.arrived.wait(WAIT)  # the action is in its API call, which does not answer
    assert rig.states(first) == {"status": "running"} and worker.in_hand == 1

    opened_at = None
    second = 0
    for minute in range(1, 61):  # an hour on the clock with the action still running
        rig.clock.advance(timedelta(minutes=1))
        if minute == 30:
            opened_at = rig.clock.now()
            second = _open(rig, "gpu-node-02")
        worker.run_once()
        with rig.db.session() as session:
            beat = health.status(session, rig.clock.now()).heartbeat_age
        assert beat is not None and beat <= rig.settings.worker_heartbeat.total_seconds()

    assert opened_at is not None
    with rig.db.session() as session:
        frozen = session.get(IncidentRunbook, second)
        assert frozen is not None and frozen.proposed_at is not None
        proposed_late = (frozen.proposed_at - opened_at).total_seconds()
    paged = _entry(rig, second, "escalation.paged")  # its first page
    assert 0 <= proposed_late <= 1.0
    assert 0 <= (paged.at - opened_at).total_seconds() <= 1.0
    _passes_until(
        worker,
        lambda: rig.states(second) == {"status": "succeeded"},
        "the second incident's read to run beside the held one",
    )
    assert rig.states(second) == {"status": "succeeded"}
    run = rig.runs(first)["status"]
    assert run.state == "running" and run.lease_until is not None
    assert run.lease_until > rig.clock.now()  # its lease was renewed all hour
    with server.running(rig.settings, rig.db, rig.clock, catalog=rig.catalog()) as url:
        ready = httpx.get(f"{url}/readyz", timeout=10)
    assert ready.status_code == 200, ready.text

    slow.release()
    assert worker.settle(WAIT) is True
    assert rig.states(first) == {"status": "succeeded"} and worker.in_hand == 0


def test_a_timed_out_cordon_is_cancelled_before_the_breaker_and_the_patch(
    rig: Rig, sim: SimHandle, holds: list[RequestHold]
) -> None:
    rig.write(CORDON_WITH_TIMEOUT)
    slow = _hold_node(sim, holds, "gpu-node-01")
    number = _open(rig, "gpu-node-01")
    worker = _worker(rig, sim)
    worker.propose()
    rig.approve(number, "cordon", "alice")

    assert worker.run_once() is True
    assert slow.arrived.wait(WAIT)  # the cordon is reading its node; no answer yet
    rig.clock.advance(timedelta(seconds=31))
    worker.run_once()  # past the step's timeout: recorded as timed out, the action cancelled

    run = rig.runs(number)["cordon"]
    assert run.state == "timed_out" and worker.in_hand == 0
    counted = len(sim.cluster.requests_made(method="GET", path="/api/v1/nodes"))
    slow.release()  # the node's read answers now: the action goes on, and must stop
    eventually(
        lambda: "action.failed" in rig.types(number),
        timeout=WAIT,
        what="the cancelled cordon to stop and say so",
    )

    failed = [e for e in rig.log(number) if e.type == "action.failed"][-1]
    assert "was cancelled (its step timed out" in failed.summary
    assert failed.data["result"]["error"] == "cancelled"
    assert sim.cluster.requests_made(method="PATCH", path="/api/v1/nodes/gpu-node-01") == []
    # The breaker never counted: no list of the GPU nodes after the cancellation.
    assert len(sim.cluster.requests_made(method="GET", path="/api/v1/nodes")) == counted
    assert not sim.cluster.snapshot().nodes["gpu-node-01"].unschedulable
    assert rig.runs(number)["cordon"].state == "timed_out"


def test_a_third_approved_run_waits_for_one_of_two_slots(
    rig: Rig, sim: SimHandle, holds: list[RequestHold]
) -> None:
    rig.write(STATUS_FIRST)
    slow = [_hold_node(sim, holds, f"gpu-node-0{n}") for n in (1, 2, 3)]
    numbers = [_open(rig, f"gpu-node-0{n}") for n in (1, 2, 3)]
    worker = _worker(rig, sim, worker_actions=2)

    assert worker.run_once() is True
    assert slow[0].arrived.wait(WAIT) and slow[1].arrived.wait(WAIT)
    assert worker.run_once() is False  # both slots taken: the third is not claimed

    states = [rig.states(n)["status"] for n in numbers]
    assert states == ["running", "running", "approved"] and worker.in_hand == 2
    assert not slow[2].arrived.is_set()

    slow[0].release()
    _passes_until(worker, slow[2].arrived.is_set, "the freed slot to take the third run")
    states = [rig.states(n)["status"] for n in numbers]
    assert states == ["succeeded", "running", "running"] and worker.in_hand == 2

    for hold in slow[1:]:
        hold.release()
    assert worker.settle(WAIT) is True
    assert [rig.states(n)["status"] for n in numbers] == ["succeeded"] * 3

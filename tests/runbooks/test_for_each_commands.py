"""Steps over many nodes through the HTTP API (a personal token) and the CLI (`--as`):
approving names the count (`{"count": 4}`, `--count 4`), a missing or wrong count is
refused saying what to send, the steps list counts the nodes, and stop the rest is a
decision with its person behind it."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest

from bot import cli
from bot.clock import FrozenClock
from bot.db import Database
from bot.sim import SimHandle, running, seed
from bot.sim.cluster import RequestHold
from bot.worker import Worker
from tests.runbooks.rig import ROLES, Rig
from tests.sim.waiting import TIME_SCALE, eventually
from tests.support import people
from tests.support.payloads import alert, notification

WAIT = 60.0
NODES = [f"gpu-node-0{n}" for n in range(1, 5)]
RUNBOOK = """\
    id: row-cordon
    title: t
    version: 1
    match: {alerts: [GPUXIDError]}
    steps:
      - id: cordon
        title: Cordon the set
        action: k8s.cordon
        for_each: nodes
        max_parallel: 2
        with: {node: "{{ node }}"}
"""
OPEN = {"breaker_max_fraction": 1.0, "breaker_max_nodes": 64}


@pytest.fixture
def rig(db: Database, clock: FrozenClock, tmp_path: Path) -> Rig:
    rig = Rig(db, clock, tmp_path, kube_timeout=timedelta(minutes=5), **OPEN)
    rig.write(RUNBOOK)
    return rig


@pytest.fixture
def sim() -> Iterator[SimHandle]:
    with running(seed(grace_seconds=5, startup_seconds=2), time_scale=TIME_SCALE) as handle:
        yield handle


def _open(rig: Rig) -> int:
    body = notification([alert(host=n) for n in NODES], group={"alertname": "GPUXIDError"})
    result = rig.ingest(body)
    Worker(rig.db, rig.settings, rig.clock).propose()
    return result.incident


def test_the_api_approves_a_step_over_many_nodes_only_with_its_count(
    rig: Rig, serve: Callable[..., httpx.Client]
) -> None:
    number = _open(rig)
    client = serve(roles=ROLES)
    alice = people.bearer(rig.db, rig.settings, "alice")

    steps = client.get(f"/api/incidents/{number}/steps").json()["steps"]
    assert steps[0]["progress"]["set"] == "4 nodes"
    assert (steps[0]["progress"]["total"], steps[0]["progress"]["left"]) == (4, 4)
    url = f"/api/incidents/{number}/steps/cordon/approve"

    missing = client.post(url, json={}, headers=alice)
    assert missing.status_code == 409
    assert 'names the count; send --count 4 (API: {"count": 4})' in missing.json()["error"]
    wrong = client.post(url, json={"count": 3}, headers=alice)
    assert wrong.status_code == 409 and "you named 3 nodes" in wrong.json()["error"]
    typed = client.post(url, json={"count": "4"}, headers=alice)
    assert typed.status_code == 400 and typed.json()["field"] == "count"
    assert '"count" must be a whole number' in typed.json()["error"]
    assert rig.approvals(number, "cordon") == []

    approved = client.post(url, json={"count": 4}, headers=alice)
    assert approved.status_code == 200 and approved.json()["state"] == "approved"
    run = rig.runs(number)["cordon"]
    assert run.approved_count == 4
    entry = [e for e in rig.log(number) if e.type == "step.approved"][-1]
    assert entry.data["count"] == 4 and entry.data["by"]["channel"] == "api"


def test_the_api_stops_the_rest_of_a_running_step_as_the_tokens_owner(
    rig: Rig,
    serve: Callable[..., httpx.Client],
    sim: SimHandle,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    number = _open(rig)
    client = serve(roles=ROLES, **OPEN)
    bob = people.bearer(rig.db, rig.settings, "bob")
    url = f"/api/incidents/{number}/steps/cordon/stop"
    early = client.post(url, json={}, headers=bob)
    assert early.status_code == 409 and "cancel it instead" in early.json()["error"]
    rig.approve(number, "cordon", "alice", count=4)
    holds: list[RequestHold] = [
        sim.cluster.hold_requests(f"/api/v1/nodes/{n}", method="GET") for n in NODES[:2]
    ]
    worker = Worker(rig.db, rig.settings, rig.clock, kube_factory=sim.api_client, owner="w1")
    try:
        assert worker.run_once() is True
        assert all(hold.arrived.wait(WAIT) for hold in holds)
        monkeypatch.setenv("RUNBOOK_BOT_DATABASE_URL", rig.db.url)
        eventually(
            lambda: (
                cli.main(["steps", f"INC-{number}"]) == 0
                and "4 nodes: done 0 · running 2 · failed 0 · left 2" in capsys.readouterr().out
            ),
            timeout=WAIT,
            what="`runbook-bot steps` to count two nodes running",
        )
        stopped = client.post(url, json={"note": "enough"}, headers=bob)
        assert stopped.status_code == 200, stopped.text
    finally:
        for hold in holds:
            hold.release()
    assert worker.settle(WAIT) is True

    run = rig.runs(number)["cordon"]
    assert run.state == "cancelled" and run.stop_requested_by == "bob"
    assert run.result is not None and run.result["left"] == 2
    requested = next(e for e in rig.log(number) if e.type == "step.stop_requested")
    assert requested.data["by"]["person"] == "bob" and requested.data["by"]["channel"] == "api"
    listed = client.get(f"/api/incidents/{number}/steps").json()["steps"][0]["progress"]
    assert (listed["succeeded"], listed["left"], listed["stopped_by"]) == (2, 2, "bob")


def test_the_cli_approves_with_count_and_refuses_without(
    rig: Rig, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    rig.clock.set(datetime.now(UTC))  # the CLI decides on the system clock
    number = _open(rig)
    monkeypatch.setenv("RUNBOOK_BOT_DATABASE_URL", rig.db.url)
    monkeypatch.setenv("RUNBOOK_BOT_ROLES", '{"alice": ["responder"]}')

    assert cli.main(["approve", f"INC-{number}", "cordon", "--as", "alice"]) == 1
    assert cli.main(["approve", f"INC-{number}", "cordon", "--as", "alice", "--count", "5"]) == 1
    _, err = capsys.readouterr()
    assert "names the count; send --count 4" in err and "you named 5 nodes" in err
    assert cli.main(["approve", f"INC-{number}", "cordon", "--as", "alice", "--count", "4"]) == 0
    assert cli.main(["stop", f"INC-{number}", "cordon", "--as", "alice"]) == 1
    out, err = capsys.readouterr()
    assert "step cordon approved" in out
    assert "step cordon is approved and no node has started: cancel it instead" in err
    assert rig.runs(number)["cordon"].approved_count == 4


def test_the_cli_takes_an_admins_override_of_the_global_cap_and_refuses_anyone_elses(
    rig: Rig, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    rig.clock.set(datetime.now(UTC))  # the CLI decides on the system clock
    number = _open(rig)
    monkeypatch.setenv("RUNBOOK_BOT_DATABASE_URL", rig.db.url)
    monkeypatch.setenv("RUNBOOK_BOT_ROLES", '{"alice": ["responder"], "carol": ["admin"]}')
    approve = ["approve", f"INC-{number}", "cordon", "--count", "4", "--override-breaker", "2"]

    assert cli.main([*approve, "--as", "alice"]) == 1
    _, err = capsys.readouterr()
    assert "only an admin may override the circuit breaker" in err
    assert cli.main([*approve, "--as", "carol"]) == 0
    run = rig.runs(number)["cordon"]
    assert (run.state, run.approved_count, run.override_count) == ("approved", 4, 2)

"""The circuit breaker cannot be raced (issue 19 item 4, DESIGN invariant 6): eight
incidents approved at once to cordon eight GPU nodes, with a cap of one node, leave
exactly one cordoned and seven refused with the breaker's reason.

On PostgreSQL three workers (each its own engine and owner, as three replicas would be)
take the runs; their count-then-patch is serialised by the advisory lock. On SQLite one
worker runs all eight at once in its pool, serialised by its process and file lock.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import text

from bot.actions import breaker_lock
from bot.cli import main
from bot.clock import FrozenClock
from bot.db import Database
from bot.sim import SimHandle, running, seed
from bot.worker import Worker
from tests.runbooks.rig import Rig
from tests.sim.waiting import TIME_SCALE, eventually

WAIT = 60.0
NODES = [f"gpu-node-{n:02d}" for n in range(1, 9)]
CORDON = """\
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


@pytest.fixture
def sim() -> Iterator[SimHandle]:
    """Eight GPU nodes."""
    with running(seed(nodes=8, grace_seconds=5, startup_seconds=2), time_scale=TIME_SCALE) as sim:
        yield sim


@pytest.fixture
def rig(db: Database, clock: FrozenClock, tmp_path: Path) -> Rig:
    # Three slots each on PostgreSQL: the eight runs need all three workers' pools.
    slots = 3 if db.is_postgres else 8
    rig = Rig(db, clock, tmp_path, breaker_max_nodes=1, worker_actions=slots)
    rig.write(CORDON)
    return rig


def _workers(rig: Rig, sim: SimHandle) -> list[Worker]:
    """Three on PostgreSQL, each with an engine of its own; one on SQLite."""
    count = 3 if rig.db.is_postgres else 1
    return [
        Worker(
            Database(rig.db.url, lock_timeout=rig.settings.database_worker_lock_timeout),
            rig.settings,
            rig.clock,
            kube_factory=sim.api_client,
            owner=f"w{n}",
        )
        for n in range(1, count + 1)
    ]


def test_eight_cordons_at_once_under_a_cap_of_one_cordon_one_node(rig: Rig, sim: SimHandle) -> None:
    numbers = [rig.fire(host=node) for node in NODES]
    for number in numbers:
        rig.approve(number, "cordon", "alice")
    workers = _workers(rig, sim)
    stop = threading.Event()
    threads = [threading.Thread(target=w.run_forever, args=(stop,)) for w in workers]
    try:
        for thread in threads:
            thread.start()
        eventually(
            lambda: all(rig.states(n)["cordon"] in ("succeeded", "failed") for n in numbers),
            timeout=WAIT,
            what="all eight cordons to end",
        )
    finally:
        stop.set()
        for worker in workers:
            worker.wake()
        for thread in threads:
            thread.join(WAIT)
        for worker in workers:
            worker.db.dispose()

    cordoned = sorted(n for n, s in sim.cluster.snapshot().nodes.items() if s.unschedulable)
    states = {n: rig.states(n)["cordon"] for n in numbers}
    assert len(cordoned) == 1, cordoned
    assert sorted(states.values()) == ["failed"] * 7 + ["succeeded"]
    patched = [r for r in sim.cluster.requests_made(method="PATCH") if r.status == 200]
    assert len(patched) == 1
    for number in numbers:
        run = rig.runs(number)["cordon"]
        if run.state == "succeeded":
            continue
        assert run.result is not None and run.result["error"] == "refused"
        assert run.summary.startswith("refusing to take gpu-node-")
        assert f"the bot already holds 1 of 8 GPU nodes out of service ({cordoned[0]})" in (
            run.summary
        )
        failed = [e for e in rig.log(number) if e.type == "action.failed"]
        assert len(failed) == 1 and "the limit is 1" in failed[0].summary


@contextlib.contextmanager
def _breaker_held_elsewhere(db: Database) -> Iterator[None]:
    """The breaker's lock as another process holds it: PostgreSQL's advisory lock in a
    session of its own, or the lock file beside SQLite's database."""
    if db.is_postgres:
        with db.transaction() as session:
            session.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": breaker_lock.KEY})
            yield
        return
    path = breaker_lock.lock_file(db.url)
    assert path is not None
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def test_a_cordon_from_the_cli_waits_for_the_breaker_lock_the_workers_hold(
    db: Database,
    sim: SimHandle,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("RUNBOOK_BOT_DATABASE_URL", db.url)
    monkeypatch.setenv("RUNBOOK_BOT_DATABASE_LOCK_TIMEOUT", "300ms")
    monkeypatch.setenv("RUNBOOK_BOT_KUBECONFIG", str(sim.write_kubeconfig(tmp_path / "kc")))

    with _breaker_held_elsewhere(db):
        code = main(["action", "k8s.cordon", "node=gpu-node-02"])
    out, err = capsys.readouterr()
    assert code == 1
    assert "the circuit breaker's lock" in out + err
    assert sim.cluster.requests_made(method="PATCH") == []
    assert not sim.cluster.snapshot().nodes["gpu-node-02"].unschedulable

    assert main(["action", "k8s.cordon", "node=gpu-node-02"]) == 0  # the lock is free again
    assert sim.cluster.snapshot().nodes["gpu-node-02"].unschedulable

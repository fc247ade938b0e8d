"""Two workers racing for the last slot under the breaker's global cap, on PostgreSQL:
each its own engine (as two replicas would be), both with an approval that names the
same row's nodes; the advisory lock serialises count-then-cordon, so exactly one wins."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from functools import partial

import pytest

from bot.actions import ActionContext, breaker_lock, execute, registry
from bot.actions.context import Allowance
from bot.clock import FrozenClock
from bot.config import load_settings
from bot.db import Database
from bot.sim import SimHandle, running, seed
from tests.actions.conftest import START
from tests.sim.waiting import TIME_SCALE

pytestmark = pytest.mark.postgres
ROW_A = [f"gpu-node-{n:02d}" for n in range(1, 11)]


@pytest.fixture
def sim() -> Iterator[SimHandle]:
    with running(seed(nodes=20, grace_seconds=5, startup_seconds=2), time_scale=TIME_SCALE) as sim:
        yield sim


def test_two_workers_racing_for_the_last_slot_under_the_global_cap_one_wins(
    sim: SimHandle, pg_url: str
) -> None:
    settings = load_settings(breaker_global_max_nodes=5)
    allowance = Allowance(nodes=frozenset(ROW_A), count=len(ROW_A), domain="row/a")
    clock = FrozenClock(START)
    databases = [Database(pg_url, lock_timeout=settings.database_worker_lock_timeout) for _ in "ab"]

    def context(db: Database, actor: str) -> ActionContext:
        return ActionContext(
            actor=actor,
            settings=settings,
            clock=clock,
            incident="INC-3",
            allowance=allowance,
            kube_factory=sim.api_client,
            breaker_lock=partial(breaker_lock.across, db, clock, wait=30.0),
        )

    cordon = registry.get("k8s.cordon")
    for node in ROW_A[:4]:  # one slot left under the cap of 5
        assert execute(cordon, {"node": node}, context(databases[0], "w0")).result.ok
    start = threading.Barrier(2)
    results: dict[str, tuple[bool, str]] = {}

    def race(db: Database, node: str) -> None:
        ctx = context(db, node)
        start.wait(timeout=10)
        result = execute(cordon, {"node": node}, ctx).result
        results[node] = (result.ok, result.summary)

    threads = [
        threading.Thread(target=race, args=(db, node))
        for db, node in zip(databases, ROW_A[4:6], strict=True)
    ]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
    finally:
        for db in databases:
            db.dispose()

    assert sorted(ok for ok, _ in results.values()) == [False, True]
    (loser,) = [summary for ok, summary in results.values() if not ok]
    assert "already holds 5 of 20 GPU nodes out of service" in loser
    assert "the global cap is 5" in loser
    cordoned = {n for n, node in sim.cluster.snapshot().nodes.items() if node.unschedulable}
    assert len(cordoned) == 5 and set(ROW_A[:4]) < cordoned

"""Correlation across replicas on PostgreSQL: three bot replicas (three `Database`
engines, each on its own threads) ingest the same 32 alerts of one row, interleaved in
overlapping notifications, all released together. The key's advisory lock makes them one
incident holding every alert, with no deadlock and no lost alert."""

from __future__ import annotations

import random
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from bot.alerts import ingest
from bot.alerts.payload import WebhookPayload
from bot.clock import FrozenClock
from bot.db import Database
from bot.escalation import frozen_policy
from tests.alerts.fleet import Fleet, node
from tests.support.payloads import notification

pytestmark = pytest.mark.postgres

REPLICAS = 3
WAIT = 60.0


@pytest.fixture
def replicas(pg_url: str) -> Iterator[list[Database]]:
    engines = [Database(pg_url) for _ in range(REPLICAS)]
    yield engines
    for engine in engines:
        engine.dispose()


def _posts(
    fleet: Fleet, sizes: list[int], seed: int, *, overlap: int = 1
) -> list[list[dict[str, Any]]]:
    """Every alert of the row in notifications of `sizes` (cycled), each repeating the last
    `overlap` alerts of the one before, shuffled."""
    alerts = fleet.hot([node("a", i) for i in range(32)])
    posts: list[list[dict[str, Any]]] = []
    start = 0
    while start < len(alerts):
        size = sizes[len(posts) % len(sizes)]
        posts.append(alerts[max(0, start - overlap) : start + size])
        start += size
    random.Random(seed).shuffle(posts)
    return posts


def _race(fleet: Fleet, replicas: list[Database], posts: list[list[dict[str, Any]]]) -> list[int]:
    """Each post on the replica of its turn, every thread released together; the incident
    each post landed on."""
    barrier = threading.Barrier(len(posts), timeout=WAIT)

    def job(db: Database, alerts: list[dict[str, Any]]) -> Callable[[], int]:
        def post() -> int:
            payload = WebhookPayload.model_validate(
                notification(alerts, group={"alertname": "GPUTemperatureHigh"})
            )
            barrier.wait()
            result = ingest.ingest(
                db,
                payload,
                clock=fleet.clock,
                reopen_window=fleet.settings.reopen_window,
                catalog=fleet.catalog(),
                escalation=frozen_policy(fleet.settings),
                topology=fleet.snapshot,
                settings=fleet.settings,
            )
            return result.incident

        return post

    jobs = [job(replicas[i % REPLICAS], alerts) for i, alerts in enumerate(posts)]
    with ThreadPoolExecutor(max_workers=len(jobs)) as pool:
        futures = [pool.submit(j) for j in jobs]
        return [f.result(timeout=WAIT) for f in futures]


def test_three_replicas_posting_a_rows_32_alerts_interleaved_open_one_incident(
    pg_url: str, replicas: list[Database], clock: FrozenClock, tmp_path: Path
) -> None:
    fleet = Fleet(replicas[0], clock, tmp_path)
    posts = _posts(fleet, [2, 5, 3, 4], seed=7)

    landed = _race(fleet, replicas, posts)

    incidents = fleet.incidents()
    assert len(incidents) == 1
    (incident,) = incidents
    assert set(landed) == {incident.number}
    assert (incident.scope, incident.domain, incident.status) == ("domain", "row/a", "open")
    assert fleet.hosts(incident.number) == [node("a", i) for i in range(32)]
    assert len(fleet.alerts_of(incident.number)) == 32
    assert incident.title == "Overheating: 32 nodes of row/a"


def test_lone_nodes_racing_on_three_replicas_grow_into_one_active_incident(
    pg_url: str, replicas: list[Database], clock: FrozenClock, tmp_path: Path
) -> None:
    fleet = Fleet(replicas[0], clock, tmp_path)
    posts = _posts(fleet, [1], seed=11, overlap=0)
    assert len(posts) == 32

    _race(fleet, replicas, posts)

    active = fleet.active()
    assert len(active) == 1
    (domain,) = active
    assert (domain.scope, domain.domain) == ("domain", "row/a")
    assert len(fleet.alerts_of(domain.number)) == 32
    others = [i for i in fleet.incidents() if i.number != domain.number]
    assert all(i.merged_into == domain.number and i.status == "resolved" for i in others)
    assert all(fleet.alerts_of(i.number) == [] for i in others)

"""Concurrency on PostgreSQL: racing webhook posts, an ingest that loses a unique key and
retries, and racing acknowledgements.

Many workers are released together by a barrier against the live server (or the service)
on a real PostgreSQL database; each round uses fresh groups so earlier rounds cannot hide
a race. Every wait is bounded: the barrier, each HTTP request and each worker.
"""

from __future__ import annotations

import random
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from typing import Any, TypeVar

import httpx
import pytest
from sqlalchemy import func, select

from bot.alerts import ingest
from bot.alerts.payload import WebhookPayload
from bot.clock import FrozenClock
from bot.config import load_settings
from bot.db import Database
from bot.incidents import log, service
from bot.incidents.models import Alert, Incident
from tests.support import server
from tests.support.payloads import alert, notification

pytestmark = pytest.mark.postgres

ROUNDS = 3
GROUPS = 4
POSTS_PER_GROUP = 5
ALERTS_PER_POST = 3
ACKERS = 10
WAIT = 60.0

T = TypeVar("T")


@pytest.fixture
def pg_db(pg_url: str) -> Iterator[Database]:
    db = Database(pg_url)
    yield db
    db.dispose()


@pytest.fixture
def live(pg_url: str, pg_db: Database, clock: FrozenClock) -> Iterator[str]:
    """The real app on loopback, storing into the test's PostgreSQL database."""
    with server.running(load_settings(database_url=pg_url), pg_db, clock) as url:
        yield url


def _all_at_once(jobs: list[Callable[[], T]]) -> list[T]:
    """Run every job on its own thread, released together; return results in order."""
    barrier = threading.Barrier(len(jobs), timeout=WAIT)

    def released(job: Callable[[], T]) -> T:
        barrier.wait()
        return job()

    with ThreadPoolExecutor(max_workers=len(jobs)) as pool:
        futures = [pool.submit(released, job) for job in jobs]
        return [future.result(timeout=WAIT) for future in futures]


def _round(number: int) -> tuple[dict[str, list[dict[str, Any]]], list[dict[str, Any]]]:
    """Fresh groups for one round: each group's alerts, and every post of every group.

    Post i of a group carries alerts i..i+2 of its 7, so neighbouring posts overlap.
    """
    alerts_of: dict[str, list[dict[str, Any]]] = {}
    bodies: list[dict[str, Any]] = []
    for g in range(GROUPS):
        host = f"r{number}-gpu-node-{g:02d}"
        alerts = [alert(host=host, gpu=i) for i in range(POSTS_PER_GROUP + ALERTS_PER_POST - 1)]
        group = {"alertname": "GPUXIDError", "Hostname": host}
        posts = [
            notification(alerts[i : i + ALERTS_PER_POST], group=group)
            for i in range(POSTS_PER_GROUP)
        ]
        alerts_of[posts[0]["groupKey"]] = alerts
        bodies += posts
    random.Random(number).shuffle(bodies)
    return alerts_of, bodies


def _post(url: str, body: dict[str, Any]) -> Callable[[], tuple[int, Any]]:
    """One webhook post; its status and JSON answer (the raw text when it is not JSON)."""

    def job() -> tuple[int, Any]:
        with httpx.Client(base_url=url, timeout=WAIT / 2) as client:
            response = client.post("/webhooks/alertmanager", json=body)
            if response.headers.get("content-type", "").startswith("application/json"):
                return response.status_code, response.json()
            return response.status_code, response.text

    return job


def test_concurrent_posts_of_overlapping_groups_open_one_incident_per_group(
    live: str, pg_db: Database
) -> None:
    posted: set[tuple[str, str]] = set()
    for number in range(ROUNDS):
        alerts_of, bodies = _round(number)
        answers = _all_at_once([_post(live, body) for body in bodies])

        assert [status for status, _ in answers] == [200] * len(bodies), answers
        posted |= {(a["fingerprint"], a["startsAt"]) for g in alerts_of.values() for a in g}

        with pg_db.session() as session:
            for key, alerts in alerts_of.items():
                incidents = list(session.scalars(select(Incident).where(Incident.group_key == key)))
                assert len(incidents) == 1, f"round {number}: {key} has {len(incidents)} incidents"
                incident = incidents[0]
                # Every post of the group answered with that incident; exactly one opened it.
                mine = [body for _, body in answers if body["incident"] == incident.ref]
                assert len(mine) == POSTS_PER_GROUP
                assert sum(body["opened"] for body in mine) == 1

                rows = service.alerts_of(session, incident.number)
                assert sorted(r.fingerprint for r in rows) == sorted(
                    a["fingerprint"] for a in alerts
                )
                entries = log.entries(session, incident.number)
                assert log.verify(incident, entries) is None
                firing = Counter(e.data["fingerprint"] for e in entries if e.type == "alert.firing")
                assert firing == Counter(a["fingerprint"] for a in alerts)
                assert [e.type for e in entries].count("incident.opened") == 1

            duplicates = session.execute(
                select(Alert.fingerprint, Alert.starts_at, func.count())
                .group_by(Alert.fingerprint, Alert.starts_at)
                .having(func.count() > 1)
            ).all()
            assert duplicates == []
            assert session.scalar(select(func.count()).select_from(Alert)) == len(posted)
            assert session.scalar(select(func.count()).select_from(Incident)) == GROUPS * (
                number + 1
            )


def _open(db: Database, clock: FrozenClock, host: str) -> int:
    body = notification([alert(host=host)])
    result = ingest.ingest(
        db, WebhookPayload.model_validate(body), clock=clock, reopen_window=timedelta(hours=24)
    )
    assert result.opened
    return result.incident


def _ack(db: Database, clock: FrozenClock, number: int, user: str) -> Callable[[], str]:
    """Acknowledge as `user` in a transaction of its own; the status it leaves."""

    def job() -> str:
        with db.transaction() as session:
            incident = service.acknowledge(
                session, number, actor=log.Actor.human(user), at=clock.now()
            )
            return incident.status

    return job


def test_concurrent_acknowledgements_write_exactly_one_log_entry(
    pg_db: Database, clock: FrozenClock
) -> None:
    for number in range(ROUNDS):
        incident_number = _open(pg_db, clock, f"ack-{number}-gpu-node")
        clock.advance(timedelta(minutes=1))

        users = [f"oncall-{i}" for i in range(ACKERS)]
        statuses = _all_at_once([_ack(pg_db, clock, incident_number, user) for user in users])

        assert statuses == ["acknowledged"] * ACKERS
        with pg_db.session() as session:
            incident = service.get(session, incident_number)
            entries = log.entries(session, incident_number)
            acks = [e for e in entries if e.type == "incident.acknowledged"]
            assert len(acks) == 1, [e.actor_id for e in acks]
            assert incident.status == "acknowledged"
            assert incident.owner == incident.acknowledged_by == acks[0].actor_id
            assert incident.owner in users
            assert log.verify(incident, entries) is None


def test_an_ingest_that_loses_an_alert_to_another_group_retries_and_joins_the_winner(
    pg_db: Database, clock: FrozenClock, caplog: pytest.LogCaptureFixture
) -> None:
    """Two groups carry one alert. The first group's transaction holds the alert's row,
    uncommitted, while the second group's ingest inserts it too: that insert waits on the
    unique index, then fails when the first commits. The retry (bot.retrying, no wait)
    reads the winner's row and joins its incident instead of failing the webhook."""
    shared = alert(host="race-gpu-node", gpu=0)
    first = WebhookPayload.model_validate(
        notification([shared], group={"alertname": "GPUXIDError", "Hostname": "race-gpu-node"})
    )
    second = WebhookPayload.model_validate(
        notification([shared], group={"alertname": "GPUXIDError", "cluster": "race"})
    )
    window = timedelta(hours=24)
    caplog.set_level("INFO", logger="bot.alerts.ingest")

    with ThreadPoolExecutor(max_workers=1) as pool:
        with pg_db.transaction() as session:
            winner = ingest._ingest(session, first, clock.now(), window, None)
            late = pool.submit(ingest.ingest, pg_db, second, clock=clock, reopen_window=window)
            _wait_for_a_lock_wait(pg_db, late)
        result = late.result(timeout=WAIT)

    assert result.incident == winner.incident and not result.opened
    assert any("lost a race; retrying" in r.getMessage() for r in caplog.records)
    with pg_db.session() as session:
        assert session.scalar(select(func.count()).select_from(Alert)) == 1
        assert session.scalar(select(func.count()).select_from(Incident)) == 1
        incident = service.get(session, winner.incident)
        assert log.verify(incident, log.entries(session, winner.incident)) is None


def _wait_for_a_lock_wait(db: Database, job: Any) -> None:
    """Until some session of the database waits on a lock (the loser's insert), bounded."""
    pause = threading.Event()
    for _ in range(int(WAIT / 0.05)):
        assert not job.done(), job.result()  # it finished without waiting: no race was made
        with db.engine.connect() as conn:
            waiting = conn.exec_driver_sql(
                "SELECT count(*) FROM pg_stat_activity "
                "WHERE datname = current_database() AND wait_event_type = 'Lock'"
            ).scalar()
        if waiting:
            return
        pause.wait(0.05)
    raise AssertionError("the second ingest never waited on the first one's alert row")

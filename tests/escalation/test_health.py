"""A stalled bot is itself alerting: `/readyz` fails and `/metrics` rises when escalation
timers are overdue; workers leave heartbeats. And on PostgreSQL, an acknowledgement that
races a firing timer: whichever commits first wins, nobody deadlocks, the log shows the
order."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from datetime import timedelta

import httpx
import pytest
from sqlalchemy import select

from bot import escalation
from bot.clock import FrozenClock
from bot.db import Database
from bot.escalation import health
from bot.escalation.models import WorkerHeartbeat
from bot.incidents import log
from bot.incidents import service as incidents
from bot.incidents.models import LogEntry
from tests.escalation.rig import EscRig
from tests.support.payloads import alert, notification


def test_readyz_fails_when_timers_are_late_and_the_metric_rises(
    serve: Callable[..., httpx.Client], clock: FrozenClock
) -> None:
    client = serve()
    assert client.post("/webhooks/alertmanager", json=notification([alert()])).status_code == 200
    assert client.get("/readyz").json() == {"status": "ready"}  # due now, not late yet

    clock.advance(timedelta(seconds=61))  # no worker runs in this test: nobody fires it
    answer = client.get("/readyz")
    assert answer.status_code == 503
    assert answer.json()["check"] == "timers"
    assert "escalation timers are 61 s overdue" in answer.json()["reason"]
    assert client.get("/readyz", params={"exclude": "timers"}).status_code == 200
    metrics = client.get("/metrics").text
    assert "runbook_bot_timers_late_seconds 61.0" in metrics
    assert 'runbook_bot_pages{state="failed"} 0.0' in metrics
    assert "runbook_bot_worker_heartbeat_age_seconds" not in metrics  # no worker ever beat


def test_readyz_recovers_once_a_worker_fires_them(
    serve: Callable[..., httpx.Client], db: Database, clock: FrozenClock
) -> None:
    client = serve()
    client.post("/webhooks/alertmanager", json=notification([alert()]))
    clock.advance(timedelta(minutes=2))
    assert client.get("/readyz").status_code == 503
    rig = EscRig(db, clock)
    assert rig.worker.run_once()
    assert client.get("/readyz").status_code == 200
    metrics = client.get("/metrics").text
    assert "runbook_bot_timers_late_seconds 0.0" in metrics
    assert "runbook_bot_worker_heartbeat_age_seconds 0.0" in metrics


def test_workers_beat_at_most_every_heartbeat_interval(db: Database, clock: FrozenClock) -> None:
    rig = EscRig(db, clock)
    rig.worker.run_once()
    first = clock.now()
    clock.advance(timedelta(seconds=2))
    rig.worker.run_once()  # within worker_heartbeat (5 s): not written again
    with db.session() as session:
        (beat,) = session.scalars(select(WorkerHeartbeat)).all()
        assert (beat.owner, beat.beat_at) == ("w1", first)
    clock.advance(timedelta(seconds=4))
    rig.worker.run_once()
    with db.session() as session:
        (beat,) = health.workers(session)
        assert beat.beat_at == clock.now()
        assert health.status(session, clock.now()).heartbeat_age == 0.0


@pytest.fixture
def pg(pg_url: str, clock: FrozenClock) -> Iterator[EscRig]:
    db = Database(pg_url)
    try:
        yield EscRig(db, clock)
    finally:
        db.dispose()


@pytest.mark.postgres
def test_an_ack_holding_the_incident_makes_the_timer_wait_not_deadlock(
    pg: EscRig, clock: FrozenClock
) -> None:
    rig, db = pg, pg.db
    number = rig.open("critical")
    rig.at(0)
    rig.at(14)
    # Someone is acknowledging: the incident row is locked, the commit not yet done.
    with db.transaction() as session:
        incidents.get(session, number, lock=True)
        clock.advance(timedelta(minutes=1, seconds=1))  # level 2 is due now
        fired: list[int] = []
        firing = threading.Thread(target=lambda: fired.append(rig.worker.fire()))
        firing.start()
        firing.join(timeout=10)
        assert not firing.is_alive() and fired == [0]  # passed over, not waited for
        actor = log.Actor.human("slack:U0ALICE")
        escalation.acknowledge(session, number, actor=actor, at=clock.now())
    assert rig.worker.fire() == 0  # the acknowledgement cancelled it
    kinds = [e.type for e in rig.entries(number) if e.type.startswith(("escalation", "inc"))]
    assert kinds[-2:] == ["escalation.paged", "incident.acknowledged"]
    assert rig.page_minutes(number) == [0]


@pytest.mark.postgres
def test_a_page_that_won_the_race_comes_before_the_ack_in_the_log(pg: EscRig) -> None:
    rig, db = pg, pg.db
    number = rig.open("critical")
    rig.at(0)
    rig.at(15)  # level 2 fires and commits ...
    rig.ack(number)  # ... then the acknowledgement lands
    with db.session() as session:
        types = session.scalars(
            select(LogEntry.type).where(LogEntry.incident_number == number).order_by(LogEntry.seq)
        ).all()
    tail = [t for t in types if t in ("escalation.paged", "incident.acknowledged")]
    assert tail == ["escalation.paged", "escalation.paged", "incident.acknowledged"]
    assert rig.pending(number)[0].kind == "ack"

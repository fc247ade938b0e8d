"""Escalation timers on PostgreSQL with real `runbook-bot worker` processes, in real time.

Incidents are opened through the real `ingest` with a policy whose critical ladder has one
level, `after: 1m`, and a `FrozenClock` set about a minute in the past, so each first
timer comes due a few seconds from now. Three workers (the console command, each its own
process and connection pool) race for them with `FOR UPDATE SKIP LOCKED`; a worker killed
with SIGKILL mid-run must lose nothing. Every check is about correctness (each timer fired
exactly once, one page each); no wall-clock duration is asserted, and every wait is
bounded.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import IO, Any

import pytest
import yaml
from sqlalchemy import text

from bot.alerts import ingest
from bot.alerts.payload import WebhookPayload
from bot.clock import FrozenClock
from bot.config import Settings, load_settings
from bot.db import Database
from bot.escalation.service import frozen_policy
from tests.sim.waiting import eventually
from tests.support.payloads import alert, notification

pytestmark = pytest.mark.postgres

WORKERS = 3
WAIT = 60.0
ESCALATION: dict[str, Any] = {
    "policies": {"critical": {"levels": [{"after": "1m", "notify": ["oncall"]}]}}
}
AFTER = timedelta(minutes=1)

TIMERS = """SELECT state, count(*), count(fired_at), count(DISTINCT fired_by)
    FROM escalation_timers GROUP BY state"""
FIRST_TIMERS = """SELECT incident_number, state, fired_at, fired_by FROM escalation_timers
    WHERE kind = 'level' AND round = 0 AND level = 0"""
PAGED = """SELECT i.number, count(l.id) FROM incidents i
    LEFT JOIN incident_log l ON l.incident_number = i.number AND l.type = 'escalation.paged'
        AND (l.data ->> 'level')::int = 0 AND (l.data ->> 'round')::int = 0
    GROUP BY i.number"""


@dataclass
class Workers:
    """`runbook-bot worker` processes sharing one settings file, each with its own log."""

    config: Path
    logs: Path
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)
    outputs: list[IO[bytes]] = field(default_factory=list)

    def start(self, count: int) -> None:
        for index in range(count):
            output = (self.logs / f"worker-{index}.log").open("w+b")
            self.outputs.append(output)
            self.procs.append(
                subprocess.Popen(
                    [sys.executable, "-m", "bot.cli", "--config", str(self.config), "worker"],
                    env={**os.environ, "RUNBOOK_BOT_LOG_LEVEL": "warning"},
                    stdout=output,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            )

    def log(self) -> str:
        texts = []
        for index, output in enumerate(self.outputs):
            output.seek(0)
            texts.append(f"--- worker {index}\n" + output.read().decode(errors="replace"))
        return "\n".join(texts)

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.terminate()
        for proc in self.procs:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
        for output in self.outputs:
            output.close()


@pytest.fixture
def pg_db(pg_url: str) -> Iterator[Database]:
    db = Database(pg_url)
    yield db
    db.dispose()


@pytest.fixture
def settings(pg_url: str) -> Settings:
    return load_settings(database_url=pg_url, escalation=ESCALATION)


@pytest.fixture
def workers(pg_url: str, tmp_path: Path) -> Iterator[Workers]:
    config = tmp_path / "settings.yaml"
    config.write_text(
        yaml.safe_dump({"database_url": pg_url, "escalation": ESCALATION}), encoding="utf-8"
    )
    handle = Workers(config, tmp_path)
    try:
        yield handle
    finally:
        handle.stop()


def _ready(db: Database, count: int) -> bool:
    """Each worker has beaten: it started, reached the database and is in its loop."""
    with db.session() as session:
        beaten = session.execute(text("SELECT count(*) FROM worker_heartbeats")).scalar_one()
    return int(beaten) >= count


def _open(db: Database, settings: Settings, dues: list[datetime]) -> list[int]:
    """Open one incident per due time through the real ingest (4 at a time), each with a
    group of its own; its first timer comes due at that time."""
    frozen = frozen_policy(settings)

    def one(index: int) -> int:
        body = notification([alert(host=f"timer-node-{index:05d}")])
        result = ingest.ingest(
            db,
            WebhookPayload.model_validate(body),
            clock=FrozenClock(dues[index] - AFTER),
            reopen_window=timedelta(hours=24),
            escalation=frozen,
        )
        assert result.opened
        return result.incident

    with ThreadPoolExecutor(max_workers=4) as pool:
        return list(pool.map(one, range(len(dues))))


def _fired(db: Database) -> int:
    with db.session() as session:
        return int(
            session.execute(
                text("SELECT count(*) FROM escalation_timers WHERE state = 'fired'")
            ).scalar_one()
        )


def _assert_each_fired_once(db: Database, incidents: list[int]) -> list[tuple[Any, ...]]:
    """Every first timer fired (once: one row per incident), nothing pending or cancelled,
    exactly one level-0 page per incident; the first timers' rows."""
    with db.session() as session:
        states = {row[0]: row[1:] for row in session.execute(text(TIMERS))}
        first = [tuple(row) for row in session.execute(text(FIRST_TIMERS))]
        paged = {int(row[0]): int(row[1]) for row in session.execute(text(PAGED))}
    assert set(states) == {"fired"}, states
    count, with_fired_at, _ = states["fired"]
    assert count == with_fired_at == len(incidents)
    assert sorted(row[0] for row in first) == sorted(incidents)
    assert all(row[1] == "fired" and row[2] is not None and row[3] for row in first)
    assert set(paged) == set(incidents)
    twice = {number: n for number, n in paged.items() if n != 1}
    assert twice == {}, f"incidents paged other than once: {twice}"
    return first


def test_three_workers_fire_1000_timers_due_together_exactly_once(
    pg_db: Database, settings: Settings, workers: Workers
) -> None:
    incidents = 1000
    workers.start(WORKERS)
    eventually(lambda: _ready(pg_db, WORKERS), timeout=WAIT, what="the workers to start")
    # Due over 3 s, shortly after arming ends (whatever arming takes, they are due then).
    base = datetime.now(UTC) + timedelta(seconds=8)
    dues = [base + timedelta(seconds=3 * i / incidents) for i in range(incidents)]
    numbers = _open(pg_db, settings, dues)
    assert len(set(numbers)) == incidents

    eventually(lambda: _fired(pg_db) >= incidents, timeout=WAIT, what="every timer to fire")
    time.sleep(1.0)  # a duplicate firing, if any, would land now
    first = _assert_each_fired_once(pg_db, numbers)
    due_of = dict(zip(numbers, dues, strict=True))
    early = [row[0] for row in first if row[2] < due_of[row[0]]]
    assert early == [], f"timers fired before they were due: {early}"
    owners = {row[3] for row in first}
    assert len(owners) > 1, f"only {owners} fired timers"
    assert all(proc.poll() is None for proc in workers.procs), workers.log()


def test_a_killed_worker_loses_no_timer_and_none_fires_twice(
    pg_db: Database, settings: Settings, workers: Workers
) -> None:
    incidents = 400
    workers.start(WORKERS)
    eventually(lambda: _ready(pg_db, WORKERS), timeout=WAIT, what="the workers to start")
    base = datetime.now(UTC) + timedelta(seconds=6)
    dues = [base + timedelta(seconds=10 * i / incidents) for i in range(incidents)]
    numbers = _open(pg_db, settings, dues)

    eventually(lambda: _fired(pg_db) >= incidents // 10, timeout=WAIT, what="the first firings")
    victim = workers.procs[0]
    os.killpg(victim.pid, signal.SIGKILL)
    victim.wait(timeout=10)
    killed_at = datetime.now(UTC)
    fired_before = _fired(pg_db)
    assert fired_before < incidents, "every timer fired before the kill: nothing was tested"

    eventually(
        lambda: _fired(pg_db) >= incidents, timeout=WAIT, what="the survivors to fire the rest"
    )
    time.sleep(1.0)
    first = _assert_each_fired_once(pg_db, numbers)
    after = [row for row in first if row[2] > killed_at]
    assert after, "no timer fired after the kill"
    dead = f":{victim.pid}:"
    assert not [row for row in after if dead in row[3]], "the killed worker fired after death"
    # The survivors are still running; only the victim died (by our signal).
    assert victim.returncode == -signal.SIGKILL
    assert all(proc.poll() is None for proc in workers.procs[1:]), workers.log()

"""Escalation timer benchmark: how late N armed timers fire with W `runbook-bot worker`s.

Recreates the PostgreSQL database `runbook_bot_timers_bench` and migrates it, then opens
`--timers` incidents (10,000) through the real `ingest`, each its own group, with a
critical policy of one level (`after: 24h`, notify `oncall`): every incident gets its
first escalation timer, due tomorrow. It starts `--workers` (3) `runbook-bot worker`
processes with the same settings, waits for each one's heartbeat, and only then moves the
due times (one UPDATE, in id order) to spread evenly over `--window` seconds (30) that
begin `--lead` seconds (3) from now; with `--burst` every timer comes due at the same
instant. So arming's own cost (about 10 ms an incident) is outside the measured window and
the workers find the timers as they would in production: pending rows whose time came.

It waits (bounded) until no timer is pending, stops the workers (SIGTERM) and reports per
timer lateness = fired_at - due_at (p50, p99, max), duplicates (incidents with more than
one `escalation.paged` entry, plus timers still pending, plus incidents never paged), the
timers each worker fired and the CPU seconds each used.

    .venv/bin/python bench/timers.py [--timers N] [--workers W] [--window S] [--burst]
                                    [--lead S] [--database-url URL]

Targets (spread mode): p99 < 2 s, max < 5 s, 0 duplicates; PASS or MISS, exit 1 on a MISS
or a failed setup. `--burst` is informational: its figures are printed, and only a
duplicate or a lost timer fails it. The client, the workers and PostgreSQL share the
machine.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import IO, Any

import psycopg
import yaml
from sqlalchemy.engine import make_url

from bench import scratch
from bench.results import Results, add_option
from bot import migrations
from bot.alerts import ingest
from bot.alerts.payload import WebhookPayload
from bot.clock import SystemClock
from bot.config import load_settings
from bot.db import Database
from bot.escalation.service import frozen_policy

DEFAULT_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/runbook_bot_timers_bench"
ESCALATION: dict[str, Any] = {
    "policies": {"critical": {"levels": [{"after": "24h", "notify": ["oncall"]}]}}
}
TARGET_P99, TARGET_MAX = 2.0, 5.0
ARMERS = 4
"""Threads that open incidents through ingest (PostgreSQL serializes only per group)."""
FAILURES = (RuntimeError, OSError, subprocess.SubprocessError, psycopg.Error)

SPREAD = """WITH ranked AS (
    SELECT id, row_number() OVER (ORDER BY id) - 1 AS k FROM escalation_timers
    WHERE state = 'pending')
  UPDATE escalation_timers t
  SET due_at = %(base)s + make_interval(secs => %(window)s * ranked.k / %(n)s)
  FROM ranked WHERE t.id = ranked.id"""
PENDING = "SELECT count(*) FROM escalation_timers WHERE state = 'pending'"
LATENESS = """SELECT extract(epoch FROM fired_at - due_at)::float8, fired_by, fired_at
    FROM escalation_timers WHERE state = 'fired' ORDER BY fired_at"""
PAGES = """SELECT count(*) FILTER (WHERE n > 1), count(*) FILTER (WHERE n = 0),
    coalesce(sum(n), 0) FROM (
  SELECT i.number, count(l.id) AS n FROM incidents i
  LEFT JOIN incident_log l ON l.incident_number = i.number AND l.type = 'escalation.paged'
  GROUP BY i.number) per_incident"""
STATES = "SELECT state, count(*) FROM escalation_timers GROUP BY state ORDER BY state"


def connect(url: str, database: str | None = None) -> psycopg.Connection[Any]:
    target = make_url(url).set(drivername="postgresql")
    target = target.set(database=database) if database else target
    return psycopg.connect(target.render_as_string(hide_password=False), connect_timeout=5)


def cpu_seconds(pid: int, reaped: bool = False) -> float:
    """User + system CPU of a process (plus its exited children: `reaped`), /proc/PID/stat."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(x) for x in fields[11 : 15 if reaped else 13]) / os.sysconf("SC_CLK_TCK")


def cpu_now(workers: list[subprocess.Popen[bytes]]) -> dict[str, float]:
    """CPU seconds so far: the workers, every PostgreSQL process (exited backends counted
    on the postmaster) and the whole machine (busy, from /proc/stat)."""
    ticks = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
    pg = 0.0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, IndexError, ValueError):
            if "(postgres)" in stat.read_text():
                pg += cpu_seconds(int(stat.parent.name), reaped=True)
    worker = 0.0
    for proc in workers:
        with contextlib.suppress(OSError, IndexError, ValueError):
            worker += cpu_seconds(proc.pid)
    machine = (sum(ticks) - ticks[3] - ticks[4]) / os.sysconf("SC_CLK_TCK")
    return {"workers": worker, "PostgreSQL": pg, "machine": machine, "wall": time.monotonic()}


def body(index: int) -> dict[str, Any]:
    """One Alertmanager notification of one GPUXIDError alert on a node of its own."""
    host = f"gpu-node-{index:05d}"
    labels = {"alertname": "GPUXIDError", "Hostname": host, "gpu": "0", "severity": "critical"}
    group = {"alertname": "GPUXIDError", "Hostname": host}
    return {
        "version": "4",
        "groupKey": f'{{}}:{{Hostname="{host}", alertname="GPUXIDError"}}',
        "truncatedAlerts": 0,
        "status": "firing",
        "receiver": "runbook-bot",
        "groupLabels": group,
        "commonLabels": labels,
        "commonAnnotations": {},
        "externalURL": "http://alertmanager:9093",
        "alerts": [
            {
                "status": "firing",
                "labels": labels,
                "annotations": {"summary": f"{host} GPU 0 GPUXIDError"},
                "startsAt": "2026-11-30T06:00:00Z",
                "endsAt": "0001-01-01T00:00:00Z",
                "generatorURL": "http://prometheus:9090/graph",
                "fingerprint": f"{index:016x}",
            }
        ],
    }


def arm(url: str, timers: int) -> float:
    """Open `timers` incidents through ingest (each arms its first timer); seconds taken."""
    settings = load_settings(database_url=url, escalation=ESCALATION)
    frozen = frozen_policy(settings)
    db = Database(url)
    clock = SystemClock()
    started = time.monotonic()

    def one(index: int) -> None:
        payload = WebhookPayload.model_validate(body(index))
        result = ingest.ingest(
            db, payload, clock=clock, reopen_window=timedelta(hours=24), escalation=frozen
        )
        if not result.opened:
            raise RuntimeError(f"notification {index} opened no incident")

    try:
        with ThreadPoolExecutor(max_workers=ARMERS) as pool:
            list(pool.map(one, range(timers)))
    finally:
        db.dispose()
    return time.monotonic() - started


@dataclass
class Result:
    late: list[float]
    per_worker: dict[str, int]
    cpu: dict[str, float]
    states: dict[str, int]
    paged_twice: int
    never_paged: int
    pages: int
    pending: int
    first_due: datetime
    last_fired: datetime | None
    arm_seconds: float
    usage: dict[str, float]
    """CPU seconds used from the due times' UPDATE until no timer was pending."""


def start_workers(count: int, config: Path, log: IO[bytes]) -> list[subprocess.Popen[bytes]]:
    command = [sys.executable, "-m", "bot.cli", "--config", str(config), "worker"]
    env = {**os.environ, "RUNBOOK_BOT_LOG_LEVEL": "warning"}
    return [
        subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)
        for _ in range(count)
    ]


def wait_for(check: Any, seconds: float, what: str, workers: list[Any]) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        if any(proc.poll() is not None for proc in workers):
            raise RuntimeError(f"a worker exited while waiting for {what}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what}: not within {seconds:.0f} s")
        time.sleep(0.2)


def measure(args: argparse.Namespace, log: IO[bytes], tmp: Path) -> Result:
    url: str = args.database_url
    db = Database(url)
    try:
        migrations.upgrade(db)
    finally:
        db.dispose()
    print(f"arming {args.timers} timers through ingest ({ARMERS} threads)...", flush=True)
    arm_seconds = arm(url, args.timers)
    config = tmp / "settings.yaml"
    config.write_text(yaml.safe_dump({"database_url": url, "escalation": ESCALATION}))
    workers = start_workers(args.workers, config, log)
    try:
        with connect(url) as conn:
            conn.autocommit = True

            def scalar(query: str) -> int:
                row = conn.execute(query).fetchone()
                return int(row[0]) if row else 0

            beats = "SELECT count(*) FROM worker_heartbeats"
            wait_for(lambda: scalar(beats) >= args.workers, 60, "worker heartbeats", workers)
            base = datetime.now(UTC) + timedelta(seconds=args.lead)
            window = 0.0 if args.burst else args.window
            before = cpu_now(workers)
            conn.execute(SPREAD, {"base": base, "window": window, "n": args.timers})
            budget = args.lead + window + 300
            wait_for(lambda: scalar(PENDING) == 0, budget, "every timer to fire", workers)
            after = cpu_now(workers)
            usage = {key: after[key] - before[key] for key in before}
            time.sleep(1.0)  # a second firing, if any, would land now
            cpu = {str(proc.pid): cpu_seconds(proc.pid) for proc in workers}
            rows = conn.execute(LATENESS).fetchall()
            paged_twice, never_paged, pages = conn.execute(PAGES).fetchone() or (0, 0, 0)
            states = {str(s): int(n) for s, n in conn.execute(STATES).fetchall()}
    finally:
        for proc in workers:
            if proc.poll() is None:
                proc.terminate()
        for proc in workers:
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)
    per_worker: dict[str, int] = {}
    for _, owner, _ in rows:
        per_worker[owner] = per_worker.get(owner, 0) + 1
    return Result(
        late=[float(r[0]) for r in rows],
        per_worker=per_worker,
        cpu=cpu,
        states=states,
        paged_twice=int(paged_twice),
        never_paged=int(never_paged),
        pages=int(pages),
        pending=states.get("pending", 0),
        first_due=base,
        last_fired=rows[-1][2] if rows else None,
        arm_seconds=arm_seconds,
        usage=usage,
    )


def quantile(values: list[float], q: float) -> float:
    """Nearest-rank quantile of sorted `values`."""
    if not values:
        return float("nan")
    index = min(len(values) - 1, max(0, int(round(q * len(values) + 0.5)) - 1))
    return values[index]


def report(args: argparse.Namespace, result: Result) -> int:
    late = sorted(result.late)
    p50, p99 = quantile(late, 0.50), quantile(late, 0.99)
    worst = late[-1] if late else float("nan")
    duplicates = result.paged_twice + result.pending
    lost = result.never_paged
    mode = "burst: every timer due at once" if args.burst else f"spread over {args.window:g} s"
    print(f"timers {args.timers}, workers {args.workers}, {mode}, {os.cpu_count()} cores")
    print(f"armed through ingest in {result.arm_seconds:.1f} s (outside the measured window)")
    states = ", ".join(f"{k} {v}" for k, v in result.states.items())
    print(f"timer rows: {states}; escalation.paged entries: {result.pages}")
    if result.last_fired is not None:
        span = (result.last_fired - result.first_due).total_seconds()
        rate = len(late) / span if span > 0 else float("inf")
        print(f"first due -> last fired: {span:.2f} s ({rate:,.0f} timers/s overall)")
    print(f"lateness (fired_at - due_at): p50 {p50:.3f} s, p99 {p99:.3f} s, max {worst:.3f} s")
    print(
        f"duplicates: {duplicates} (incidents paged more than once {result.paged_twice}, "
        f"timers still pending {result.pending}); incidents never paged: {lost}"
    )
    for owner, fired in sorted(result.per_worker.items()):
        pid = owner.split(":")[-2] if owner.count(":") >= 2 else ""
        cpu = f" ({result.cpu[pid]:.1f} CPU s in all)" if pid in result.cpu else ""
        print(f"  worker {owner}: fired {fired}{cpu}")
    used = result.usage
    cores = used["wall"] * (os.cpu_count() or 1)
    print(
        f"CPU while firing ({used['wall']:.1f} s wall, {cores:.0f} core-s available): "
        f"workers {used['workers']:.1f} s, PostgreSQL {used['PostgreSQL']:.1f} s, "
        f"machine busy {used['machine']:.1f} s ({used['machine'] / cores:.0%})"
    )
    print(
        "reference: Grafana OnCall schedules escalation steps as Celery tasks and an auditor "
        "re-checks escalations periodically, so a lost escalation task can be ~18 min late; "
        f"here a timer is a row, and the worst of {len(late)} was {worst:.2f} s late"
    )
    mode_name = "burst" if args.burst else "spread"
    parameters = {
        key: getattr(args, key) for key in ("timers", "workers", "window", "lead", "burst")
    }
    results = Results("timers", f"Escalation timers ({mode_name})", parameters)
    results.distribution("timer lateness", late, "s")
    if result.last_fired is not None and len(late):
        span = (result.last_fired - result.first_due).total_seconds()
        results.metric("timers fired per second", len(late) / span if span > 0 else 0.0, "1/s")
    limits = (None, None) if args.burst else (TARGET_P99, TARGET_MAX)
    results.metric("lateness p50", p50, "s")
    results.metric("lateness p99", p99, "s", target=limits[0], op="<")
    results.metric("lateness max", worst, "s", target=limits[1], op="<")
    results.metric("duplicate or lost timers", duplicates + lost, "timers", target=0)
    results.metric("worker CPU while firing", used["workers"], "s")
    results.metric("PostgreSQL CPU while firing", used["PostgreSQL"], "s")
    results.write(args.json)
    if duplicates or lost:
        print(f"duplicates {duplicates}, lost {lost} (target 0): MISS")
        return 1
    if args.burst:
        print("burst mode is informational (no lateness target): no duplicate, none lost")
        return 0
    verdicts = [
        ("p99", p99, TARGET_P99),
        ("max", worst, TARGET_MAX),
    ]
    missed = False
    for name, value, target in verdicts:
        verdict = "PASS" if value < target else "MISS"
        missed |= verdict == "MISS"
        print(f"{name} lateness {value:.3f} s (target < {target:g} s): {verdict}")
    print("duplicates 0 (target 0): PASS")
    return 1 if missed else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database-url", default=DEFAULT_URL)
    parser.add_argument("--timers", type=int, default=10_000)
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--window", type=float, default=30.0, help="seconds the dues spread")
    parser.add_argument("--lead", type=float, default=3.0, help="seconds to the first due")
    parser.add_argument("--burst", action="store_true", help="every timer due at once")
    add_option(parser)
    args = parser.parse_args()
    url: str = args.database_url
    if scratch.refused(url):
        return 2
    if args.timers < 1 or args.workers < 1 or args.window < 0:
        parser.error("--timers and --workers must be positive, --window not negative")
    with tempfile.TemporaryDirectory(prefix="bench-timers-") as tmp:
        result = scratch.measured(
            [url], lambda log: measure(args, log, Path(tmp)), FAILURES, label="worker log"
        )
    return 1 if result is None else report(args, result)


if __name__ == "__main__":
    sys.exit(main())

"""Ingest benchmark: Alertmanager-shaped webhook load against `runbook-bot serve` on PostgreSQL.

Recreates the database `runbook_bot_bench`, migrates it, starts the real service as a
subprocess on a free loopback port and drives POST /webhooks/alertmanager from N asyncio
clients (httpx) until a batch count or a time budget runs out, whichever comes first. Traffic
models 1,000 GPU nodes x 8 GPUs with DCGM-style labels; each POST is one Alertmanager group
(Hostname, alertname) of 10 alerts, and a group is never in flight twice (Alertmanager sends
one notification per group at a time). Mix: ~50% new firing groups, ~35% repeats (same
fingerprint + startsAt), ~15% resolutions. Client, server and PostgreSQL share the machine.

    .venv/bin/python bench/ingest.py [--database-url URL] [--clients N] [--seconds S] [--batches N]
    .venv/bin/python bench/ingest.py --peer [--clients 8] [--seconds S]   # vs a bare endpoint

Exit 1 on any non-200 answer, a failed sanity check or a setup failure. Targets: >= 1,000
alerts/s and p99 < 100 ms; a miss is reported (MISS) but is not an error.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import json
import math
import os
import random
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import IO, Any

import httpx
import psycopg
from sqlalchemy.engine import make_url

from bench import scratch
from bench.results import Results, add_option

DEFAULT_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/runbook_bot_bench"
NODES, GPUS, PER_POST = 1000, 8, 10
MIX = {"new": 0.50, "repeat": 0.35, "resolved": 0.15}
TARGET_RATE, TARGET_P99_MS = 1000.0, 100.0
MAX_IN_FLIGHT = 256  # open-loop POSTs outstanding at once, at most
# alertname: (severity, the label that tells a group's 10 alerts apart beyond `gpu`, its values)
RULES = {
    "GPUXIDError": ("critical", "xid", ("79", "48")),
    "GPUHighTemperature": ("warning", "sensor", ("gpu", "memory")),
    "GPUEccErrorsGrowing": ("warning", "ecc", ("sbe", "dbe")),
    "NodeNotReady": ("critical", "condition", ("Ready", "NetworkUnavailable")),
}
PCI_BUS = ("18", "2A", "3A", "5D", "9A", "AB", "BA", "DB")
GENERATOR = "http://prometheus:9090/graph?g0.expr=DCGM_FI_DEV_XID_ERRORS"
COUNTS = """SELECT (SELECT count(*) FROM incidents), (SELECT count(*) FROM alerts),
    (SELECT sessions FROM pg_stat_database WHERE datname = current_database())"""
BACKLOG = "SELECT count(*) FROM incident_runbooks WHERE proposed_at IS NULL"
# Seconds from the runbook frozen at ingest to the worker proposing its first steps.
LAG = """SELECT count(*), percentile_cont(ARRAY[0.5, 0.95, 0.99]) WITHIN GROUP (ORDER BY s),
    max(s) FROM (SELECT extract(epoch FROM proposed_at - matched_at) AS s
    FROM incident_runbooks WHERE proposed_at IS NOT NULL) lag"""
DRAIN_S = 120.0
SERVE_WORKER = "RUNBOOK_BOT_SERVE_WORKER"
FAILURES = (RuntimeError, OSError, subprocess.SubprocessError, psycopg.Error, httpx.HTTPError)
BOT = str(Path(sys.executable).parent / "runbook-bot")


def stamp(at: datetime) -> str:
    return at.strftime("%Y-%m-%dT%H:%M:%S.") + f"{at.microsecond // 1000:03d}Z"


@dataclass
class Group:
    """One Alertmanager group (Hostname, alertname) and the instance it currently holds."""

    node: int
    alertname: str
    starts_at: str = ""
    firing_body: bytes = b""

    def labels(self, index: int) -> dict[str, str]:
        severity, extra, values = RULES[self.alertname]
        node, gpu = self.node, index % GPUS
        labels = {"Hostname": f"gpu-node-{node:04d}", "alertname": self.alertname, "job": "dcgm"}
        labels |= {"UUID": f"GPU-{node:08x}-0000-0000-0000-{gpu:012d}", "gpu": str(gpu)}
        labels |= {"device": f"nvidia{gpu}", "instance": f"10.{node // 250}.{node % 250}.1:9400"}
        labels |= {"modelName": "NVIDIA H200", "pci_bus_id": f"00000000:{PCI_BUS[gpu]}:00.0"}
        return labels | {"severity": severity, extra: values[index // GPUS]}

    def members(self) -> list[dict[str, str]]:
        """The labels of every alert the group holds: its node's 10."""
        return [self.labels(index) for index in range(PER_POST)]

    def grouped_by(self, first: dict[str, str]) -> dict[str, str]:
        return {"Hostname": first["Hostname"], "alertname": self.alertname}

    def body(self, status: str, ends_at: str = "0001-01-01T00:00:00Z") -> bytes:
        alerts: list[dict[str, Any]] = []
        for labels in self.members():
            summary = f"{labels['Hostname']} GPU {labels['gpu']} {self.alertname}"
            fingerprint = hashlib.sha256(json.dumps(sorted(labels.items())).encode()).hexdigest()
            alerts.append(
                {"status": status, "labels": labels, "annotations": {"summary": summary}}
                | {"startsAt": self.starts_at, "endsAt": ends_at, "generatorURL": GENERATOR}
                | {"fingerprint": fingerprint[:16]}
            )
        first = alerts[0]["labels"]
        common = {k: v for k, v in first.items() if all(a["labels"][k] == v for a in alerts)}
        group = self.grouped_by(first)
        key = "{}:{" + ", ".join(f'{k}="{v}"' for k, v in sorted(group.items())) + "}"
        payload: dict[str, Any] = {"receiver": "runbook-bot", "status": status, "alerts": alerts}
        payload |= {"groupLabels": group, "commonLabels": common, "commonAnnotations": {}}
        payload |= {"externalURL": "http://alertmanager:9093", "version": "4", "groupKey": key}
        return json.dumps(payload | {"truncatedAlerts": 0}).encode()


@dataclass
class WideGroup(Group):
    """A group naming every node (`--peer`): one alertname on one GPU slot of all 1,000
    nodes, as a rule grouped by (alertname, gpu, its distinguishing label) notifies."""

    def members(self) -> list[dict[str, str]]:
        # `node` numbers the wave: 0..15 is the index of the one alert each node holds.
        return [Group(node, self.alertname).labels(self.node) for node in range(1, NODES + 1)]

    def grouped_by(self, first: dict[str, str]) -> dict[str, str]:
        extra = RULES[self.alertname][1]
        return {"alertname": self.alertname, "gpu": first["gpu"], extra: first[extra]}


WAVES = 2 * GPUS
"""Distinct wide groups per alertname: every (gpu, extra label value) pair."""


@dataclass
class Traffic:
    """Hands out the next POST; keeps every group to one notification in flight."""

    batches: int
    deadline: float
    rng: random.Random
    fresh: list[Group] = field(default_factory=list)
    firing: list[Group] = field(default_factory=list)
    resolved: list[Group] = field(default_factory=list)
    sent: dict[str, int] = field(default_factory=lambda: dict.fromkeys(MIX, 0))
    posted_groups: set[tuple[int, str]] = field(default_factory=set)
    wide: bool = False
    """Groups naming all 1,000 nodes (`WideGroup`) instead of one node's 10 alerts."""

    def __post_init__(self) -> None:
        if self.wide:
            self.fresh = [WideGroup(w, a) for w in range(WAVES) for a in RULES]
        else:
            self.fresh = [Group(n, a) for n in range(1, NODES + 1) for a in RULES]
        self.rng.shuffle(self.fresh)

    @property
    def per_post(self) -> int:
        return NODES if self.wide else PER_POST

    def _take(self, pool: list[Group]) -> Group:
        i = self.rng.randrange(len(pool))
        pool[i], pool[-1] = pool[-1], pool[i]
        return pool.pop()

    def next(self) -> tuple[str, Group, bytes] | None:
        if sum(self.sent.values()) >= self.batches or time.perf_counter() >= self.deadline:
            return None
        kind = self.rng.choices(list(MIX), weights=list(MIX.values()))[0]
        if (kind != "new" and self.firing) or not (self.fresh or self.resolved):
            kind = "repeat" if kind == "new" else kind
            group = self._take(self.firing)  # a repeat or the resolution of an idle group
            now = stamp(datetime.now(UTC))
            body = group.firing_body if kind == "repeat" else group.body("resolved", now)
        else:  # a new group fires; once all 4,000 have, a resolved one fires again
            kind, group = "new", self._take(self.fresh or self.resolved)
            group.starts_at = stamp(datetime.now(UTC) - timedelta(seconds=30))
            group.firing_body = body = group.body("firing")
            self.posted_groups.add((group.node, group.alertname))
        self.sent[kind] += 1
        return kind, group, body

    def done(self, kind: str, group: Group) -> None:
        (self.resolved if kind == "resolved" else self.firing).append(group)


@dataclass
class Stats:
    latencies: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    outcomes: dict[str, int] = field(default_factory=dict)


HEADERS = {"Content-Type": "application/json"}


async def send(
    http: httpx.AsyncClient,
    url: str,
    job: tuple[str, Group, bytes],
    traffic: Traffic,
    stats: Stats,
    since: float,
) -> None:
    """POST one notification; its latency counts from `since`."""
    kind, group, body = job
    try:
        response = await http.post(url, content=body, headers=HEADERS)
        status, text = response.status_code, response.text
    except httpx.HTTPError as exc:
        status, text = 0, f"{type(exc).__name__}: {exc}"
    record(stats, kind, group, status, text, time.perf_counter() - since)
    traffic.done(kind, group)


async def client(http: httpx.AsyncClient, url: str, traffic: Traffic, stats: Stats) -> None:
    while (job := traffic.next()) is not None:
        await send(http, url, job, traffic, stats, time.perf_counter())


async def paced(url: str, per_second: float, traffic: Traffic) -> Stats:
    """Open loop: one POST every 1/per_second s whatever the answers, as a steady alert
    rate would arrive. Latency counts from each POST's scheduled time, so a stalled server
    cannot hide its queue (no coordinated omission)."""
    stats = Stats()
    limits = httpx.Limits(max_connections=MAX_IN_FLIGHT, max_keepalive_connections=64)
    async with httpx.AsyncClient(timeout=10.0, limits=limits) as http:
        tasks: set[asyncio.Task[None]] = set()
        start, sent = time.perf_counter(), 0
        while (job := traffic.next()) is not None:
            due = start + sent / per_second
            sent += 1
            await asyncio.sleep(max(0.0, due - time.perf_counter()))
            task = asyncio.create_task(send(http, url, job, traffic, stats, due))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
        await asyncio.gather(*tasks)
    return stats


def record(stats: Stats, kind: str, group: Group, status: int, text: str, took: float) -> None:
    stats.latencies.append(took)
    if status != 200:
        stats.errors.append(f"{kind} {group.alertname}@{group.node}: {status} {text[:300]}")
    else:
        for outcome, count in json.loads(text)["alerts"].items():
            stats.outcomes[outcome] = stats.outcomes.get(outcome, 0) + count


async def drive(url: str, clients: int, traffic: Traffic) -> Stats:
    stats = Stats()
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(timeout=10.0, limits=limits) as http:
        await asyncio.gather(*(client(http, url, traffic, stats) for _ in range(clients)))
    return stats


def connect(url: str, database: str | None = None) -> psycopg.Connection[Any]:
    target = make_url(url).set(drivername="postgresql")
    target = target.set(database=database) if database else target
    return psycopg.connect(target.render_as_string(hide_password=False), connect_timeout=5)


def wait_ready(base: str, server: subprocess.Popen[bytes], seconds: float = 30.0) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RuntimeError(f"server exited with code {server.returncode} before ready")
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(f"{base}/readyz", timeout=2.0).status_code == 200:
                return
        time.sleep(0.1)
    raise RuntimeError(f"server not ready within {seconds:.0f} s")


def cpu_seconds(pid: int, reaped: bool = False) -> float:
    """User + system CPU of a process (plus its exited children: `reaped`), /proc/PID/stat."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(x) for x in fields[11 : 15 if reaped else 13]) / os.sysconf("SC_CLK_TCK")


def descendants(pid: int) -> list[int]:
    """Every live child of `pid`, their children, and so on (serve's worker process)."""
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*/children"):
        with contextlib.suppress(OSError):
            for child in map(int, task.read_text().split()):
                found += [child, *descendants(child)]
    return found


def cpu_now(server: int) -> dict[str, float]:
    """CPU seconds so far: this client, the server, its worker process(es), every
    PostgreSQL process (with exited backends, counted on the postmaster) and the whole
    machine (busy, from /proc/stat)."""
    ticks = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
    pg = 0.0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, IndexError, ValueError):
            if "(postgres)" in stat.read_text():
                pg += cpu_seconds(int(stat.parent.name), reaped=True)
    machine = (sum(ticks) - ticks[3] - ticks[4]) / os.sysconf("SC_CLK_TCK")
    own = time.process_time()
    worker = 0.0
    for child in descendants(server):
        with contextlib.suppress(OSError, IndexError, ValueError):
            worker += cpu_seconds(child)
    return {
        "client": own,
        "server": cpu_seconds(server),
        "worker": worker,
        "PostgreSQL": pg,
        "machine": machine,
    }


@dataclass
class Phase:
    name: str
    load: str
    stats: Stats
    sent: dict[str, int]
    elapsed: float
    cpu: dict[str, float]


@dataclass
class Proposals:
    """How the worker kept up: its backlog when the load stopped, how long it took to
    empty, and the lag from ingest freezing a runbook to its first steps proposed."""

    backlog: int
    drain_s: float
    proposed: int
    lag_s: tuple[float, float, float, float]


@dataclass
class Measured:
    phases: list[Phase]
    traffic: Traffic
    hwm_kib: int
    rows: dict[str, int]
    ingest_s: float
    proposals: Proposals | None
    """None when serve runs no worker (RUNBOOK_BOT_SERVE_WORKER=false)."""


def proposals(url: str) -> Proposals:
    """Wait (up to DRAIN_S) for the worker to propose every frozen runbook; measure it."""
    with connect(url) as conn:
        conn.autocommit = True
        started = time.perf_counter()
        backlog = int((conn.execute(BACKLOG).fetchone() or (0,))[0])
        left = backlog
        while left and time.perf_counter() - started < DRAIN_S:
            time.sleep(0.2)
            left = int((conn.execute(BACKLOG).fetchone() or (0,))[0])
        if left:
            raise RuntimeError(f"the worker left {left} runbooks unproposed after {DRAIN_S} s")
        drain_s = time.perf_counter() - started if backlog else 0.0
        count, quantiles, top = conn.execute(LAG).fetchone() or (0, None, None)
    p50, p95, p99 = quantiles or (0.0, 0.0, 0.0)  # NULL when nothing was proposed
    return Proposals(backlog, drain_s, int(count), (p50, p95, p99, top or 0.0))


def phase(
    name: str, load: str, traffic: Traffic, server: int, args: argparse.Namespace, go: Any
) -> Phase:
    """Run one load shape for --seconds (or --batches POSTs) and measure it."""
    before_sent = dict(traffic.sent)
    traffic.batches = sum(traffic.sent.values()) + args.batches
    traffic.deadline = time.perf_counter() + args.seconds
    before, started = cpu_now(server), time.perf_counter()
    stats = asyncio.run(go)
    elapsed = time.perf_counter() - started
    cpu = {k: v - before[k] for k, v in cpu_now(server).items()}
    cpu["other"] = cpu.pop("machine") - sum(cpu.values())
    sent = {k: traffic.sent[k] - before_sent[k] for k in traffic.sent}
    return Phase(name, load, stats, sent, elapsed, cpu)


def measure(args: argparse.Namespace, env: dict[str, str], log: IO[bytes]) -> Measured:
    upgrade = [BOT, "db", "upgrade"]
    setup = subprocess.run(upgrade, env=env, capture_output=True, text=True, timeout=60)
    if setup.returncode != 0:
        raise RuntimeError(f"runbook-bot db upgrade failed: {setup.stderr.strip()}")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    cmd = [BOT, "serve", "--host", "127.0.0.1", "--port", str(port)]
    server = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        base = f"http://127.0.0.1:{port}"
        hook = f"{base}/webhooks/alertmanager"
        wait_ready(base, server)
        traffic = Traffic(0, 0.0, random.Random(7))
        per_post = args.rate / PER_POST
        phases = [
            phase(
                "steady",
                f"open loop, {args.rate:,.0f} alerts/s ({per_post:,.0f} POSTs/s, paced)",
                traffic,
                server.pid,
                args,
                paced(hook, per_post, traffic),
            ),
            phase(
                "capacity",
                f"closed loop, {args.clients} clients back to back",
                traffic,
                server.pid,
                args,
                drive(hook, args.clients, traffic),
            ),
        ]
        status = Path(f"/proc/{server.pid}/status").read_text().splitlines()
        hwm_kib = int(next(line.split()[1] for line in status if line.startswith("VmHWM")))
        metrics = httpx.get(f"{base}/metrics", timeout=10.0).text.splitlines()
        ingest_s = next(float(m.split()[1]) for m in metrics if "ingest_seconds_sum" in m)
        with connect(args.database_url) as conn:
            time.sleep(1.0)  # PostgreSQL publishes session counts at most once a second
            row = conn.execute(COUNTS).fetchone() or (0, 0, 0)
            rows = dict(zip(("incidents", "alerts", "sessions"), map(int, row), strict=True))
        worker = proposals(args.database_url) if env.get(SERVE_WORKER) != "false" else None
    finally:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
    return Measured(phases, traffic, hwm_kib, rows, ingest_s, worker)


def run(args: argparse.Namespace) -> int:
    url: str = args.database_url
    if scratch.refused(url):
        return 2
    env = {**os.environ, "RUNBOOK_BOT_DATABASE_URL": url, "RUNBOOK_BOT_LOG_LEVEL": "warning"}
    result = scratch.measured(
        [url], lambda log: measure(args, env, log), FAILURES, label="server log"
    )
    return 1 if result is None else report(args, result)


def percentiles(latencies: list[float]) -> tuple[float, float, float, float]:
    lat = sorted(latencies)
    p50, p95, p99 = (lat[math.ceil(q * len(lat)) - 1] * 1000 for q in (0.5, 0.95, 0.99))
    return p50, p95, p99, lat[-1] * 1000


def describe(one: Phase, cores: int) -> list[tuple[str, str]]:
    stats, requests = one.stats, len(one.stats.latencies)
    p50, p95, p99, top = percentiles(stats.latencies)
    cpu = ", ".join(f"{who} {s:.1f}" for who, s in one.cpu.items())
    busy = sum(one.cpu.values()) / (cores * one.elapsed)
    return [
        (f"{one.name} phase", one.load),
        ("  sent", ", ".join(f"{k} {n:,} ({n / requests:.0%})" for k, n in one.sent.items())),
        ("  requests", f"{requests:,} in {one.elapsed:.1f} s ({requests / one.elapsed:,.1f}/s)"),
        ("  alerts", f"{requests * PER_POST:,} ({requests * PER_POST / one.elapsed:,.0f}/s)"),
        ("  latency ms", f"p50 {p50:.1f}  p95 {p95:.1f}  p99 {p99:.1f}  max {top:.1f}"),
        ("  errors", f"{len(stats.errors)}" + "".join(f"\n    {e}" for e in stats.errors[:5])),
        ("  CPU s", f"{cpu} = {busy:.0%} of {cores} cores x {one.elapsed:.1f} s"),
    ]


def worker_lines(found: Proposals | None) -> list[tuple[str, str]]:
    if found is None:
        return [("worker", "none in serve (RUNBOOK_BOT_SERVE_WORKER=false): nothing proposed")]
    p50, p95, p99, top = (x * 1000 for x in found.lag_s)
    return [
        (
            "worker",
            f"{found.proposed:,} runbooks proposed; backlog when the load stopped "
            f"{found.backlog:,}, empty {found.drain_s:.1f} s later",
        ),
        (
            "  lag ms",
            f"frozen -> first steps proposed: p50 {p50:.0f}  p95 {p95:.0f}  "
            f"p99 {p99:.0f}  max {top:.0f}",
        ),
    ]


def report(args: argparse.Namespace, result: Measured) -> int:
    steady, capacity = result.phases
    rows, cores = result.rows, os.cpu_count() or 1
    if not all(p.stats.latencies for p in result.phases):
        print("benchmark failed: a phase sent no request", file=sys.stderr)
        return 1
    requests = sum(len(p.stats.latencies) for p in result.phases)
    groups = len(result.traffic.posted_groups)
    instances = result.traffic.sent["new"] * PER_POST
    ok = rows["incidents"] == groups and rows["alerts"] == instances
    errors = sum(len(p.stats.errors) for p in result.phases)
    model = next(ln for ln in Path("/proc/cpuinfo").read_text().splitlines() if "model name" in ln)
    aimed = ", ".join(f"{k} {v:.0%}" for k, v in MIX.items())
    rate = len(capacity.stats.latencies) * PER_POST / capacity.elapsed
    steady_rate = len(steady.stats.latencies) * PER_POST / steady.elapsed
    p99 = percentiles(steady.stats.latencies)[2]
    verdicts = ["PASS" if met else "MISS" for met in (rate >= TARGET_RATE, p99 < TARGET_P99_MS)]
    outcomes: dict[str, int] = {}
    for one in result.phases:
        for key, value in one.stats.outcomes.items():
            outcomes[key] = outcomes.get(key, 0) + value
    lines = [
        ("machine", f"{cores} cores ({model.split(':')[1].strip()}), shared by all processes"),
        ("server", f"runbook-bot serve (uvicorn, 1 process) -> {args.database_url}"),
        (
            "traffic",
            f"{NODES:,} nodes x {GPUS} GPUs, {len(RULES)} alertnames, "
            f"{PER_POST} alerts/POST; aimed mix {aimed}",
        ),
        ("phases", f"each {args.seconds:g} s or {args.batches:,} POSTs; client: httpx, asyncio"),
        *describe(steady, cores),
        *describe(capacity, cores),
        ("server says", ", ".join(f"{k} {v:,}" for k, v in sorted(outcomes.items()))),
        (
            "in server",
            f"{result.ingest_s / requests * 1000:.1f} ms mean per POST, parse to commit (/metrics)",
        ),
        ("server RSS", f"{result.hwm_kib / 1024:.0f} MiB peak (VmHWM)"),
        *worker_lines(result.proposals),
        ("incidents", f"{rows['incidents']:,} created for {groups:,} distinct groups posted"),
        ("alert rows", f"{rows['alerts']:,} stored for {instances:,} alert instances posted"),
        ("db sessions", f"{rows['sessions']:,} PostgreSQL connections opened in all"),
        ("sanity", "OK" if ok else "MISMATCH: rows do not match what was posted"),
        ("targets", ""),
        (
            "alerts/s",
            f"{rate:,.0f} sustained back to back = {rate / TARGET_RATE:.2f}x target "
            f"(>= 1,000)  {verdicts[0]}",
        ),
        (
            "p99",
            f"{p99:.0f} ms at a steady {steady_rate:,.0f} alerts/s = "
            f"{p99 / TARGET_P99_MS:.2f} of the 100 ms limit  {verdicts[1]}",
        ),
    ]
    print("runbook-bot ingest benchmark")
    for name, text in lines:
        print(f"  {name:<12} {text}" if text else name)
    write_json(args, result, rate, p99)
    return 1 if errors or not ok else 0


def write_json(args: argparse.Namespace, result: Measured, rate: float, p99: float) -> None:
    parameters = {key: getattr(args, key) for key in ("rate", "clients", "seconds", "batches")}
    results = Results("ingest", "Alertmanager ingest (PostgreSQL)", parameters)
    backend = make_url(args.database_url).get_backend_name()
    results.metric("alerts/s back to back", rate, "alerts/s", target=TARGET_RATE, op=">=",
                   backend=backend)  # fmt: skip
    results.metric("p99 at a steady rate", p99, "ms", target=TARGET_P99_MS, op="<",
                   backend=backend)  # fmt: skip
    for one in result.phases:
        ms = [x * 1000 for x in one.stats.latencies]
        results.distribution(f"{one.name} latency", ms, "ms", backend=backend)
        rate_ = len(one.stats.latencies) * PER_POST / one.elapsed
        results.metric(f"{one.name} alerts/s", rate_, "alerts/s", backend=backend)
        results.metric(f"{one.name} errors", len(one.stats.errors), "requests", target=0,
                       backend=backend)  # fmt: skip
    results.metric("serve peak RSS (VmHWM)", result.hwm_kib / 1024, "MiB", backend=backend)
    if result.proposals is not None:
        lag_p99 = result.proposals.lag_s[2] * 1000
        results.metric("worker lag to first steps p99", lag_p99, "ms", backend=backend)
    results.write(args.json)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database-url", default=DEFAULT_URL, help=f"default {DEFAULT_URL}")
    parser.add_argument(
        "--rate", type=float, default=TARGET_RATE, help="steady phase alerts/s (1000)"
    )
    parser.add_argument(
        "--clients", type=int, default=None, help="capacity phase clients (16; --peer: 8)"
    )
    parser.add_argument(
        "--peer",
        action="store_true",
        help="instead: serve against a bare endpoint, 1,000-node payloads (bench/ingest_peer.py)",
    )
    parser.add_argument("--seconds", type=float, default=20.0, help="each phase, at most (20)")
    parser.add_argument("--batches", type=int, default=3000, help="each phase, POSTs (3000)")
    add_option(parser)
    args = parser.parse_args()
    args.clients = args.clients or (8 if args.peer else 16)
    if not (1 <= args.clients <= 1000 and args.batches >= 1 and 0 < args.seconds <= 600):
        parser.error("--clients must be 1..1000, --batches >= 1, --seconds in (0, 600]")
    if not 10 <= args.rate <= 20_000:
        parser.error("--rate must be 10..20000 alerts/s")
    try:
        if args.peer:
            from bench import ingest_peer  # it builds on this module

            return ingest_peer.run(args)
        return run(args)
    except KeyboardInterrupt:
        print("interrupted; server stopped and database dropped", file=sys.stderr)
        return 130


if __name__ == "__main__":
    raise SystemExit(main())

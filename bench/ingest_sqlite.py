"""Ingest on SQLite: what `synchronous=FULL` (the default) costs against `NORMAL`.

In WAL mode, `FULL` syncs the write-ahead log at every commit, so an alert the webhook
answered 200 survives a power loss; `NORMAL` syncs only at checkpoints and may lose the
last commits. This runs the real `runbook-bot serve` on a fresh SQLite file once per mode,
in the same run and with the same traffic as bench/ingest.py's capacity phase (closed loop,
N clients back to back, 10 alerts per POST), with no worker in serve so that only ingest's
commits are measured, and reports alerts/s and latency for both and FULL's ratio to NORMAL.
The file lives on the disk under the current directory (not a tmpfs, where a sync is free).

    .venv/bin/python bench/ingest_sqlite.py [--clients N] [--seconds S] [--batches N]

Exit 1 on any non-200 answer or a setup failure.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.ingest import (  # noqa: E402
    BOT,
    FAILURES,
    PER_POST,
    Stats,
    Traffic,
    drive,
    percentiles,
    wait_ready,
)
from bench.results import Results, add_option  # noqa: E402

MODES = ("normal", "full")


@dataclass
class Run:
    mode: str
    stats: Stats
    elapsed: float

    @property
    def rate(self) -> float:
        return len(self.stats.latencies) * PER_POST / self.elapsed


def one_mode(mode: str, args: argparse.Namespace, folder: Path) -> Run:
    url = f"sqlite:///{folder / f'{mode}.db'}"
    env = {
        **os.environ,
        "RUNBOOK_BOT_DATABASE_URL": url,
        "RUNBOOK_BOT_SQLITE_SYNCHRONOUS": mode,
        "RUNBOOK_BOT_SERVE_WORKER": "false",
        "RUNBOOK_BOT_LOG_LEVEL": "warning",
    }
    setup = subprocess.run([BOT, "db", "upgrade"], env=env, capture_output=True, text=True)
    if setup.returncode != 0:
        raise RuntimeError(f"runbook-bot db upgrade failed: {setup.stderr.strip()}")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    cmd = [BOT, "serve", "--host", "127.0.0.1", "--port", str(port)]
    server = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        base = f"http://127.0.0.1:{port}"
        wait_ready(base, server)
        traffic = Traffic(args.batches, time.perf_counter() + args.seconds, random.Random(7))
        started = time.perf_counter()
        stats = asyncio.run(drive(f"{base}/webhooks/alertmanager", args.clients, traffic))
        return Run(mode, stats, time.perf_counter() - started)
    finally:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=16, help="clients (16)")
    parser.add_argument("--seconds", type=float, default=20.0, help="each mode, at most (20)")
    parser.add_argument("--batches", type=int, default=3000, help="each mode, POSTs (3000)")
    add_option(parser)
    args = parser.parse_args()
    if not (1 <= args.clients <= 1000 and args.batches >= 1 and 0 < args.seconds <= 600):
        parser.error("--clients must be 1..1000, --batches >= 1, --seconds in (0, 600]")
    runs: dict[str, Run] = {}
    with tempfile.TemporaryDirectory(prefix="bench-sqlite-", dir=".") as folder:
        try:
            for mode in MODES:
                runs[mode] = one_mode(mode, args, Path(folder))
        except FAILURES as exc:
            print(f"benchmark failed: {exc}", file=sys.stderr)
            return 1
    print("runbook-bot ingest on SQLite: synchronous=NORMAL against FULL (the default)")
    errors = 0
    for run in runs.values():
        p50, p95, p99, top = percentiles(run.stats.latencies)
        errors += len(run.stats.errors)
        print(
            f"  {run.mode.upper():<7} {run.rate:,.0f} alerts/s "
            f"({len(run.stats.latencies):,} POSTs in {run.elapsed:.1f} s, {args.clients} "
            f"clients); latency ms p50 {p50:.1f} p95 {p95:.1f} p99 {p99:.1f} max {top:.1f}; "
            f"errors {len(run.stats.errors)}"
        )
        for error in run.stats.errors[:3]:
            print(f"    {error}")
    normal, full = runs["normal"], runs["full"]
    print(f"  FULL / NORMAL throughput: {full.rate / normal.rate:.2f}")
    parameters = {key: value for key, value in vars(args).items() if key != "json"}
    results = Results("ingest_sqlite", "Alertmanager ingest on SQLite, FULL vs NORMAL", parameters)
    peer = ("synchronous=NORMAL", normal.rate, "alerts/s")
    results.metric("alerts/s synchronous=FULL", full.rate, "alerts/s", peer=peer, backend="sqlite")
    for run in runs.values():
        p99 = percentiles(run.stats.latencies)[2]
        name = f"synchronous={run.mode.upper()}"
        results.metric(f"{name} p99", p99, "ms", backend="sqlite")
        results.metric(f"{name} errors", len(run.stats.errors), "requests", target=0,
                       backend="sqlite")  # fmt: skip
        ms = [x * 1000 for x in run.stats.latencies]
        results.distribution(f"{name} latency", ms, "ms", backend="sqlite")
    results.write(args.json)
    return 1 if errors else 0


if __name__ == "__main__":
    raise SystemExit(main())

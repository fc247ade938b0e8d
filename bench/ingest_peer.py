"""`bench/ingest.py --peer`: the webhook against a bare endpoint, same payloads, same load.

Each POST is one Alertmanager group naming all 1,000 nodes (`WideGroup`: one alertname on
one GPU slot of every node, 1,000 alerts), with the usual mix of new, repeated and resolved
groups, sent back to back by --clients (8) httpx clients for --seconds. First to
`runbook-bot serve` on a fresh database, then, with the same seed and so the same
sequence of payloads, to the bare endpoint (bench/ingest_bare.py: Starlette and one
batched PostgreSQL upsert per payload, no bot logic) on a scratch database of its own.
Prints alerts/s of each, the ratio (target: serve >= 50 % of the bare endpoint) and serve's
peak RSS (VmHWM; target < 300 MiB).
"""

from __future__ import annotations

import argparse
import os
import random
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from sqlalchemy.engine import make_url

from bench import ingest, scratch
from bench.results import Results

TARGET_RATIO, TARGET_RSS_MIB = 0.5, 300.0
SEED = 11
BARE = str(Path(__file__).with_name("ingest_bare.py"))


@dataclass
class Side:
    """One endpoint's run: its phase, the rows it stored and its server's peak RSS."""

    name: str
    phase: ingest.Phase
    traffic: ingest.Traffic
    stored: int
    hwm_kib: int

    @property
    def rate(self) -> float:
        return len(self.phase.stats.latencies) * ingest.NODES / self.phase.elapsed

    @property
    def ok(self) -> bool:
        return (
            not self.phase.stats.errors and self.stored == self.traffic.sent["new"] * ingest.NODES
        )


def peak_rss_kib(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text().splitlines()
    return int(next(line.split()[1] for line in status if line.startswith("VmHWM")))


def load(
    name: str, hook: str, pid: int, args: argparse.Namespace
) -> tuple[ingest.Phase, ingest.Traffic]:
    """Drive one endpoint with the seeded wide traffic; its phase and what was sent."""
    traffic = ingest.Traffic(0, 0.0, random.Random(SEED), wide=True)
    what = f"closed loop, {args.clients} clients back to back, 1,000-node payloads"
    go = ingest.drive(hook, args.clients, traffic)
    return ingest.phase(name, what, traffic, pid, args, go), traffic


def stored(url: str) -> int:
    """Alert rows in the database (both sides name their table `alerts`)."""
    with ingest.connect(url) as conn:
        return int((conn.execute("SELECT count(*) FROM alerts").fetchone() or (0,))[0])


def stop(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def serve_side(args: argparse.Namespace, env: dict[str, str], log: IO[bytes]) -> Side:
    setup = subprocess.run([ingest.BOT, "db", "upgrade"], env=env, capture_output=True, timeout=60)
    if setup.returncode != 0:
        raise RuntimeError(f"runbook-bot db upgrade failed: {setup.stderr.decode().strip()}")
    port = free_port()
    cmd = [ingest.BOT, "serve", "--host", "127.0.0.1", "--port", str(port)]
    server = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        ingest.wait_ready(f"http://127.0.0.1:{port}", server)
        hook = f"http://127.0.0.1:{port}/webhooks/alertmanager"
        phase, traffic = load("runbook-bot serve", hook, server.pid, args)
        hwm = peak_rss_kib(server.pid)
    finally:
        stop(server)
    return Side("runbook-bot serve", phase, traffic, stored(args.database_url), hwm)


def bare_side(args: argparse.Namespace, url: str, log: IO[bytes]) -> Side:
    port = free_port()
    cmd = [sys.executable, BARE, "--port", str(port), "--database-url", url]
    cmd += ["--connections", str(args.clients)]
    server = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    try:
        ingest.wait_ready(f"http://127.0.0.1:{port}", server)
        hook = f"http://127.0.0.1:{port}/webhooks/alertmanager"
        phase, traffic = load("bare endpoint", hook, server.pid, args)
        hwm = peak_rss_kib(server.pid)
    finally:
        stop(server)
    return Side("bare endpoint", phase, traffic, stored(url), hwm)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def run(args: argparse.Namespace) -> int:
    url: str = args.database_url
    bare_url = make_url(url).set(database=f"{make_url(url).database}_bare")
    bare = bare_url.render_as_string(hide_password=False)
    env = {**os.environ, "RUNBOOK_BOT_DATABASE_URL": url, "RUNBOOK_BOT_LOG_LEVEL": "warning"}
    # 1,000 alerts are ~0.7 MB of JSON: within the default max_body_bytes (1 MiB).

    def both(log: IO[bytes]) -> tuple[Side, Side]:
        ours = serve_side(args, env, log)
        time.sleep(1.0)  # let PostgreSQL settle between the two
        return ours, bare_side(args, bare, log)

    sides = scratch.measured([url, bare], both, ingest.FAILURES, label="server log")
    return 1 if sides is None else report(args, *sides)


def report(args: argparse.Namespace, ours: Side, theirs: Side) -> int:
    cores = os.cpu_count() or 1
    ratio = ours.rate / theirs.rate if theirs.rate else 0.0
    rss = ours.hwm_kib / 1024
    verdicts = ["PASS" if met else "MISS" for met in (ratio >= TARGET_RATIO, rss < TARGET_RSS_MIB)]
    print("runbook-bot ingest benchmark: the webhook against a bare endpoint")
    groups = ingest.WAVES * len(ingest.RULES)
    print(f"  {'traffic':<12} {ingest.NODES:,} alerts/POST (a group naming every node), "
          f"{groups} groups; same seed, payloads and clients for both")  # fmt: skip
    for side in (ours, theirs):
        for name, text in ingest.describe(side.phase, cores):
            if name.strip() == "alerts":
                n = len(side.phase.stats.latencies) * ingest.NODES
                text = f"{n:,} ({side.rate:,.0f}/s)"
            print(f"  {name:<12} {text}")
        expected = side.traffic.sent["new"] * ingest.NODES
        check = "OK" if side.ok else "MISMATCH"
        print(f"  {'  rows':<12} {side.stored:,} stored for {expected:,} new instances  {check}")
        print(f"  {'  peak RSS':<12} {side.hwm_kib / 1024:.0f} MiB (VmHWM)")
    print("targets")
    print(f"  {'ratio':<12} serve {ours.rate:,.0f} / bare {theirs.rate:,.0f} alerts/s = "
          f"{ratio:.2f} (>= {TARGET_RATIO:.2f})  {verdicts[0]}")  # fmt: skip
    print(f"  {'serve RSS':<12} {rss:.0f} MiB peak (< {TARGET_RSS_MIB:.0f})  {verdicts[1]}")
    parameters = {key: getattr(args, key) for key in ("clients", "seconds", "batches")}
    results = Results("ingest_peer", "Webhook vs a bare endpoint, 1,000-node payloads", parameters)
    peer = ("bare endpoint alerts/s", theirs.rate, "alerts/s")
    results.metric("webhook alerts/s, 1,000-node payloads", ours.rate, "alerts/s", peer=peer,
                   backend="postgresql")  # fmt: skip
    results.metric("webhook / bare endpoint", ratio, "x", target=TARGET_RATIO, op=">=",
                   backend="postgresql")  # fmt: skip
    results.metric("serve peak RSS (VmHWM), 1,000-node payloads", rss, "MiB",
                   target=TARGET_RSS_MIB, op="<", backend="postgresql")  # fmt: skip
    for side in (ours, theirs):
        ms = [x * 1000 for x in side.phase.stats.latencies]
        results.distribution(f"{side.name} latency, 1,000-node payloads", ms, "ms")
    results.write(args.json)
    return 0 if ours.ok and theirs.ok else 1

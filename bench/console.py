"""Console benchmark: how fast the web console answers on a storm's database, and how soon
a new log entry reaches an open incident page.

Through the real app on loopback (uvicorn, httpx, a logged-in session): one incident with
`--entries` (5,000) log entries and `--incidents` (1,000) more incidents. Timed, `--runs`
times each: the incident page (its last 300 log entries), the same page with the whole log
(`?log=all`), the card fragment the page refreshes, and the incident list. Then the live
timeline: an entry is appended while the page's event stream is open, and the time until
its event arrives is measured `--runs` times.

    .venv/bin/python bench/console.py [--entries N] [--incidents N] [--runs N]

Prints median and worst per request for each backend (SQLite file, and PostgreSQL at
127.0.0.1:5432 when it answers) against the targets: pages under 300 ms, the whole log
under 1 s, a new entry on screen within 1 s (the stream polls every 0.5 s). PASS or MISS
per line; exit 1 on a MISS. The PostgreSQL database `runbook_bot_console_bench` is created
and dropped.
"""

from __future__ import annotations

import argparse
import random
import re
import statistics
import sys
import threading
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the loopback server and payloads live in tests/

from bench import backends  # noqa: E402
from bench.postmortem import START, populate  # noqa: E402
from bench.results import Results, add_option  # noqa: E402
from bot import migrations  # noqa: E402
from bot.alerts import ingest  # noqa: E402
from bot.alerts.payload import WebhookPayload  # noqa: E402
from bot.chat.console.passwords import hash_password  # noqa: E402
from bot.clock import FrozenClock  # noqa: E402
from bot.config import load_settings  # noqa: E402
from bot.db import Database  # noqa: E402
from bot.incidents import log  # noqa: E402
from bot.incidents import service as incidents  # noqa: E402
from tests.support import server  # noqa: E402
from tests.support.payloads import alert, notification  # noqa: E402

PG = "postgresql+psycopg://postgres@127.0.0.1:5432/runbook_bot_console_bench"
PASSWORD = "bench-Pw-1"
PAGE, WHOLE, LIVE = 0.3, 1.0, 1.0
CSRF = re.compile(r'name="csrf" value="([^"]+)"')


def more_incidents(db: Database, count: int) -> None:
    """`count` incidents on nodes of their own, through the real ingest."""
    clock = FrozenClock(START)
    for index in range(count):
        body = notification([alert(host=f"gpu-node-{index + 100:04d}", gpu=index % 8)])
        payload = WebhookPayload.model_validate(body)
        ingest.ingest(db, payload, clock=clock, reopen_window=timedelta(hours=24))


def timed(call: Callable[[], httpx.Response], runs: int, check: str) -> list[float]:
    times = []
    for _ in range(runs):
        began = time.perf_counter()
        answer = call()
        times.append(time.perf_counter() - began)
        assert answer.status_code == 200 and check in answer.text, answer.status_code
    return times


def live(client: httpx.Client, db: Database, number: int, runs: int) -> list[float]:
    """Seconds from appending an entry to its event arriving on the open stream."""
    times: list[float] = []
    with db.session() as session:
        last = incidents.get(session, number).log_seq
    for index in range(runs):
        arrived = threading.Event()
        began: list[float] = []

        def listen(after: int = last, arrived: threading.Event = arrived) -> None:
            with client.stream("GET", f"/incidents/{number}/events?after={after}") as stream:
                for line in stream.iter_lines():
                    if line.startswith("id:"):
                        arrived.set()
                        return

        listener = threading.Thread(target=listen)
        listener.start()
        time.sleep(0.6 + random.uniform(0, 0.5))  # open, polled once; any phase of the poll
        with db.transaction() as session:
            incident = incidents.get(session, number, lock=True)
            began.append(time.perf_counter())
            log.append(session, incident, at=START, actor=log.Actor.human("alice"),
                       type="note", summary=f"live {index}")  # fmt: skip
            last = incident.log_seq
        arrived.wait(10)
        times.append(time.perf_counter() - began[0])
        listener.join(10)
    return times


def line(
    name: str, what: str, times: list[float], target: float, results: Results | None = None
) -> bool:
    median, worst = statistics.median(times), max(times)
    if results is not None:
        results.metric(f"{what}: median", median, "s", backend=name)
        results.metric(f"{what}: worst", worst, "s", target=target, op="<", backend=name)
    verdict = "PASS" if worst < target else "MISS"
    print(
        f"{name:<11} {what:<34} median {median * 1000:6.0f} ms, worst {worst * 1000:6.0f} ms "
        f"(target < {target * 1000:.0f} ms, {worst / target:.2f} of it): {verdict}"
    )
    return verdict == "PASS"


def run_backend(name: str, url: str, args: argparse.Namespace, results: Results) -> bool:
    db = Database(url)
    try:
        migrations.upgrade(db)
        number = populate(db, args.entries)
        more_incidents(db, args.incidents)
        users = {"alice": {"password_hash": hash_password(PASSWORD), "roles": ["responder"]}}
        settings = load_settings(database_url=url, console={"users": users})
        clock = FrozenClock(START)
        ok = True
        with (
            server.running(settings, db, clock) as base,
            httpx.Client(base_url=base, timeout=30) as client,
        ):
            token = CSRF.search(client.get("/login").text)
            assert token is not None
            fields = {"username": "alice", "password": PASSWORD, "csrf": token.group(1)}
            assert client.post("/login", data=fields).status_code == 303
            page = f"/incidents/{number}"
            ok &= line(name, f"incident page ({args.entries} entries)",
                       timed(lambda: client.get(page), args.runs, "timeline"), PAGE,
                       results)  # fmt: skip
            ok &= line(name, "incident page, whole log",
                       timed(lambda: client.get(page + "?log=all"), args.runs, "timeline"),
                       WHOLE, results)  # fmt: skip
            ok &= line(name, "card fragment",
                       timed(lambda: client.get(page + "/card"), args.runs, 'id="card"'),
                       PAGE, results)  # fmt: skip
            ok &= line(name, f"incident list ({args.incidents + 1} incidents)",
                       timed(lambda: client.get("/?status=all"), args.runs, "incidents"),
                       PAGE, results)  # fmt: skip
            ok &= line(name, "new log entry on the open page",
                       live(client, db, number, args.runs), LIVE, results)  # fmt: skip
        return ok
    finally:
        db.dispose()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--entries", type=int, default=5000)
    parser.add_argument("--incidents", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--database-url", default=PG)
    add_option(parser)
    args = parser.parse_args()
    print("runbook-bot console benchmark: server time per request, and live-log latency")
    parameters = {"entries": args.entries, "incidents": args.incidents, "runs": args.runs}
    results = Results("console", "Web console on a storm's database", parameters)
    ok = backends.on_each(
        args.database_url, lambda name, url: run_backend(name, url, args, results)
    )
    results.write(args.json)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

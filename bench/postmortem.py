"""Postmortem benchmark: how long a draft takes for an incident with 5,000 log entries.

An incident is opened through the real ingest, then its log grows to `--entries` (5,000)
the way a long night fills it: 1,000 distinct alerts firing and resolving, paging,
acknowledgements, progress reports of a long drain, step transitions, notes (appended with
the real `log.append`, so the hash chain is intact). Then the draft (read the incident,
its log, alerts and steps; build; render in both languages) is timed `--runs` times.

    .venv/bin/python bench/postmortem.py [--entries N] [--runs N] [--database-url URL]

Prints the median and worst time per draft for each backend (SQLite file, and PostgreSQL
at 127.0.0.1:5432 when it answers) against the target: under 1 s (PASS, else MISS; exit
1 on MISS or a failed setup). The PostgreSQL database `runbook_bot_postmortem_bench` is
created and dropped.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from datetime import UTC, datetime, timedelta

from bench import backends
from bench.results import Results, add_option
from bot import migrations
from bot.alerts import ingest
from bot.alerts.payload import WebhookPayload
from bot.clock import FrozenClock
from bot.config import load_settings
from bot.db import Database
from bot.incidents import log
from bot.incidents import service as incidents
from bot.postmortem.service import draft_markdown
from tests.support.payloads import alert, notification

TARGET = 1.0
PG = "postgresql+psycopg://postgres@127.0.0.1:5432/runbook_bot_postmortem_bench"
START = datetime(2026, 7, 20, 14, 3, tzinfo=UTC)
KINDS = (
    ("action.progress", "step drain: 37 of 110 pods evicted, 73 left"),
    ("alert.firing", "GPUXIDError firing again: gpu-node-02 GPU 5 XID 79"),
    ("alert.resolved", "GPUXIDError resolved: gpu-node-02 GPU 5 XID 79"),
    ("escalation.paged", "paged slack:U0ALICE (level 1 of 3: unacknowledged for 15m)"),
    ("step.approved", "step cordon: k8s.cordon (node=gpu-node-02) approved by alice"),
    ("step.succeeded", "step cordon succeeded: gpu-node-02 cordoned"),
    ("chat.refused", "mallory may not approve: no role"),
)


def populate(db: Database, entries: int) -> int:
    """One incident whose log has `entries` entries; its number."""
    clock = FrozenClock(START)
    settings = load_settings(database_url=db.url)
    body = notification([alert(host="gpu-node-02", gpu=5)])
    number = ingest.ingest(
        db,
        WebhookPayload.model_validate(body),
        clock=clock,
        reopen_window=settings.reopen_window,
    ).incident
    actor = log.Actor.human("alice")
    written = 0
    while written < entries:
        with db.transaction() as session:
            incident = incidents.get(session, number, lock=True)
            for _ in range(min(500, entries - written)):
                kind, summary = KINDS[written % len(KINDS)]
                data = {"fingerprint": f"{written % 1000:016x}"} if kind.startswith("alert") else {}
                at = START + timedelta(seconds=written)
                log.append(session, incident, at=at, actor=actor, type=kind, summary=summary,
                           data=data)  # fmt: skip
                written += 1
    return number


def measure(db: Database, number: int, runs: int) -> list[float]:
    settings = load_settings(database_url=db.url)
    clock = FrozenClock(START + timedelta(hours=3))
    times = []
    for index in range(runs):
        lang = "zh" if index % 2 else "en"
        began = time.perf_counter()
        text_ = draft_markdown(db, number, lang=lang, settings=settings, clock=clock)
        times.append(time.perf_counter() - began)
        assert text_.startswith("#"), "the draft did not render"
    return times


def report(name: str, entries: int, times: list[float], results: Results) -> bool:
    median, worst = statistics.median(times), max(times)
    results.metric("draft median", median, "s", backend=name)
    results.metric("draft worst", worst, "s", target=TARGET, op="<", backend=name)
    results.distribution("draft time", times, "s", backend=name)
    verdict = "PASS" if worst < TARGET else "MISS"
    print(
        f"{name:<11} {entries} entries: median {median * 1000:.0f} ms, worst "
        f"{worst * 1000:.0f} ms of {len(times)} drafts (target < {TARGET:.0f} s, "
        f"{worst / TARGET:.2f} of it): {verdict}"
    )
    return verdict == "PASS"


def run_backend(name: str, url: str, args: argparse.Namespace, results: Results) -> bool:
    db = Database(url)
    try:
        migrations.upgrade(db)
        number = populate(db, args.entries)
        with db.session() as session:
            count = incidents.get(session, number).log_seq
        return report(name, count, measure(db, number, args.runs), results)
    finally:
        db.dispose()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--entries", type=int, default=5000)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--database-url", default=PG)
    add_option(parser)
    args = parser.parse_args()
    print("runbook-bot postmortem benchmark: draft time for one incident's whole log")
    results = Results("postmortem", "Postmortem draft, 5,000 log entries",
                      {"entries": args.entries, "runs": args.runs})  # fmt: skip
    ok = backends.on_each(
        args.database_url, lambda name, url: run_backend(name, url, args, results)
    )
    results.write(args.json)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

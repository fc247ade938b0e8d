"""Card benchmark: how long the Slack card takes to build and render for the largest cards
the bot is built for: a hot row of 32 nodes (one domain incident; its cordon over the 32,
run and failed on every node so each node has a state) and a 30-step runbook.

Both incidents are opened through the real ingest and planned by the real worker on a
SQLite file (tests/chat/big_cards.py holds the runbooks the limits tests use too). Timed,
`--runs` times each: what the outbox sender does for one card update, i.e. read the card
(`cards.card`, one session), render it (`blocks.card`) and encode the payload
(`json.dumps`). The bare floor, measured in the same run on the same database: the reads
any card needs and nothing else (the incident, its alerts, its step rows) and the encoding
of those rows. The card is judged by its worst time (under 100 ms: a channel takes about
one message a second, so a card update must cost a small share of it) and by the ratio of
its median to the bare floor's (at most 4x: the view and Block Kit are not to cost more
than the database reads they show).

    .venv/bin/python bench/card.py [--runs N] [--json PATH]

Prints one line per figure with PASS or MISS; exit 1 on a MISS.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the fleet rig and the big cards live in tests/

from bench.results import Results, add_option  # noqa: E402
from bot import migrations  # noqa: E402
from bot.chat import cards  # noqa: E402
from bot.chat.slack import blocks  # noqa: E402
from bot.clock import FrozenClock  # noqa: E402
from bot.db import Database  # noqa: E402
from bot.incidents import service as incidents  # noqa: E402
from bot.runbooks import service as runbooks  # noqa: E402
from bot.runbooks.models import StepRun  # noqa: E402
from tests.alerts.fleet import Fleet, node  # noqa: E402
from tests.chat.big_cards import OPEN, ROW, thirty_steps  # noqa: E402

WORST = 0.100
RATIO = 4.0


def domain_incident(fleet: Fleet) -> int:
    """The hot row: 32 alerts, one incident, its cordon's 32 nodes each with a state."""
    row = [node("a", i) for i in range(32)]
    number = fleet.post(fleet.hot(row), alertname="GPUTemperatureHigh").incident
    fleet.propose()
    fleet.approve(number, "cordon", "alice", count=32)
    with fleet.db.transaction() as session:  # as the worker leaves it after a night
        run = session.get(StepRun, fleet.runs(number)["cordon"].id)
        assert run is not None
        states = ["succeeded"] * 20 + ["failed"] * 3 + ["running"] * 4 + ["left"] * 5
        run.state = "running"
        run.progress = {
            "nodes": {n: {"state": s, "summary": ""} for n, s in zip(row, states, strict=True)}
        }
    return number


def long_incident(fleet: Fleet) -> int:
    number = fleet.fire(host="gpu-node-01")
    fleet.propose()
    return number


def ours(db: Database, fleet: Fleet, number: int) -> Callable[[], int]:
    """What the sender does for one card update: read, render, encode."""

    def call() -> int:
        with db.session() as session:
            view = cards.card(session, number, fleet.clock.now(), settings=fleet.settings)
        _, rendered = blocks.card(view)
        return len(json.dumps(rendered))

    return call


def bare(db: Database, number: int) -> Callable[[], int]:
    """The floor: the reads any card needs, and encoding them."""

    def call() -> int:
        with db.session() as session:
            incident = incidents.get(session, number)
            alerts = incidents.alerts_of(session, number)
            _, rows = runbooks.rows_in(session, number)
            data = {
                "title": incident.title,
                "alerts": [alert.labels for alert in alerts],
                "steps": [row.as_dict() for row in rows],
            }
        return len(json.dumps(data, default=str))

    return call


def timed(call: Callable[[], int], runs: int) -> list[float]:
    call()  # warm: imports, the first compile of each statement
    times = []
    for _ in range(runs):
        began = time.perf_counter()
        size = call()
        times.append(time.perf_counter() - began)
        assert size > 0
    return times


def judge(name: str, card: list[float], floor: list[float], results: Results) -> bool:
    median, worst, base = statistics.median(card), max(card), statistics.median(floor)
    ratio = median / base
    results.metric(f"{name}: card median", median, "s", peer=("bare reads", base, "s"))
    first = results.metric(f"{name}: card worst", worst, "s", target=WORST, op="<")
    second = results.metric(f"{name}: card / bare reads", ratio, "x", target=RATIO)
    results.distribution(f"{name}: card time", card, "s")
    print(
        f"{name}: card median {median * 1000:.2f} ms, worst {worst * 1000:.2f} ms of "
        f"{len(card)} (target < {WORST * 1000:.0f} ms) {first}; bare reads median "
        f"{base * 1000:.2f} ms, ratio {ratio:.2f} (target <= {RATIO:.0f}) {second}"
    )
    return first == "PASS" and second == "PASS"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=200)
    add_option(parser)
    args = parser.parse_args()
    print("runbook-bot card benchmark: build and render the Slack card (SQLite file)")
    results = Results(
        "card", "Slack card: build and render, 32-node domain and 30-step runbook",
        {"runs": args.runs},
    )  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        db = Database(f"sqlite:///{Path(tmp) / 'bench.db'}")
        try:
            migrations.upgrade(db)
            fleet = Fleet(db, FrozenClock(), Path(tmp), roles={"alice": ["responder"]}, **OPEN)
            fleet.write(ROW, "overheating.yaml")
            fleet.write(thirty_steps(), "gpu-xid.yaml")
            ok = True
            for name, number in (
                ("32-node domain", domain_incident(fleet)),
                ("30-step runbook", long_incident(fleet)),
            ):
                card = timed(ours(db, fleet, number), args.runs)
                floor = timed(bare(db, number), args.runs)
                ok = judge(name, card, floor, results) and ok
        finally:
            db.dispose()
    results.write(args.json)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

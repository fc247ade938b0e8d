"""Three replicas on one PostgreSQL behind a round-robin proxy, the production shape.

Three `runbook-bot serve` processes (each with its own worker child) share a database; a
round-robin TCP proxy (tests/support/tcpproxy.py `RoundRobin`) stands in for the Service in
front of them. Debian's Alertmanager posts the XID 48 alert through the proxy, the same
notification is also posted straight through it once per replica (an HA Alertmanager pair
repeats itself), and people approve every step through the proxy's API with a fresh
connection each time, so decisions land on different replicas. The shipped gpu-xid
runbook runs against the simulator: exactly one incident and one card, one cordon, one
drain, one reset, one uncordon, and one page per escalation level.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import text

from bot.db import Database
from bot.sim import SimHandle
from tests.chaos.bots import (
    TOKEN,
    Bot,
    Record,
    bot_settings,
    card_counts,
    decide_as,
    numbers,
    quiet,
    row,
    settle,
    steps,
)
from tests.runbooks.drive import RUNBOOKS
from tests.support import alertmanager as am
from tests.support.fake_slack import FakeSlack
from tests.support.payloads import alert, notification
from tests.support.tcpproxy import RoundRobin

pytestmark = [pytest.mark.chaos, pytest.mark.postgres, pytest.mark.timeout(240)]

REPLICAS = 3
NODE = "gpu-node-04"
CARD = "GPU-11111111-2222-3333-4444-555555555555"
LABELS = {
    "alertname": "GPUXIDError",
    "Hostname": NODE,
    "gpu": "1",
    "UUID": CARD,
    "xid": "48",
    "severity": "critical",
}
DECISIONS = {
    "cordon": ("alice",),
    "drain": ("bob",),
    "reset": ("alice", "bob"),
    "diag": ("carol",),
    "uncordon": ("alice",),
}
"""Who approves each step of the resettable-XID path (tests/runbooks/test_e2e_gpu_xid.py)."""
ESCALATION = {
    "policies": {
        "critical": {
            "levels": [
                {"after": "0m", "notify": ["oncall"]},
                {"after": "1m", "notify": ["role:second_line"]},
            ]
        }
    }
}
PAGES = """SELECT (data ->> 'level')::int, count(*) FROM incident_log
    WHERE type = 'escalation.paged' GROUP BY 1"""
ALERTS = "SELECT count(*), max(receive_count) FROM alerts"
RUNS = "SELECT step_id, attempt, state, lease_owner FROM step_runs"


@pytest.fixture
def sim_nodes() -> int:
    return 4


@pytest.fixture
def db(pg_url: str) -> Iterator[Database]:
    database = Database(pg_url)
    yield database
    database.dispose()


def fresh(url: str) -> httpx.Client:
    """A client that opens a new connection per request: the proxy rotates each one."""
    return httpx.Client(
        base_url=url,
        timeout=10,
        headers={"Authorization": f"Bearer {TOKEN}"},
        limits=httpx.Limits(max_keepalive_connections=0),
    )


def repeat_of(manager: am.Alertmanager) -> dict[str, Any]:
    """The notification Alertmanager sent, rebuilt from what it holds (its fingerprint and
    startsAt): what a second Alertmanager of an HA pair would post."""
    answer = httpx.get(f"{manager.url}/api/v2/alerts", timeout=am.HTTP_TIMEOUT)
    answer.raise_for_status()
    [held] = answer.json()
    firing = alert(host=NODE, gpu=1, UUID=CARD, xid="48", starts_at=held["startsAt"])
    assert firing["labels"] == held["labels"], (firing["labels"], held["labels"])
    firing.update(annotations=held["annotations"], fingerprint=held["fingerprint"])
    return notification([firing])


def pages(db: Database) -> dict[int, int]:
    with db.session() as session:
        return {int(level): int(n) for level, n in session.execute(text(PAGES))}


def follow(client: httpx.Client, number: int, bot: Bot) -> list[str]:
    """Approve each step that waits, in the runbook's order, until none is left."""
    answered: list[str] = []
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        states = steps(client, number)
        if "runbook.finished" in log_types(client, number):
            return answered
        waiting = [s for s, state in states.items() if state == "awaiting_approval"]
        if not waiting:
            time.sleep(0.2)
            continue
        step = waiting[0]
        assert step in DECISIONS, (step, states)
        for person in DECISIONS[step]:
            # Approving acknowledges by default (deciding is responding); the ladder is to
            # keep climbing here, so that each level is seen to page exactly once.
            answer = client.post(
                f"/api/incidents/{number}/steps/{step}/approve",
                json={"acknowledge": False},
                headers=decide_as(bot, person),
            )
            assert answer.status_code == 200, answer.text
        answered.append(step)
        settle(
            lambda step=step: steps(client, number)[step] != "awaiting_approval",
            f"{step} to leave awaiting_approval",
            bot,
        )
    pytest.fail(f"the runbook did not finish; steps: {steps(client, number)}")


def log_types(client: httpx.Client, number: int) -> list[str]:
    answer = client.get(f"/api/incidents/{number}")
    assert answer.status_code == 200, answer.text
    return [entry["type"] for entry in answer.json()["log"]]


def test_three_replicas_behind_round_robin_give_one_card_one_drain_one_page_per_level(
    pg_url: str,
    db: Database,
    sim: SimHandle,
    slack: FakeSlack,
    bots: Callable[..., Bot],
    tmp_path: Path,
    record: Record,
) -> None:
    settings = bot_settings(
        db_url=pg_url,
        sim=sim,
        slack=slack,
        tmp=tmp_path,
        runbooks_dir=RUNBOOKS,
        escalation=ESCALATION,
    )
    replicas = [bots(f"replica-{i}", settings) for i in range(REPLICAS)]
    for replica in replicas:
        replica.start()
    for replica in replicas:
        replica.wait_ready()
    first = replicas[0]
    proxy = RoundRobin([("127.0.0.1", r.port) for r in replicas])
    began = time.monotonic()
    try:
        url = f"http://127.0.0.1:{proxy.port}"
        with (
            am.running(f"{url}/webhooks/alertmanager", TOKEN, tmp_path / "am") as manager,
            fresh(url) as client,
        ):
            starts_at = (datetime.now(UTC) - timedelta(seconds=30)).replace(microsecond=0)
            manager.post_alerts([am.api_alert(LABELS, {"summary": "XID 48"}, starts_at=starts_at)])
            [number] = settle(lambda: numbers(client), "the incident", first)
            direct = repeat_of(manager)
            for _ in range(REPLICAS):  # the same notification, once to each replica
                answer = client.post("/webhooks/alertmanager", json=direct)
                assert answer.status_code == 200, answer.text
            answered = follow(client, number, first)
            settle(lambda: pages(db).get(1), "the second escalation level to page", first)
            settle(lambda: card_counts(slack).get(number), "the card", first)
            settle(
                lambda: not quiet(db), "chat and steps to be done", first, detail=lambda: quiet(db)
            )
            opened = numbers(client)
            final = steps(client, number)
    finally:
        proxy.close()

    node_path = f"/api/v1/nodes/{NODE}"
    patches = [r.status for r in sim.cluster.requests_made(method="PATCH", path=node_path)]
    evictions = Counter(r.path for r in sim.cluster.requests_made(method="POST", path="*/eviction"))
    with db.session() as session:
        runs = [tuple(r) for r in session.execute(text(RUNS))]
        stored = tuple(session.execute(text(ALERTS)).one())
    per_step = Counter(step for step, *_ in runs)
    owners = {owner.rsplit(":", 1)[0] for *_, owner in runs if owner}
    paged = pages(db)
    per_card = card_counts(slack)

    assert answered == list(DECISIONS)
    assert opened == [number], opened
    assert stored[0] == 1 and stored[1] >= 1 + REPLICAS, f"(alerts, receipts): {stored}"
    assert per_card == {number: 1}, per_card
    assert {s: final[s] for s in DECISIONS} == dict.fromkeys(DECISIONS, "succeeded"), final
    assert {s: n for s, n in per_step.items() if n != 1} == {}, per_step
    assert patches == [200, 200], f"cordon and uncordon once each: {patches}"
    assert evictions and set(evictions.values()) == {1}, evictions
    assert not sim.cluster.snapshot().nodes[NODE].unschedulable
    assert paged == {0: 1, 1: 1}, paged
    assert all(proxy.accepted[("127.0.0.1", r.port)] > 0 for r in replicas), proxy.accepted
    record(
        [
            row(
                "three `serve` replicas on one PostgreSQL behind a round-robin proxy; XID 48 "
                "through Alertmanager plus the same notification posted once to each "
                "replica; every approval through the proxy on a fresh connection",
                "one incident, one card, each gpu-xid step run once (one cordon, one drain, "
                "one reset, one uncordon), one page per escalation level",
                replicas=REPLICAS,
                connections_per_replica=sorted(proxy.accepted.values()),
                incidents=len(opened),
                cards=sum(per_card.values()),
                node_patches=len(patches),
                evictions=sum(evictions.values()),
                step_runs=len(runs),
                alert_rows=stored[0],
                alert_receipts=stored[1],
                worker_processes_that_ran_steps=len(owners),
                pages_per_level={str(k): v for k, v in sorted(paged.items())},
                duration_s=round(time.monotonic() - began, 1),
            )
        ]
    )

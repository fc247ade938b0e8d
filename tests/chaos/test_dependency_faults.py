"""Dependency faults against a real `runbook-bot serve`: the Kubernetes API answering 500,
429 with Retry-After, or nothing at all (beyond `kube_timeout`); a BMC that does not
answer; Slack answering 429 then 500. The bot keeps taking alerts, says what failed in the
incident log and on the card, retries within the runbook's bounds, and recovers by itself
once the faults stop.

"Slack down for a minute" is scaled to its first ten message posts failing (five 429s with
Retry-After: 1, then five 500s): CI has six minutes for the whole chaos suite.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from sqlalchemy import text

from bot.db import Database
from bot.sim import SimHandle
from tests.chaos.bots import (
    Bot,
    Record,
    api,
    bot_settings,
    card_counts,
    cards,
    decide_as,
    incident,
    numbers,
    quiet,
    row,
    settle,
    steps,
    through,
)
from tests.chat.slack_rig import CHANNEL
from tests.support.fake_slack import FakeSlack
from tests.support.payloads import alert, notification
from tests.support.tcpproxy import TcpProxy

pytestmark = [pytest.mark.chaos, pytest.mark.postgres, pytest.mark.timeout(240)]

FAULTS = """\
    id: gpu-xid
    title: Dependency faults
    version: 1
    match: {alerts: [GPUXIDError]}
    facts:
      node: "{{ labels.Hostname }}"
    steps:
      - id: status
        title: Node status
        action: k8s.node_status
        with: {node: "{{ facts.node }}"}
        retries: 2
      - id: power
        title: BMC power state
        action: bmc.power_status
        with: {node: "{{ facts.node }}"}
        retries: 2
      - id: cordon
        title: Cordon the node
        action: k8s.cordon
        with: {node: "{{ facts.node }}", reason: "chaos on {{ facts.node }}"}
        retries: 3
"""
HUNG = "gpu-node-02"  # its status step meets an API server that does not answer
FAILING = "gpu-node-01"  # its BMC is silent and its cordon meets 500s and 429s
BYSTANDERS = [f"gpu-node-{i:02d}" for i in range(3, 9)]
CALL_ATTEMPTS = 4  # bot/actions/cluster.py: one API call is tried this many times
RUNS = """SELECT incident_number, step_id, attempt, state, summary FROM step_runs
    ORDER BY incident_number, step_id, attempt"""


@pytest.fixture
def db(pg_url: str) -> Iterator[Database]:
    database = Database(pg_url)
    yield database
    database.dispose()


@pytest.fixture
def kube_proxy(sim: SimHandle) -> Iterator[TcpProxy]:
    port = int(sim.url.rsplit(":", 1)[1])
    proxy = TcpProxy(("127.0.0.1", port))
    yield proxy
    proxy.close()


def runs(db: Database) -> dict[tuple[int, str], list[tuple[int, str, str]]]:
    found: dict[tuple[int, str], list[tuple[int, str, str]]] = {}
    with db.session() as session:
        for number, step, attempt, state, summary in session.execute(text(RUNS)):
            found.setdefault((int(number), step), []).append((int(attempt), state, summary or ""))
    return found


def thread_text(slack: FakeSlack, number: int) -> str:
    """Everything posted in the thread of INC-`number`'s card."""
    [card] = [c for c in cards(slack) if f"INC-{number} " in (c.text or "")]
    thread = [m for m in slack.messages(CHANNEL) if m.thread_ts == card.ts]
    return json.dumps([(m.text, m.blocks) for m in thread], ensure_ascii=False)


def post(client: httpx.Client, host: str) -> int:
    answer = client.post("/webhooks/alertmanager", json=notification([alert(host=host)]))
    assert answer.status_code == 200, answer.text
    return int(answer.json()["incident"].removeprefix("INC-"))


def test_kubernetes_bmc_and_slack_faults_are_reported_retried_within_bounds_and_recovered(
    pg_url: str,
    db: Database,
    sim: SimHandle,
    slack: FakeSlack,
    kube_proxy: TcpProxy,
    bots: Callable[..., Bot],
    tmp_path: Path,
    record: Record,
) -> None:
    settings = bot_settings(
        db_url=pg_url,
        sim=sim,
        slack=slack,
        tmp=tmp_path,
        runbook=FAULTS,
        kube_timeout="1s",
        worker_lease="5s",
    )
    through(kube_proxy, Path(settings["kubeconfig"]))
    bot = bots("serve", settings)
    bot.start()
    bot.wait_ready()
    began = time.monotonic()
    slack.fail("chat.postMessage", 429, retry_after=1, times=5, error="ratelimited")
    slack.fail("chat.postMessage", 500, times=5, error="internal_error")
    path = f"/api/v1/nodes/{FAILING}"
    sim.cluster.fail_requests(path, 500, CALL_ATTEMPTS, method="PATCH")
    sim.cluster.fail_requests(path, 429, CALL_ATTEMPTS, method="PATCH", retry_after=1)
    sim.slow_bmc(FAILING, 10.0)  # beyond bmc.timeout (2 s): the BMC does not answer

    with api(bot) as client:
        kube_proxy.hold()  # the API server stops answering
        hung = post(client, HUNG)
        settle(
            lambda: runs(db).get((hung, "status"), [(0, "", "")])[0][1] == "failed",
            "the status step to fail against the silent API server",
            bot,
        )
        statuses: Counter[int] = Counter()
        for host in BYSTANDERS:  # alerts keep being taken while everything is failing
            statuses[
                client.post(
                    "/webhooks/alertmanager", json=notification([alert(host=host)])
                ).status_code
            ] += 1
        kube_proxy.restore()
        failing = post(client, FAILING)
        settle(
            lambda: runs(db).get((failing, "power"), [(0, "", "")])[0][1] == "failed",
            "the power step to fail against the silent BMC",
            bot,
        )
        sim.slow_bmc(FAILING, 0)  # the BMC answers again
        settle(
            lambda: steps(client, failing).get("cordon") == "awaiting_approval",
            "the cordon to be proposed once the BMC answered",
            bot,
        )
        approved = client.post(
            f"/api/incidents/{failing}/steps/cordon/approve",
            json={},
            headers=decide_as(bot, "alice"),
        )
        assert approved.status_code == 200, approved.text
        settle(
            lambda: steps(client, failing)["cordon"] == "succeeded",
            "the cordon to succeed after the 500s and 429s",
            bot,
        )
        settle(
            lambda: steps(client, hung).get("cordon") == "awaiting_approval",
            "the hung incident's status step to recover on its retry",
            bot,
        )
        opened = numbers(client)
        settle(lambda: set(card_counts(slack)) >= set(opened), "a card per incident", bot)
        settle(lambda: not quiet(db), "chat and steps to be done", bot, detail=lambda: quiet(db))
        log = {n: incident(client, n)["log"] for n in (hung, failing)}

    every = runs(db)
    patches = Counter(r.status for r in sim.cluster.requests_made(method="PATCH", path=path))
    bmc_calls = len(sim.bmc_requests())
    post_calls = Counter(c.status for c in slack.calls("chat.postMessage"))

    # Alerts kept being taken.
    assert statuses == {200: len(BYSTANDERS)}, statuses
    # The cordon: the 500s failed attempt 1, the 429s attempt 2, attempt 3 worked; each
    # attempt tried the call CALL_ATTEMPTS times and no more.
    cordon = every[(failing, "cordon")]
    assert [(a, s) for a, s, _ in cordon] == [(1, "failed"), (2, "failed"), (3, "succeeded")]
    assert "500" in cordon[0][2] and "429" in cordon[1][2], cordon
    assert patches == {500: CALL_ATTEMPTS, 429: CALL_ATTEMPTS, 200: 1}, patches
    assert sim.cluster.snapshot().nodes[FAILING].unschedulable
    # The BMC: attempt 1 gave up after bmc.attempts tries, attempt 2 read the power state.
    power = every[(failing, "power")]
    assert [(a, s) for a, s, _ in power] == [(1, "failed"), (2, "succeeded")], power
    # The silent API server: attempt 1 failed on the timeout, the retry worked.
    status = every[(hung, "status")]
    assert [s for _, s, _ in status] == ["failed", "succeeded"], status
    # Each failure is in the incident log, with what failed.
    failing_log = json.dumps(log[failing])
    hung_log = json.dumps(log[hung])
    for needle in ("answered 500", "answered 429", "retried"):
        assert needle in failing_log, needle
    assert "the Kubernetes API is unreachable" in hung_log, hung_log[-2000:]
    # Slack: after the 429s and 500s every incident has exactly one card.
    per_card = card_counts(slack)
    assert set(per_card) == set(opened) and set(per_card.values()) == {1}, per_card
    assert post_calls[429] == 5 and post_calls[500] == 5, post_calls
    # ... and each failure reached the card's thread, where the log goes.
    failing_thread = thread_text(slack, failing)
    for needle in ("answered 500", "answered 429"):
        assert needle in failing_thread, (needle, failing_thread[-2000:])
    assert "unreachable" in thread_text(slack, hung)
    retries = sum(len(v) - 1 for v in every.values())
    record(
        [
            row(
                "Kubernetes API answering 500 (4 times) then 429 with Retry-After (4 times) "
                "to a cordon's PATCH",
                "the step fails with the status named, is retried as a new attempt within "
                "`retries`, and succeeds once the API answers; each attempt tries the call "
                f"{CALL_ATTEMPTS} times, never more",
                patch_answers=dict(sorted((str(k), v) for k, v in patches.items())),
                cordon_attempts=len(cordon),
            ),
            row(
                "Kubernetes API not answering (every byte swallowed; kube_timeout 1 s)",
                "the step fails naming the unreachable API; it is retried later by itself "
                "and succeeds; alerts posted meanwhile are all taken (200)",
                status_attempts=len(status),
                alerts_taken_meanwhile=statuses[200],
            ),
            row(
                "BMC not answering (10 s delay, bmc.timeout 2 s, bmc.attempts 2)",
                "the BMC step fails naming the BMC, is retried, succeeds once it answers",
                power_attempts=len(power),
                bmc_requests=bmc_calls,
            ),
            row(
                "Slack chat.postMessage answering 429 (Retry-After: 1) 5 times then 500 "
                "5 times (scaled from a minute)",
                "cards wait in the outbox and are posted once Slack answers: exactly one card "
                "per incident, no duplicate",
                post_message_answers=dict(sorted((str(k), v) for k, v in post_calls.items())),
                cards=sum(per_card.values()),
                incidents=len(opened),
                step_retries=retries,
                duration_s=round(time.monotonic() - began, 1),
            ),
        ]
    )

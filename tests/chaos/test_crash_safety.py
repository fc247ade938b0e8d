"""Crash safety under an alert storm, with a real `runbook-bot serve` on PostgreSQL.

The storm comes from Debian's real Alertmanager (its webhook notifier retries what the bot
did not answer 200) and from direct posts that retry 5xx the same way. The issue asks for
5,000 alerts over 60 s; CI has 2 cores and six minutes for the whole suite, so the storm
here is 1,500 alerts over 20 s (1,000 through Alertmanager, 500 posted directly) on 24
nodes, and the database outage storm 400 alerts over 10 s.

Kills are SIGKILL to serve's whole process group (serve and its worker child). The
database restart is real: the machine's PostgreSQL is shared, so that test runs a private
cluster (tests/support/private_pg.py) and stops and starts its postmaster mid-storm. The
Slack sender's and the worker's outage tests use the same private cluster: one while both
are idle (the sender's idle wait once died with the database); one while Slack's answer to
the sender is on its way, and one while a step's answer from the Kubernetes API is, each
held by a proxy until the database is down (both answers were once dropped: the channel's
lease kept every card waiting, and the step stayed running, for a minute after the outage).

Every wait is on a condition (bounded, naming what it waited for and the state it saw);
the only sleeps are the scenario's own pacing: when to kill, how long to stay down.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import text

from bot import migrations
from bot.db import Database
from bot.sim import SimHandle
from tests.chaos.bots import (
    TOKEN,
    Bot,
    Record,
    api,
    bot_settings,
    card_counts,
    decide_as,
    numbers,
    quiet,
    row,
    settle,
    steps,
    through,
)
from tests.chaos.storm import Storm, stored
from tests.escalation.test_timers_pg import PAGED
from tests.runbooks.rig import TWO_STEPS
from tests.support import alertmanager as am
from tests.support import private_pg
from tests.support.fake_slack import FakeSlack
from tests.support.payloads import alert, notification
from tests.support.tcpproxy import TcpProxy

pytestmark = [pytest.mark.chaos, pytest.mark.postgres, pytest.mark.timeout(240)]

NODES = 24
AM_HOSTS = [f"gpu-node-{i:02d}" for i in range(1, 13)]
DIRECT_HOSTS = [f"gpu-node-{i:02d}" for i in range(13, NODES + 1)]
ESCALATION = {"policies": {"critical": {"levels": [{"after": "15s", "notify": ["oncall"]}]}}}
FIRST_TIMERS = """SELECT incident_number, state, fired_at FROM escalation_timers
    WHERE kind = 'level' AND round = 0 AND level = 0"""


@pytest.fixture
def sim_nodes() -> int:
    return NODES


@pytest.fixture
def db(pg_url: str) -> Iterator[Database]:
    database = Database(pg_url)
    yield database
    database.dispose()


def first_timers(db: Database) -> dict[int, tuple[str, datetime | None]]:
    with db.session() as session:
        rows = session.execute(text(FIRST_TIMERS))
        return {int(n): (state, fired) for n, state, fired in rows}


def _pending(db: Database) -> set[int]:
    """Incidents whose first escalation timer is still pending."""
    return {n for n, (state, _) in first_timers(db).items() if state == "pending"}


def pages(db: Database) -> dict[int, int]:
    with db.session() as session:
        return {int(n): int(c) for n, c in session.execute(text(PAGED))}


def cordon_runs(db: Database) -> dict[str, int]:
    """Cordon step runs (every attempt) by state."""
    query = "SELECT state, count(*) FROM step_runs WHERE step_id = 'cordon' GROUP BY state"
    with db.session() as session:
        return {state: int(n) for state, n in session.execute(text(query))}


def cordon_attempts(db: Database) -> dict[int, list[str]]:
    """The states of each incident's cordon attempts, first attempt first."""
    query = """SELECT incident_number, state FROM step_runs WHERE step_id = 'cordon'
        ORDER BY incident_number, attempt"""
    found: dict[int, list[str]] = {}
    with db.session() as session:
        for number, state in session.execute(text(query)):
            found.setdefault(int(number), []).append(state)
    return found


def step_states(client: httpx.Client) -> Counter[str]:
    """How many incidents have their status and cordon steps in each pair of states."""
    seen: Counter[str] = Counter()
    for number in numbers(client):
        states = steps(client, number)
        seen[f"status {states.get('status', '-')}, cordon {states.get('cordon', '-')}"] += 1
    return seen


def approve_cordons(client: httpx.Client, bot: Bot, wanted: int, done: set[int]) -> list[int]:
    """Approve the cordons of `wanted` more incidents, waiting (bounded) until that many are
    proposed: the worker may still be starting or running status steps. Their numbers."""
    approved: list[int] = []
    alice = decide_as(bot, "alice")

    def approve() -> bool:
        for number in numbers(client):
            if len(approved) == wanted:
                break
            if number in done or steps(client, number).get("cordon") != "awaiting_approval":
                continue
            # Approving acknowledges by default (deciding is responding); here the ladder
            # is to keep running, so that its first timers are seen to fire exactly once.
            answer = client.post(
                f"/api/incidents/{number}/steps/cordon/approve",
                json={"acknowledge": False},
                headers=alice,
            )
            assert answer.status_code == 200, answer.text
            approved.append(number)
            done.add(number)
        return len(approved) == wanted

    settle(
        approve,
        f"{wanted} more cordons to await approval ({len(done)} approved so far)",
        bot,
        detail=lambda: dict(step_states(client)),
    )
    return approved


def test_three_sigkills_during_a_storm_lose_no_alert_and_repeat_no_action(
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
        runbook=TWO_STEPS,
        escalation=ESCALATION,
        breaker_max_nodes=8,
        breaker_max_fraction=0.5,
        worker_lease="5s",  # a run its killed worker held is declared interrupted soon
    )
    bot = bots("serve", settings)
    bot.start()
    bot.wait_ready()
    began = time.monotonic()
    webhook = f"{bot.url}/webhooks/alertmanager"
    with (
        am.running(webhook, TOKEN, tmp_path / "alertmanager") as manager,
        api(bot) as client,
    ):
        storm = Storm(manager, webhook, TOKEN, 1000, AM_HOSTS, 500, DIRECT_HOSTS, seconds=20)
        storm.start()
        approved: set[int] = set()
        pending_at_kills: list[tuple[set[int], datetime]] = []
        """The first escalation timers still pending just before each kill, and when the
        kill was done: one that fires after it was fired by a later `serve`."""
        for kill_at in (5.0, 10.0, 15.0):
            time.sleep(max(0.0, storm.started + kill_at - time.monotonic()))
            approve_cordons(client, bot, 2, approved)
            if not pending_at_kills:
                # On a loaded machine the first incidents may open late: the first kill waits
                # until one has armed its timer (due 15 s on), so some timer is pending at a
                # kill whatever the pace, and the check below cannot pass by luck or fail by it.
                settle(lambda: _pending(db), "an escalation timer to be pending", bot)
            pending = _pending(db)
            bot.kill()
            pending_at_kills.append((pending, datetime.now(UTC)))
            time.sleep(0.5)  # down for a moment: posts are refused, Alertmanager retries
            bot.start()
            bot.wait_ready()
        storm.join()
        approve_cordons(client, bot, 6 - len(approved), approved)

        sent = storm.sent
        settle(lambda: set(stored(db)) >= sent, "every delivered alert to be stored", bot)
        incidents = numbers(client)
        settle(lambda: set(card_counts(slack)) >= set(incidents), "a card for each incident", bot)
        settle(
            lambda: all(state == "fired" for state, _ in first_timers(db).values()),
            "every first escalation timer to fire",
            bot,
        )
        settle(
            lambda: all(
                steps(client, n)["cordon"] not in ("approved", "running") for n in approved
            ),
            "the approved cordons to finish",
            bot,
            detail=lambda: {n: steps(client, n)["cordon"] for n in sorted(approved)},
        )
        settle(lambda: not quiet(db), "chat and steps to be done", bot, detail=lambda: quiet(db))
        am_failed = manager.metric(
            "alertmanager_notification_requests_failed_total", integration="webhook"
        )
        am_sent = manager.metric("alertmanager_notifications_total", integration="webhook")

    rows = stored(db)
    assert set(rows) == sent, (
        f"lost: {sorted(sent - set(rows))[:20]}, unexpected: {sorted(set(rows) - sent)[:20]}"
    )
    twice = {seq: n for seq, n in rows.items() if n != 1}
    assert twice == {}, f"alerts stored more than once: {twice}"
    assert len(sent) == 1500, f"only {len(sent)} of 1,500 alerts were handed over"

    assert len(incidents) == NODES, incidents  # one incident per node: grouping held
    per_card = card_counts(slack)
    assert {n: c for n, c in per_card.items() if c != 1} == {}, per_card
    assert set(per_card) == set(incidents)

    # Every cordon ran at most once; a succeeded cordon sent exactly one PATCH. An approved
    # cordon either succeeded, or was running when `serve` was killed: then it was declared
    # interrupted once its lease ran out and offered to a person again, never re-run.
    node_of = {n: _host(client_detail) for n, client_detail in _details(bot, approved).items()}
    patches = {
        n: len(sim.cluster.requests_made(method="PATCH", path=f"/api/v1/nodes/{node}"))
        for n, node in node_of.items()
    }
    assert all(count <= 1 for count in patches.values()), patches
    attempts = cordon_attempts(db)
    outcomes = {n: attempts[n] for n in approved}
    allowed = (["succeeded"], ["interrupted", "awaiting_approval"])
    assert all(states in allowed for states in outcomes.values()), outcomes
    # Two cordons are approved just before each kill; the worker's pool may run both when it
    # comes, but those approved before an earlier kill had seconds to finish before the
    # next: at least one succeeded.
    succeeded = [n for n, states in outcomes.items() if states == ["succeeded"]]
    assert succeeded, f"no approved cordon succeeded: {outcomes}"
    assert all(patches[n] == 1 for n in succeeded), (patches, outcomes)
    assert all(sim.cluster.snapshot().nodes[node_of[n]].unschedulable for n in succeeded)

    timers = first_timers(db)
    paged = pages(db)
    assert {n: c for n, c in paged.items() if c != 1} == {}, paged
    carried = {
        n
        for pending, killed in pending_at_kills
        for n in pending
        if timers[n][1] is not None and timers[n][1] > killed
    }
    assert carried, f"no timer pending at a kill fired after it: {pending_at_kills}"

    assert bot.kills == 3
    record(
        [
            row(
                "alert storm (scaled: 1,500 alerts over 20 s, 1,000 via Alertmanager, 500 "
                "posted directly) with `serve` and its worker killed by SIGKILL 3 times",
                "every alert handed over (accepted by Alertmanager, or 200 to a direct post) "
                "is stored exactly once; one card per incident; each approved cordon ran at "
                "most once (one running at a kill is offered to a person again, never re-run); "
                "escalation timers pending at a kill fire after the restart, once",
                alerts_sent=len(sent),
                alerts_stored=sum(rows.values()),
                incidents=len(incidents),
                cards=sum(per_card.values()),
                kills=bot.kills,
                direct_posts=dict(sorted(storm.statuses.items())),
                alertmanager_notifications=int(am_sent),
                alertmanager_failed_requests=int(am_failed),
                cordons=dict(Counter(states[-1] for states in outcomes.values())),
                cordon_runs=cordon_runs(db),
                cordon_patches=sum(patches.values()),
                timers_pending_at_a_kill_fired_after_it=len(carried),
                pages=sum(paged.values()),
                duration_s=round(time.monotonic() - began, 1),
            )
        ]
    )


def _details(bot: Bot, numbers_: set[int]) -> dict[int, dict[str, Any]]:
    with api(bot) as client:
        return {n: client.get(f"/api/incidents/{n}").json() for n in numbers_}


def _host(detail: dict[str, Any]) -> str:
    host: str = detail["group_labels"]["Hostname"]
    return host


def test_postgres_restart_mid_storm_answers_503_and_loses_nothing(
    sim: SimHandle,
    slack: FakeSlack,
    bots: Callable[..., Bot],
    tmp_path: Path,
    record: Record,
) -> None:
    with private_pg.running() as server:
        url = server.create_database("rbb_chaos")
        database = Database(url)
        migrations.upgrade(database)
        settings = bot_settings(db_url=url, sim=sim, slack=slack, tmp=tmp_path, runbook=TWO_STEPS)
        bot = bots("serve", settings)
        try:
            bot.start()
            bot.wait_ready()
            began = time.monotonic()
            webhook = f"{bot.url}/webhooks/alertmanager"
            with (
                am.running(webhook, TOKEN, tmp_path / "alertmanager") as manager,
                api(bot) as client,
            ):
                storm = Storm(manager, webhook, TOKEN, 200, AM_HOSTS[:4], 200, DIRECT_HOSTS[:4], 10)
                storm.start()
                time.sleep(3.0)
                server.stop("fast")  # the postmaster shuts down: every connection is closed
                down = time.monotonic()
                ready_during = client.get("/readyz").status_code
                time.sleep(max(0.0, down + 4.0 - time.monotonic()))
                server.start()
                outage = time.monotonic() - down
                database.dispose()  # the test's own pooled connections died with the server
                storm.join()
                sent = storm.sent
                settle(
                    lambda: set(stored(database)) >= sent, "every delivered alert to be stored", bot
                )
                incidents = numbers(client)
                settle(lambda: client.get("/readyz").status_code == 200, "/readyz to pass", bot, 30)
                am_failed = manager.metric(
                    "alertmanager_notification_requests_failed_total", integration="webhook"
                )
            rows = stored(database)
        finally:
            database.dispose()

    assert set(rows) == sent and all(n == 1 for n in rows.values())
    assert len(sent) == 400
    assert storm.statuses["503"] > 0, f"no 503 while the database was down: {storm.statuses}"
    assert set(storm.statuses) <= {"200", "503"}, storm.statuses
    assert ready_during == 503
    assert bot.proc is not None and bot.proc.poll() is None, "serve died with its database"
    record(
        [
            row(
                "PostgreSQL restarted mid-storm (a private cluster: `pg_ctl stop -m fast`, "
                f"down {outage:.0f} s, started again; scaled storm: 400 alerts over 10 s, "
                "half through Alertmanager)",
                "the webhook answers 503 (Retry-After) while it is down and /readyz fails; "
                "Alertmanager and posters retry; afterwards every alert is stored once and "
                "serve keeps running",
                alerts_sent=len(sent),
                alerts_stored=sum(rows.values()),
                direct_posts=dict(sorted(storm.statuses.items())),
                alertmanager_failed_requests=int(am_failed),
                incidents=len(incidents),
                outage_s=round(outage, 1),
                duration_s=round(time.monotonic() - began, 1),
            )
        ]
    )


SENDER_SAW_OUTAGE = r"WARNING bot\.chat\.slack\.sender: Slack sender: .* is unavailable"
WORKER_SAW_OUTAGE = r"WARNING bot\.worker: worker .* is unavailable"


def chat_state(url: str) -> dict[str, Any]:
    """The outbox rows not sent yet, the channels' leases, the incidents whose new log
    entries chat has not taken yet and the steps that may still write to the log, read on a
    connection of its own (the server may have restarted)."""
    database = Database(url)
    try:
        with database.session() as session:
            rows = session.execute(
                text(
                    "SELECT id, kind, incident_number, attempts FROM chat_outbox "
                    "WHERE state = 'pending' ORDER BY id"
                )
            )
            leases = session.execute(
                text(
                    "SELECT channel, lease_owner, lease_until FROM chat_channels "
                    "WHERE lease_owner IS NOT NULL"
                )
            )
            unannounced = session.execute(
                text("SELECT number FROM incidents WHERE log_seq > announced_seq")
            )
            busy = session.execute(
                text(
                    "SELECT incident_number, step_id, state FROM step_runs "
                    "WHERE state IN ('proposed', 'approved', 'running')"
                )
            )
            return {
                "pending": [tuple(r) for r in rows],
                "leased": [tuple(r) for r in leases],
                "unannounced": [int(n) for (n,) in unannounced],
                "steps": [tuple(r) for r in busy],
            }
    finally:
        database.dispose()


def idle(url: str) -> bool:
    """Nothing left to send and no step left to run: the sender waits on its idle poll."""
    return not any(chat_state(url).values())


def outage_bot(
    server: private_pg.PrivatePostgres,
    sim: SimHandle,
    slack: FakeSlack,
    bots: Callable[..., Bot],
    tmp_path: Path,
    kube: TcpProxy | None = None,
    **extra: Any,
) -> tuple[str, Bot]:
    """A bot on a fresh database of the private cluster (its Kubernetes API through
    `kube` when given); the database's URL and the bot, ready."""
    url = server.create_database("rbb_chaos")
    database = Database(url)
    migrations.upgrade(database)
    database.dispose()
    settings = bot_settings(
        db_url=url, sim=sim, slack=slack, tmp=tmp_path, runbook=TWO_STEPS, **extra
    )
    if kube is not None:
        through(kube, Path(settings["kubeconfig"]))
    bot = bots("serve", settings)
    bot.start()
    bot.wait_ready()
    return url, bot


def test_cards_are_posted_for_incidents_opened_after_a_database_outage(
    sim: SimHandle,
    slack: FakeSlack,
    bots: Callable[..., Bot],
    tmp_path: Path,
    record: Record,
) -> None:
    with private_pg.running() as server:
        url, bot = outage_bot(server, sim, slack, bots, tmp_path)
        with api(bot) as client:
            before = post_alert(client, "gpu-node-01")
            settle(lambda: before in card_counts(slack), "the first card", bot)
            settle(lambda: idle(url), "the sender to send all", bot, detail=lambda: chat_state(url))
            mark = bot.log_mark()
            server.stop("fast")
            # Down until both idle loops have looked at the database and found it gone.
            bot.wait_for_log(SENDER_SAW_OUTAGE, since=mark, what="the idle sender to see it")
            bot.wait_for_log(WORKER_SAW_OUTAGE, since=mark, what="the idle worker to see it")
            server.start()
            settle(lambda: client.get("/readyz").status_code == 200, "ready again", bot)
            after = post_alert(client, "gpu-node-02")
            settle(
                lambda: after in card_counts(slack),
                "a card after the outage",
                bot,
                detail=lambda: chat_state(url),
            )
        assert card_counts(slack) == {before: 1, after: 1}
        assert bot.proc is not None and bot.proc.poll() is None, "serve died with its database"
    record(
        [
            row(
                "PostgreSQL stopped while the Slack sender and the worker are idle, until "
                "both have found it gone, then started again; then a new incident",
                "the new incident gets its card once the database is back (the chaos suite "
                "found the Slack sender's thread dying here; fixed)",
                cards=sum(card_counts(slack).values()),
                incidents=2,
            )
        ]
    )


def test_a_slack_answer_that_meets_a_database_outage_is_recorded_once_it_is_back(
    sim: SimHandle,
    slack: FakeSlack,
    bots: Callable[..., Bot],
    tmp_path: Path,
    record: Record,
) -> None:
    slack_port = int(slack.url.rsplit(":", 1)[1])
    proxy = TcpProxy(("127.0.0.1", slack_port))
    try:
        with private_pg.running() as server:
            url, bot = outage_bot(
                server,
                sim,
                slack,
                bots,
                tmp_path,
                slack_api_url=f"http://127.0.0.1:{proxy.port}/api/",
                slack_timeout="30s",  # the answer is held far less long: no timeout here
            )
            with api(bot) as client:
                first = post_alert(client, "gpu-node-01")
                settle(lambda: first in card_counts(slack), "the first card", bot)
                settle(lambda: idle(url), "all to be sent", bot, detail=lambda: chat_state(url))
                proxy.pause_answers()
                held = post_alert(client, "gpu-node-02")
                settle(lambda: held in card_counts(slack), "Slack to get the second card", bot)
                mark = bot.log_mark()
                server.stop("fast")
                proxy.release()  # Slack's answer (the card's ts) arrives: nowhere to write it
                bot.wait_for_log(
                    SENDER_SAW_OUTAGE, since=mark, what="the sender to meet the outage"
                )
                server.start()
                settle(lambda: client.get("/readyz").status_code == 200, "ready again", bot)
                after = post_alert(client, "gpu-node-03")
                # The channel was leased to the sender for the held card: had the answer
                # been dropped, nothing would be sent there until that lease (a minute) ran
                # out, and the held card would be looked for in the channel's history.
                settle(
                    lambda: after in card_counts(slack),
                    "a card for an incident opened after the outage",
                    bot,
                    30,
                    detail=lambda: chat_state(url),
                )
                settle(lambda: idle(url), "all to be sent", bot, detail=lambda: chat_state(url))
            assert card_counts(slack) == {first: 1, held: 1, after: 1}
            assert slack.calls("conversations.history") == [], "a card was looked for"
            assert "the answer is kept" in bot.log()
    finally:
        proxy.close()
    record(
        [
            row(
                "PostgreSQL stopped while Slack's answer to a card post is on its way (held "
                "by a proxy until the database is down), then started again; then a new "
                "incident",
                "the answer is kept and recorded once the database is back: the held card "
                "is posted once, never looked for again, and the channel is not held up",
                cards=sum(card_counts(slack).values()),
                history_searches=len(slack.calls("conversations.history")),
                incidents=3,
            )
        ]
    )


def step_attempts(url: str, number: int) -> dict[str, list[str]]:
    """The states of INC-`number`'s step attempts by step, first attempt first."""
    database = Database(url)
    try:
        with database.session() as session:
            found: dict[str, list[str]] = {}
            query = text(
                "SELECT step_id, state FROM step_runs WHERE incident_number = :n "
                "ORDER BY step_id, attempt"
            )
            for step, state in session.execute(query, {"n": number}):
                found.setdefault(step, []).append(state)
            return found
    finally:
        database.dispose()


def test_a_step_that_ends_during_a_database_outage_is_recorded_once_it_is_back(
    sim: SimHandle,
    slack: FakeSlack,
    bots: Callable[..., Bot],
    tmp_path: Path,
    record: Record,
) -> None:
    node = "gpu-node-01"
    read = f"/api/v1/nodes/{node}"
    kube = TcpProxy(("127.0.0.1", int(sim.url.rsplit(":", 1)[1])))
    try:
        with private_pg.running() as server:
            url, bot = outage_bot(
                server,
                sim,
                slack,
                bots,
                tmp_path,
                kube=kube,
                kube_timeout="60s",  # the answer is held far less long: no timeout here
            )
            with api(bot) as client:
                kube.pause_answers()
                number = post_alert(client, node)
                settle(
                    lambda: sim.cluster.requests_made(method="GET", path=read),
                    "the status step to read the node",
                    bot,
                )
                mark = bot.log_mark()
                server.stop("fast")
                kube.release()  # the status step's answer arrives: nowhere to write it
                bot.wait_for_log(
                    r"WARNING bot\.worker: worker \S+: (step .* ended but )?database .* "
                    "is unavailable",
                    since=mark,
                    what="the worker to meet the outage with the step's result",
                )
                server.start()
                settle(lambda: client.get("/readyz").status_code == 200, "ready again", bot)
                # Had the result been dropped, the run would stay running until its lease
                # (a minute) ran out, then be called interrupted and wait for a person.
                settle(
                    lambda: steps(client, number).get("cordon") == "awaiting_approval",
                    "the cordon to be proposed on the status step's result",
                    bot,
                    30,
                    detail=lambda: step_attempts(url, number),
                )
                attempts = step_attempts(url, number)
            assert attempts == {"status": ["succeeded"], "cordon": ["awaiting_approval"]}
            # Which of the worker's warnings the outage meets first (the loop's own read,
            # the action's entries, or its result) depends on the loop's back-off; the proof
            # is the outcome: one succeeded run, recorded well before its lease ran out.
    finally:
        kube.close()
    record(
        [
            row(
                "PostgreSQL stopped while a step's action is on its way back (the "
                "Kubernetes API's answer held by a proxy until the database is down), then "
                "started again",
                "the worker keeps the result and records it once the database is back: "
                "the step succeeded once and the runbook goes on (it is not left running "
                "until its lease runs out and then offered to a person again)",
                status_attempts=len(attempts["status"]),
                node_reads=len(sim.cluster.requests_made(method="GET", path=read)),
            )
        ]
    )


def post_alert(client: httpx.Client, host: str) -> int:
    body = notification([alert(host=host)])
    answer = client.post("/webhooks/alertmanager", json=body)
    assert answer.status_code == 200, answer.text
    return int(answer.json()["incident"].removeprefix("INC-"))

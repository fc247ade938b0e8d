"""Slack end to end: the real bot (ingest, engine, worker, outbox sender, slack-bolt app)
against the fake Slack Web API on loopback and the simulated cluster.

Clicks are signed requests posted to `/slack/events` of the real ASGI app; cards and thread
posts are what the fake recorded from the real `WebClient`. The sender runs on the test's
frozen clock, so pacing is checked in clock seconds, deterministically.
"""

from __future__ import annotations

import json
import threading
import time
from datetime import timedelta
from typing import Any

import httpx
import pytest
from sqlalchemy import func, select

from bot.chat import outbox
from bot.chat import slack as slack_chat
from bot.chat.models import ChatCard, OutboxMessage
from bot.chat.slack.sender import SlackSender
from bot.clock import SystemClock
from bot.config import load_settings
from bot.console_settings import ConsoleSettings
from bot.db import Database
from bot.incidents import service as incidents
from bot.sim import SimHandle
from tests.chat.slack_rig import CHANNEL, DISRUPTIVE, SECRET, Chat
from tests.runbooks.rig import TWO_STEPS
from tests.support import fake_slack
from tests.support.payloads import alert, notification


def _texts(messages: list[fake_slack.Message]) -> str:
    return "\n".join(m.text + json.dumps(m.blocks) for m in messages)


def _run_id(message: fake_slack.Message, action: str) -> int:
    for block in message.blocks:
        for element in block.get("elements", []):
            if element.get("action_id") == action:
                return int(element["value"])
    raise AssertionError(f"no {action} button on the card")


def test_one_card_per_incident_edited_in_place_with_the_story_in_its_thread(
    chat: Chat,
) -> None:
    chat.rig.write(TWO_STEPS)
    number = chat.rig.fire(host="gpu-node-01")
    assert chat.send_all() == 0
    chat.work()  # the status step runs; cordon awaits approval
    more = notification([alert(host="gpu-node-01", gpu=3)])  # the same group, a new alert
    chat.rig.ingest(more)
    assert chat.send_all() == 0

    cards = chat.cards()
    assert len(cards) == 1, "alerts of one incident made a second card"
    card = cards[0]
    assert f"INC-{number}" in card.text and "gpu-node-01" in _texts([card])
    assert card.edits >= 1 and len(chat.slack.calls("chat.postMessage")) > 1
    assert _run_id(card, "step.approve") > 0  # cordon waits for a decision
    story = _texts(chat.thread(card))
    for entry in (f"INC-{number} opened", "runbook gpu-xid v1", "step cordon", "GPU 3"):
        assert entry in story, entry
    with chat.rig.db.session() as session:
        stored = session.get(ChatCard, number)
        assert stored is not None and stored.ts == card.ts


def test_an_approve_click_runs_the_step_as_the_person_who_clicked(
    chat: Chat, client: httpx.Client, sim: SimHandle
) -> None:
    chat.rig.write(TWO_STEPS)
    number = chat.rig.fire(host="gpu-node-01")
    chat.work()
    chat.send_all()
    run = _run_id(chat.cards()[0], "step.approve")

    answer = chat.click(client, "step.approve", run, "UALICE")
    assert answer.status_code == 200
    chat.work()
    chat.send_all()

    assert chat.rig.states(number)["cordon"] == "succeeded"
    assert chat.rig.runs(number)["cordon"].actor == "slack:UALICE"
    assert sim.cluster.snapshot().nodes["gpu-node-01"].unschedulable
    assert "action.progress" in chat.rig.types(number)  # what the action said while running
    card = chat.cards()[0]
    assert "step.approve" not in json.dumps(card.blocks)  # nothing waits any more
    assert "<@UALICE>" in _texts(chat.thread(card))


def test_a_click_without_a_role_is_refused_ephemerally_and_logged(
    chat: Chat, client: httpx.Client
) -> None:
    chat.rig.write(TWO_STEPS)
    number = chat.rig.fire(host="gpu-node-01")
    chat.work()
    chat.send_all()
    run = _run_id(chat.cards()[0], "step.approve")

    answer = chat.click(client, "step.approve", run, "UMALLORY")
    chat.send_all()

    assert answer.status_code == 200
    assert chat.rig.states(number)["cordon"] == "awaiting_approval"
    refused = chat.slack.ephemerals(CHANNEL)
    assert refused and refused[-1]["user"] == "UMALLORY"
    assert "responder role" in json.dumps(refused[-1])
    assert "chat.refused" in chat.rig.types(number)


def test_a_disruptive_step_needs_two_different_people(chat: Chat, client: httpx.Client) -> None:
    chat.rig.write(DISRUPTIVE)
    number = chat.rig.fire(host="gpu-node-01")
    chat.work()
    chat.send_all()
    card = chat.cards()[0]
    run = _run_id(card, "step.approve")
    approve = next(
        e
        for b in card.blocks
        for e in b.get("elements", [])
        if e.get("action_id") == "step.approve"
    )
    assert "gpu-node-01" in json.dumps(approve["confirm"])  # the dialog names the target

    chat.click(client, "step.approve", run, "UALICE")
    chat.click(client, "step.approve", run, "UALICE")  # the same person again
    chat.send_all()
    assert chat.rig.states(number)["drain"] == "awaiting_approval"
    assert chat.rig.approvals(number, "drain") == ["slack:UALICE"]
    assert "already approved" in json.dumps(chat.slack.ephemerals(CHANNEL))

    chat.click(client, "step.approve", run, "UCAROL")
    assert chat.rig.states(number)["drain"] == "approved"


def test_double_clicks_and_retried_requests_act_once(chat: Chat, client: httpx.Client) -> None:
    chat.rig.write(TWO_STEPS)
    number = chat.rig.fire(host="gpu-node-01")
    chat.work()
    chat.send_all()
    run = _run_id(chat.cards()[0], "step.approve")
    body = fake_slack.interactive_form(
        fake_slack.block_actions(
            action_id="step.approve",
            value=str(run),
            response_url=chat.slack.response_url(),
            user_id="UALICE",
            channel_id=CHANNEL,
        )
    )
    stamp = int(time.time())

    first = chat.post(client, body, timestamp=stamp)
    retried = chat.post(client, body, timestamp=stamp)  # the same request again
    clicked_again = chat.click(client, "step.approve", run, "UBOB")  # a late second click

    assert (first.status_code, retried.status_code, clicked_again.status_code) == (200, 401, 200)
    approved = [
        e for e in chat.rig.log(number) if e.type == "step.approved" and e.data["step"] == "cordon"
    ]
    assert len(approved) == 1
    chat.send_all()
    late = json.dumps(chat.slack.ephemerals(CHANNEL))
    assert "already approved by slack:UALICE" in late


@pytest.mark.parametrize(
    ("what", "sign"),
    [
        ("forged", {"secret": "not-the-signing-secret"}),
        ("stale", {"timestamp": int(time.time()) - 301}),
    ],
)
def test_forged_and_stale_requests_are_rejected(
    chat: Chat, client: httpx.Client, what: str, sign: dict[str, Any]
) -> None:
    chat.rig.write(TWO_STEPS)
    number = chat.rig.fire(host="gpu-node-01")
    chat.work()
    body = fake_slack.interactive_form(
        fake_slack.block_actions(
            action_id="step.approve",
            value="1",
            response_url=chat.slack.response_url(),
            user_id="UALICE",
            channel_id=CHANNEL,
        )
    )
    sign = dict(sign)  # the parameters are shared by both backends' runs
    secret = sign.pop("secret", SECRET)
    headers = fake_slack.signed_headers(secret, body, **sign)
    headers["Content-Type"] = "application/x-www-form-urlencoded"

    answer = client.post("/slack/events", content=body, headers=headers)

    assert answer.status_code == 401, what
    assert chat.rig.states(number)["cordon"] == "awaiting_approval"


def test_the_sender_holds_one_message_a_second_per_channel_and_honours_retry_after(
    chat: Chat,
) -> None:
    with chat.rig.db.transaction() as session:
        now = chat.rig.clock.now()
        for i in range(200):
            payload = {"text": f"update {i}", "blocks": []}
            outbox.enqueue(session, channel=CHANNEL, kind=outbox.MESSAGE, payload=payload, now=now)
    chat.slack.fail("chat.postMessage", 429, retry_after=30)

    sent_at: list[float] = []
    start = chat.rig.clock.now()
    for _ in range(600):  # 300 clock seconds: the 30 s hold, then 200 at one a second
        before = len(chat.slack.calls("chat.postMessage"))
        chat.sender.run_once()
        if len(chat.slack.calls("chat.postMessage")) > before:
            sent_at.append((chat.rig.clock.now() - start).total_seconds())
        chat.rig.clock.advance(timedelta(seconds=0.5))
        if not chat.pending():
            break

    assert chat.pending() == 0
    texts = [m.text for m in chat.slack.messages(CHANNEL)]
    assert texts == [f"update {i}" for i in range(200)]  # all of them, in order
    assert sent_at[1] - sent_at[0] >= 30  # the 429's Retry-After held the channel
    gaps = [b - a for a, b in zip(sent_at[1:], sent_at[2:], strict=False)]
    assert min(gaps) >= 1.0  # never faster than one a second


def test_a_burst_of_changes_is_one_card_update(chat: Chat) -> None:
    chat.rig.write(TWO_STEPS)
    number = chat.rig.fire(host="gpu-node-01")
    chat.send_all()
    updates = len(chat.slack.calls("chat.update"))

    for gpu in range(1, 6):  # five changes before the sender runs again
        chat.rig.ingest(notification([alert(host="gpu-node-01", gpu=gpu)]))
    chat.rig.clock.advance(timedelta(seconds=2))
    with chat.rig.db.transaction() as session:
        outbox.project(session, CHANNEL, chat.rig.clock.now())
        cards = session.scalar(
            select(func.count()).where(
                OutboxMessage.kind == "card",
                OutboxMessage.state == "pending",
                OutboxMessage.incident_number == number,
            )
        )
    assert cards == 1
    chat.send_all()
    assert len(chat.slack.calls("chat.update")) == updates + 1


def test_slash_command_lists_shows_and_resolves(chat: Chat, client: httpx.Client) -> None:
    chat.rig.write(TWO_STEPS)
    number = chat.rig.fire(host="gpu-node-01")

    def command(text: str, user: str = "UALICE") -> dict[str, Any]:
        fields = fake_slack.slash_command(
            text=text, response_url=chat.slack.response_url(), user_id=user, channel_id=CHANNEL
        )
        answer = chat.post(client, fake_slack.form(fields))
        assert answer.status_code == 200, answer.text
        body: dict[str, Any] = answer.json()
        return body

    assert f"INC-{number}" in json.dumps(command("list"))
    assert "gpu-node-01" in json.dumps(command(f"show INC-{number}"))
    assert "critical" in json.dumps(command(f"resolve INC-{number}")).lower()  # note required
    assert "responder role" in json.dumps(command(f"ack INC-{number}", user="UMALLORY"))
    assert "<@UBOB>" in json.dumps(command(f"owner INC-{number} <@UBOB|bob>"))
    assert "as a mention" in json.dumps(command(f"owner INC-{number} bob"))
    command(f"resolve INC-{number} drained gpu-node-01, GPU 5 reset")
    with chat.rig.db.session() as session:
        incident = incidents.get(session, number)
        assert (incident.status, incident.resolved_by) == ("resolved", "slack:UALICE")
        assert incident.disposition == "drained gpu-node-01, GPU 5 reset"
        assert incident.owner == "slack:UBOB"
    assert chat.rig.states(number)["status"] == "cancelled"  # not started: never runs
    assert "/incident list" in json.dumps(command("help"))


def test_two_senders_on_postgresql_send_each_message_once_in_order(
    pg_url: str, slack: fake_slack.FakeSlack
) -> None:
    settings = load_settings(
        database_url=pg_url,
        slack_bot_token=fake_slack.BOT_TOKEN,
        slack_signing_secret=SECRET,
        slack_channel=CHANNEL,
        slack_api_url=slack.api_url,
        slack_rate=20,
    )
    slack.rate_limit(CHANNEL, per_second=20, burst=3)  # 429 to anything faster
    db = Database(pg_url)
    clock = SystemClock()
    try:
        with db.transaction() as session:
            for i in range(60):
                payload = {"text": f"message {i}", "blocks": []}
                outbox.enqueue(
                    session, channel=CHANNEL, kind=outbox.MESSAGE, payload=payload, now=clock.now()
                )
        senders = [
            SlackSender(db, settings, clock, slack_chat.api(settings), owner=f"replica-{n}")
            for n in range(2)
        ]

        def drain(sender: SlackSender) -> None:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and _pending(db):
                if not sender.run_once():
                    time.sleep(0.01)

        threads = [threading.Thread(target=drain, args=(s,)) for s in senders]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=90)
    finally:
        db.dispose()

    texts = [m.text for m in slack.messages(CHANNEL)]
    assert texts == [f"message {i}" for i in range(60)]  # each once, in order
    assert slack.violations(CHANNEL) == 0


def _pending(db: Database) -> int:
    with db.session() as session:
        return int(
            session.scalar(select(func.count()).where(OutboxMessage.state == "pending")) or 0
        )


def test_server_errors_are_retried_with_backoff_and_a_refusal_fails_at_once(
    chat: Chat, caplog: pytest.LogCaptureFixture
) -> None:
    chat.rig.write(TWO_STEPS)
    chat.slack.fail("chat.postMessage", 500, times=2)
    number = chat.rig.fire(host="gpu-node-01")

    assert chat.send_all() == 0
    assert len(chat.cards()) == 1  # the third attempt went through
    with chat.rig.db.session() as session:
        card = session.scalars(
            select(OutboxMessage).where(
                OutboxMessage.incident_number == number, OutboxMessage.kind == "card"
            )
        ).first()
        assert card is not None and card.attempts == 3 and card.state == "sent"

    with chat.rig.db.transaction() as session:
        payload = {"text": "hello", "blocks": []}
        now = chat.rig.clock.now()
        outbox.enqueue(session, channel=CHANNEL, kind=outbox.MESSAGE, payload=payload, now=now)
    chat.slack.fail("chat.postMessage", 200, error="not_in_channel")
    assert chat.send_all() == 0
    with chat.rig.db.session() as session:
        failed = session.scalars(select(OutboxMessage).where(OutboxMessage.state == "failed"))
        (row,) = failed.all()
        assert row.attempts == 1 and "invite the bot to the channel" in row.error
    assert "failed for good" in caplog.text


def test_a_new_card_goes_before_a_backlog_of_thread_posts_and_updates(chat: Chat) -> None:
    chat.rig.write(TWO_STEPS)
    chat.rig.fire(host="gpu-node-01")
    chat.send_all()
    for gpu in range(1, 4):  # the first incident changes: an update and thread posts wait
        chat.rig.ingest(notification([alert(host="gpu-node-01", gpu=gpu)]))
    with chat.rig.db.transaction() as session:
        for i in range(10):
            payload = {"text": f"backlog {i}", "blocks": []}
            now = chat.rig.clock.now()
            outbox.enqueue(session, channel=CHANNEL, kind=outbox.MESSAGE, payload=payload, now=now)
    second = chat.rig.fire(host="gpu-node-02")
    chat.rig.clock.advance(timedelta(seconds=5))
    before = len(chat.slack.calls())

    chat.sender.run_once()

    (call,) = chat.slack.calls()[before:]
    assert call.method == "chat.postMessage" and f"INC-{second}" in call.params["text"]


def test_the_last_token_of_a_busy_channel_is_kept_for_a_new_card(chat: Chat) -> None:
    chat.rig.write(TWO_STEPS)
    with chat.rig.db.transaction() as session:
        for i in range(10):
            payload = {"text": f"story {i}", "blocks": []}
            now = chat.rig.clock.now()
            outbox.enqueue(session, channel=CHANNEL, kind=outbox.MESSAGE, payload=payload, now=now)
    while chat.sender.run_once():  # the clock stands still: the story uses its share
        pass
    story = len(chat.slack.messages(CHANNEL))
    assert 0 < story < 10  # a burst, then it waits for tokens

    number = chat.rig.fire(host="gpu-node-03")
    assert chat.sender.run_once()  # at the same instant: the kept token

    assert f"INC-{number}" in (chat.slack.messages(CHANNEL)[-1].text or "")
    assert not chat.sender.run_once()  # and now the channel waits, new or not


def test_with_the_consoles_public_url_a_card_links_to_its_console_page(chat: Chat) -> None:
    console = ConsoleSettings(public_url="https://runbook-bot.example.com/")
    settings = chat.settings.model_copy(update={"console": console})
    sender = SlackSender(chat.rig.db, settings, chat.rig.clock, slack_chat.api(settings))
    chat.rig.write(TWO_STEPS)
    number = chat.rig.fire(host="gpu-node-01")
    for _ in range(20):
        if not sender.run_once():
            break

    (card,) = chat.cards()
    link = f"<https://runbook-bot.example.com/incidents/{number}|open in console>"
    assert link in _texts([card])

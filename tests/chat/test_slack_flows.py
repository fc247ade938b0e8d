"""Slack flows beyond one click: dialogs, Socket Mode, a card whose post was not recorded,
and `runbook-bot serve` posting cards from its worker process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import yaml
from slack_bolt.adapter.socket_mode import SocketModeHandler
from sqlalchemy import select

from bot.chat.models import ChatCard, OutboxMessage
from bot.chat.outbox import OutboxChat
from bot.incidents import service as incidents
from tests.chat.slack_rig import CHANNEL, GROUPS, SECRET, Chat
from tests.runbooks.rig import TWO_STEPS
from tests.sim.waiting import eventually
from tests.support import fake_slack
from tests.support.fake_slack import FakeSlack
from tests.support.payloads import alert, notification

MANUAL = """\
    id: gpu-xid
    title: Single GPU fault
    version: 1
    match: {alerts: [GPUXIDError]}
    steps:
      - id: reseat
        title: Reseat the GPU
        manual: Reseat GPU 5 and check the riser cable.
"""


def _button(chat: Chat, action: str) -> int:
    for block in chat.cards()[0].blocks:
        for element in block.get("elements", []):
            if element.get("action_id") == action:
                return int(element["value"])
    raise AssertionError(f"no {action} button")


def _submit(
    chat: Chat, client: httpx.Client, callback: str, metadata: str, block: str, text: str
) -> httpx.Response:
    values = {block: {"text": {"type": "plain_text_input", "value": text}}}
    payload = fake_slack.view_submission(
        callback_id=callback, values=values, private_metadata=metadata, user_id="UALICE"
    )
    return chat.post(client, fake_slack.interactive_form(payload))


def test_resolve_opens_a_dialog_whose_disposition_resolves_the_incident(
    chat: Chat, client: httpx.Client
) -> None:
    chat.rig.write(TWO_STEPS)
    number = chat.rig.fire(host="gpu-node-01")
    chat.send_all()

    chat.click(client, "incident.resolve", _button(chat, "incident.resolve"), "UALICE")
    (view,) = chat.slack.views().values()
    assert view["callback_id"] == "incident.resolve" and view["private_metadata"] == str(number)

    empty = _submit(chat, client, "incident.resolve", str(number), "disposition", "")
    assert empty.status_code == 200 and empty.json()["response_action"] == "errors"
    done = _submit(chat, client, "incident.resolve", str(number), "disposition", "GPU 5 reset")
    assert done.status_code == 200 and not done.content
    with chat.rig.db.session() as session:
        incident = incidents.get(session, number)
        assert (incident.status, incident.disposition) == ("resolved", "GPU 5 reset")
    chat.send_all()
    assert "Resolved" in json.dumps(chat.cards()[0].blocks)
    assert "incident.ack" not in json.dumps(chat.cards()[0].blocks)


def test_a_manual_step_is_marked_done_with_a_note_from_its_dialog(
    chat: Chat, client: httpx.Client
) -> None:
    chat.rig.write(MANUAL)
    number = chat.rig.fire(host="gpu-node-01")
    chat.send_all()

    run = _button(chat, "step.done")
    chat.click(client, "step.done", run, "UBOB")
    (view,) = chat.slack.views().values()
    assert view["callback_id"] == "step.done"
    answer = _submit(chat, client, "step.done", view["private_metadata"], "note", "reseated")

    assert answer.status_code == 200
    assert chat.rig.states(number)["reseat"] == "succeeded"
    assert chat.rig.runs(number)["reseat"].actor == "slack:UALICE"


def test_socket_mode_carries_clicks_and_commands(chat: Chat) -> None:
    chat.rig.write(TWO_STEPS)
    number = chat.rig.fire(host="gpu-node-01")
    chat.work()
    chat.send_all()
    run = _button(chat, "step.approve")
    handler = SocketModeHandler(chat.app.app, fake_slack.APP_TOKEN)
    handler.connect()  # type: ignore[no-untyped-call]
    try:
        chat.slack.connected()
        click = fake_slack.block_actions(
            action_id="step.approve",
            value=str(run),
            response_url=chat.slack.response_url(),
            user_id="UALICE",
            channel_id=CHANNEL,
        )
        chat.slack.wait_ack(chat.slack.send_envelope("interactive", click))
        command = fake_slack.slash_command(
            text=f"show INC-{number}", response_url=chat.slack.response_url(), user_id="UBOB"
        )
        answer = chat.slack.wait_ack(
            chat.slack.send_envelope("slash_commands", command, accepts_response_payload=True)
        )
    finally:
        handler.close()  # type: ignore[no-untyped-call]

    assert chat.rig.states(number)["cordon"] == "approved"
    assert chat.rig.runs(number)["cordon"].actor == "slack:UALICE"
    assert "gpu-node-01" in json.dumps(answer["payload"])


def test_a_card_posted_but_not_recorded_is_found_again_not_posted_twice(chat: Chat) -> None:
    chat.rig.write(TWO_STEPS)
    number = chat.rig.fire(host="gpu-node-01")
    with chat.rig.db.transaction() as session:
        from bot.chat import outbox

        outbox.project(session, CHANNEL, chat.rig.clock.now())
    # The sender posts the card and dies before it records the ts: claim and deliver only.
    claimed = chat.sender._claim()
    assert claimed and claimed.kind == "card"
    chat.sender._deliver(claimed)
    assert len(chat.cards()) == 1

    chat.rig.clock.advance(timedelta(minutes=2))  # the dead sender's lease runs out
    assert chat.send_all() == 0

    assert len(chat.cards()) == 1
    with chat.rig.db.session() as session:
        card = session.get(ChatCard, number)
        assert card is not None and card.ts == chat.cards()[0].ts
        assert not session.scalars(select(OutboxMessage).where(OutboxMessage.state != "sent")).all()
    assert chat.cards()[0].edits >= 1  # the found card was updated in place


@contextmanager
def _serve(slack: FakeSlack, db_url: str, tmp_path: Path, **extra: Any) -> Iterator[str]:
    """`runbook-bot serve` wired to the fake Slack, until the block ends; its URL."""
    runbooks = tmp_path / "runbooks"
    runbooks.mkdir()
    (runbooks / "gpu-xid.yaml").write_text(textwrap.dedent(TWO_STEPS), encoding="utf-8")
    port = _free_port()
    settings = {
        "database_url": db_url,
        "runbooks_dir": str(runbooks),
        "listen_port": port,
        "slack_bot_token": fake_slack.BOT_TOKEN,
        "slack_signing_secret": SECRET,
        "slack_channel": CHANNEL,
        "slack_api_url": slack.api_url,
        "slack_role_groups": {"responder": list(GROUPS)},
        "worker_poll": "60s",
        **extra,
    }
    config = tmp_path / "settings.yaml"
    config.write_text(yaml.safe_dump(settings), encoding="utf-8")
    log = (tmp_path / "serve.log").open("w+b")
    proc = subprocess.Popen(
        [sys.executable, "-m", "bot.cli", "--config", str(config), "serve"],
        cwd=tmp_path,
        env=os.environ.copy(),
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:

        def ready() -> bool:
            assert proc.poll() is None, "serve exited"
            try:
                return httpx.get(f"{url}/readyz", timeout=2).status_code == 200
            except httpx.TransportError:
                return False

        eventually(ready, timeout=30, what="serve to become ready")
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=60)
        log.close()


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def test_serve_posts_the_card_from_its_worker_process_when_an_alert_arrives(
    slack: FakeSlack, db_url: str, tmp_path: Path
) -> None:
    with _serve(slack, db_url, tmp_path) as url:
        _alert_makes_one_card(url, slack)


def test_serve_in_socket_mode_takes_commands_over_the_websocket(
    slack: FakeSlack, db_url: str, tmp_path: Path
) -> None:
    with _serve(
        slack, db_url, tmp_path, slack_mode="socket", slack_app_token=fake_slack.APP_TOKEN
    ) as url:
        _alert_makes_one_card(url, slack)
        slack.connected(timeout=20)
        command = fake_slack.slash_command(
            text="list", response_url=slack.response_url(), user_id="UALICE"
        )
        answer = slack.wait_ack(
            slack.send_envelope("slash_commands", command, accepts_response_payload=True),
            timeout=20,
        )
    assert "gpu-node-07" in json.dumps(answer["payload"])


def _alert_makes_one_card(url: str, slack: FakeSlack) -> None:
    posted = httpx.post(
        f"{url}/webhooks/alertmanager",
        json=notification([alert(host="gpu-node-07")]),
        timeout=10,
    )
    assert posted.status_code == 200

    # worker_poll is a minute: a card within seconds was woken by the webhook's commit.
    eventually(
        lambda: any(
            m.thread_ts is None and "gpu-node-07" in (m.text or "") for m in slack.messages(CHANNEL)
        ),
        timeout=20,
        what="the card to reach Slack",
    )
    cards = [m for m in slack.messages(CHANNEL) if m.thread_ts is None]
    assert len(cards) == 1


def test_a_page_mentions_the_person_in_the_thread_and_messages_them_directly(
    chat: Chat,
) -> None:
    chat.rig.write(TWO_STEPS)
    number = chat.rig.fire(host="gpu-node-01")
    chat.send_all()
    paging = OutboxChat(CHANNEL)

    with chat.rig.db.transaction() as session:
        now = chat.rig.clock.now()
        paging.page(session, number, "slack:UCAROL", "INC not acknowledged in 15 min", now)
        paging.page(session, number, "slack:S0SRE", "second line, please look", now)
    assert chat.send_all() == 0

    card = chat.cards()[0]
    thread = json.dumps([m.blocks for m in chat.thread(card)])
    assert "<@UCAROL> INC not acknowledged in 15 min" in thread
    assert "<!subteam^S0SRE> second line, please look" in thread
    direct = [m for m in chat.slack.messages() if m.channel.startswith("D")]
    assert len(direct) == 1 and "not acknowledged" in (direct[0].text or "")


def test_acknowledge_and_take_ownership_buttons(chat: Chat, client: httpx.Client) -> None:
    chat.rig.write(TWO_STEPS)
    number = chat.rig.fire(host="gpu-node-01")
    chat.send_all()

    chat.click(client, "incident.ack", _button(chat, "incident.ack"), "UALICE")
    chat.send_all()
    assert "incident.ack" not in json.dumps(chat.cards()[0].blocks)  # acknowledged now
    chat.click(client, "incident.own", _button(chat, "incident.own"), "UBOB")

    with chat.rig.db.session() as session:
        incident = incidents.get(session, number)
        assert (incident.status, incident.acknowledged_by) == ("acknowledged", "slack:UALICE")
        assert incident.owner == "slack:UBOB"
    assert "incident.owner" in chat.rig.types(number)

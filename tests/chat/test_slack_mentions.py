"""Alert text never pings anyone: a mention reaches Slack only from the bot's own people
data (the actor of a decision or a log entry, the person or group being paged).

The alert goes through the served webhook; the worker proposes its steps; the real sender
posts the card and its thread with the real `WebClient` to the fake Slack Web API; a
responder approves through a signed click. Every text and block the fake received is read.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from bot.clock import FrozenClock
from bot.db import Database
from bot.sim import SimHandle
from tests.chat.slack_rig import Chat
from tests.runbooks.rig import TWO_STEPS
from tests.support import server
from tests.support.fake_slack import FakeSlack
from tests.support.payloads import alert, notification

CEO = "U0CEO12345"
HOSTILE = (
    f"slack:{CEO} <@{CEO}> <@{CEO}|ceo> <!channel> <!here> <!everyone> "
    "<!subteam^S0EVIL|@execs> <#C0GENERAL> <https://evil.example|click>"
)
LIVE = [
    f"<@{CEO}>",
    f"<@{CEO}|",
    "<!channel>",
    "<!here>",
    "<!everyone>",
    "<!subteam^S0EVIL",
    "<#C0GENERAL>",
    "<https://evil.example",
]


@pytest.fixture
def served(chat: Chat) -> Iterator[httpx.Client]:
    settings, rig = chat.settings, chat.rig
    rig.write(TWO_STEPS)
    with (
        server.running(settings, rig.db, rig.clock, catalog=rig.catalog(), slack=chat.app) as url,
        httpx.Client(base_url=url, timeout=10) as http,
    ):
        yield http


def _sent(chat: Chat) -> str:
    """Everything the bot sent to Slack's Web API, as one JSON text."""
    return "\n".join(json.dumps(call.params, ensure_ascii=False) for call in chat.slack.calls())


def test_mentions_in_alert_text_reach_slack_as_text_and_a_real_approver_still_is_one(
    chat: Chat, served: httpx.Client
) -> None:
    firing = alert(host="gpu-node-01", owner=f"slack:{CEO}", team=f"<@{CEO}>")
    firing["annotations"] = {"summary": f"XID 79 {HOSTILE}", "description": HOSTILE}
    stored = served.post("/webhooks/alertmanager", json=notification([firing]))
    assert stored.status_code == 200, stored.text
    number = int(str(stored.json()["incident"]).removeprefix("INC-"))
    chat.worker.propose()  # as serve does when the webhook wakes it
    chat.work()  # the status step runs; cordon awaits approval
    assert chat.send_all() == 0
    card = chat.cards()[0]
    run = next(
        int(element["value"])
        for block in card.blocks
        for element in block.get("elements", [])
        if element.get("action_id") == "step.approve"
    )

    clicked = chat.click(served, "step.approve", run, "UALICE")
    assert clicked.status_code == 200, clicked.text
    chat.work()
    assert chat.send_all() == 0

    sent = _sent(chat)
    assert chat.rig.states(number)["cordon"] == "succeeded"
    assert "slack:U0CEO12345" in sent and "&lt;@U0CEO12345&gt;" in sent, "the text never came"
    for live in LIVE:
        assert live not in sent, f"alert text became a live {live!r}"
    assert "<@UALICE>" in sent, "the approver who clicked is no longer a mention"


def test_a_person_is_mentioned_by_the_slack_id_people_gives_them_and_a_receiver_never(
    db: Database, clock: FrozenClock, tmp_path: Path, slack: FakeSlack, sim: SimHandle
) -> None:
    chat = Chat(
        db, clock, tmp_path, slack, sim, people={"alice": {"name": "Alice", "slack": "UALICE"}}
    )
    chat.rig.write(TWO_STEPS)
    with (
        server.running(chat.settings, db, clock, catalog=chat.rig.catalog(), slack=chat.app) as url,
        httpx.Client(base_url=url, timeout=10) as http,
    ):
        # The receiver's name is the payload's: it names the log entry's actor, a mention never.
        body = notification([alert(host="gpu-node-01")], receiver=f"slack:{CEO}")
        stored = http.post("/webhooks/alertmanager", json=body)
        assert stored.status_code == 200, stored.text
        number = int(str(stored.json()["incident"]).removeprefix("INC-"))
        chat.worker.propose()
        chat.work()
        assert chat.send_all() == 0
        run = chat.rig.runs(number)["cordon"].id
        clicked = chat.click(http, "step.approve", run, "UALICE")
        assert clicked.status_code == 200, clicked.text
        chat.work()
        assert chat.send_all() == 0

    sent = _sent(chat)
    approved = [e for e in chat.rig.log(number) if e.type == "step.approved"][-1]
    assert approved.actor_id == "alice"  # the person, not the Slack identity
    assert "<@UALICE>" in sent, "alice's approval does not mention her by her Slack id"
    assert f"slack:{CEO}" in sent and f"<@{CEO}>" not in sent

"""The card's decisions end to end in Slack (the real slack-bolt app, the fake Slack Web API
and the real WebClient, the engine on the database): Skip of a step later steps need asks
why in a dialog naming them, Propose again brings a step back, and the two-person rule
tells the first approver whom they wait for and pages the second line on request."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from bot.alerts import ingest
from bot.alerts.payload import WebhookPayload
from bot.clock import FrozenClock
from bot.db import Database
from bot.escalation import frozen_policy
from bot.incidents import service as incidents
from bot.sim import SimHandle
from tests.chat.slack_rig import CHANNEL, DISRUPTIVE, Chat
from tests.chat.test_escalation_chat import LADDER
from tests.support import fake_slack
from tests.support.fake_slack import FakeSlack
from tests.support.payloads import alert, notification

CORDON_THEN_DRAIN = """\
    id: gpu-xid
    title: Single GPU fault
    version: 1
    match: {alerts: [GPUXIDError]}
    facts:
      node: "{{ labels.Hostname }}"
    steps:
      - id: cordon
        title: Cordon the node
        action: k8s.cordon
        with: {node: "{{ facts.node }}", reason: "XID on {{ facts.node }}"}
      - id: drain
        title: Drain the node
        action: k8s.drain
        with: {node: "{{ facts.node }}"}
        when: steps.cordon.status == "succeeded"
"""


@pytest.fixture
def chat(
    db: Database, clock: FrozenClock, tmp_path: Path, slack: FakeSlack, sim: SimHandle
) -> Chat:
    return Chat(db, clock, tmp_path, slack, sim, escalation=LADDER)


def _open(chat: Chat, host: str = "gpu-node-01") -> int:
    """An incident through the real ingest with the frozen escalation policy (as the
    webhook opens it), its card posted."""
    rig = chat.rig
    result = ingest.ingest(
        rig.db,
        WebhookPayload.model_validate(notification([alert(host=host)])),
        clock=rig.clock,
        reopen_window=rig.settings.reopen_window,
        catalog=rig.catalog(),
        escalation=frozen_policy(rig.settings),
    )
    chat.work()
    chat.send_all()
    return result.incident


def _elements(chat: Chat) -> dict[str, dict[str, Any]]:
    return {
        element["action_id"]: element
        for block in chat.cards()[-1].blocks
        for element in block.get("elements", [])
        if "action_id" in element
    }


def _texts(chat: Chat) -> str:
    return json.dumps(chat.cards()[-1].blocks, ensure_ascii=False)


def _submit(chat: Chat, client: httpx.Client, callback: str, metadata: str, text: str) -> Any:
    values = {"note": {"text": {"type": "plain_text_input", "value": text}}}
    payload = fake_slack.view_submission(
        callback_id=callback, values=values, private_metadata=metadata, user_id="UALICE"
    )
    return chat.post(client, fake_slack.interactive_form(payload))


def _ephemerals(chat: Chat, user: str) -> list[str]:
    return [e["text"] for e in chat.slack.ephemerals(CHANNEL) if e["user"] == user]


def test_skip_of_a_step_others_need_asks_why_then_propose_again_brings_it_back(
    chat: Chat, client: httpx.Client
) -> None:
    chat.rig.write(CORDON_THEN_DRAIN)
    number = _open(chat)
    buttons = _elements(chat)
    assert "step.skip" not in buttons, "one tap must not skip what others need"
    assert "Skipping it also skips: Drain the node" in _texts(chat)
    run = int(buttons["step.skip_why"]["value"])

    chat.click(client, "step.skip_why", run, "UALICE")
    (view,) = chat.slack.views().values()
    assert (view["callback_id"], view["private_metadata"]) == ("step.skip", str(run))
    assert "This also skips 1 later step that need it: Drain the node." in json.dumps(view)
    empty = _submit(chat, client, "step.skip", str(run), "  ")
    assert empty.status_code == 200 and empty.json()["response_action"] == "errors"
    assert chat.rig.states(number)["cordon"] == "awaiting_approval"

    done = _submit(chat, client, "step.skip", str(run), "the node is already out of service")
    assert done.status_code == 200 and not done.content
    assert chat.rig.states(number) == {"cordon": "skipped", "drain": "skipped"}
    skipped = next(e for e in chat.rig.log(number) if e.type == "step.skipped")
    assert skipped.actor_id == "slack:UALICE"
    assert "drain" in json.dumps(skipped.data)
    with chat.rig.db.session() as session:  # deciding is responding
        assert incidents.get(session, number).status == "acknowledged"

    chat.send_all()
    again = _elements(chat)["step.repropose"]
    assert again["text"]["text"] == "Propose again: Cordon the node"
    assert int(again["value"]) == run
    assert chat.click(client, "step.repropose", run, "UBOB").status_code == 200
    cordon = chat.rig.runs(number)["cordon"]
    assert cordon.attempt > 1 and cordon.state == "awaiting_approval"
    assert any(e.type == "step.reproposed" for e in chat.rig.log(number))
    chat.send_all()
    assert int(_elements(chat)["step.approve"]["value"]) == cordon.id
    assert "step.repropose" not in _elements(chat)


def test_a_viewer_cannot_propose_again_and_is_told_whom_to_ask(
    chat: Chat, client: httpx.Client
) -> None:
    chat.rig.write(CORDON_THEN_DRAIN)
    number = _open(chat)
    run = int(_elements(chat)["step.skip_why"]["value"])
    _submit(chat, client, "step.skip", str(run), "out of service already")
    chat.send_all()
    assert int(_elements(chat)["step.repropose"]["value"]) == run

    chat.click(client, "step.repropose", run, "UMALLORY")
    chat.send_all()
    assert chat.rig.runs(number)["cordon"].attempt == 1
    (refusal,) = _ephemerals(chat, "UMALLORY")
    assert "you need the responder role to propose steps again on incidents" in refusal


def test_the_first_approver_sees_whom_they_wait_for_and_pages_the_second_line_now(
    chat: Chat, client: httpx.Client
) -> None:
    chat.rig.write(DISRUPTIVE)
    number = _open(chat)
    run = int(_elements(chat)["step.approve"]["value"])
    assert "incident.page_second" not in _elements(chat), "nobody approved yet"

    chat.click(client, "step.approve", run, "UALICE")
    chat.send_all()
    text = _texts(chat)
    assert "approved by <@UALICE>, waiting for one more (second line: " in text
    assert "not paged yet)" in text
    page = _elements(chat)["incident.page_second"]
    assert (page["text"]["text"], page["value"]) == ("Page the second line now", str(number))

    chat.click(client, "step.approve", run, "UALICE")  # stuck? the answer says what to do
    chat.send_all()
    assert "Press Page the second line now" in _ephemerals(chat, "UALICE")[-1]
    assert chat.rig.approvals(number, "drain") == ["slack:UALICE"]

    chat.click(client, "incident.page_second", number, "UALICE")
    chat.send_all()
    assert _ephemerals(chat, "UALICE")[-1].startswith(f"Paged the second line of INC-{number} at ")
    paged = [e for e in chat.rig.log(number) if e.type == "escalation.paged"]
    assert paged[-1].data["kind"] == "now" and paged[-1].actor_id == "slack:UALICE"
    at = paged[-1].at.strftime("%H:%M:%S")
    assert f"paged {at} UTC)" in _texts(chat)

    chat.click(client, "step.approve", run, "UCAROL")  # the second line approves
    assert chat.rig.approvals(number, "drain") == ["slack:UALICE", "slack:UCAROL"]
    assert chat.rig.states(number)["drain"] in ("approved", "running", "succeeded", "failed")

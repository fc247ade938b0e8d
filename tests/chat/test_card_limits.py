"""Block Kit limits of the card for the largest cases the bot is built for: a 32-node
domain incident (a hot row) and a 30-step runbook. The cards are made by the real bot
(ingest, engine, worker, the outbox sender) and posted with the real WebClient to the fake
Slack Web API; what the fake recorded is checked against Slack's limits twice: by this
suite's walker (`assert_within_limits`) and by slack_sdk's own Block Kit models, which
refuse a text past its limit."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from slack_sdk.models.blocks import Block
from slack_sdk.models.views import View
from sqlalchemy import func, select

from bot.chat import slack as slack_chat
from bot.chat.models import OutboxMessage
from bot.chat.slack import blocks
from bot.chat.slack.sender import SlackSender
from bot.clock import FrozenClock
from bot.db import Database
from bot.sim import SimHandle
from bot.worker import Worker
from tests.alerts.fleet import Fleet, node
from tests.chat.big_cards import OPEN, ROW, thirty_steps
from tests.chat.slack_rig import CHANNEL, SECRET
from tests.chat.test_blocks import assert_no_markup_injection, assert_within_limits, mrkdwn_texts
from tests.support import fake_slack, working
from tests.support.fake_slack import FakeSlack


@pytest.fixture
def fleet(db: Database, clock: FrozenClock, tmp_path: Path, slack: FakeSlack) -> Fleet:
    fleet = Fleet(
        db,
        clock,
        tmp_path,
        roles={"alice": ["responder"]},
        slack_bot_token=fake_slack.BOT_TOKEN,
        slack_signing_secret=SECRET,
        slack_channel=CHANNEL,
        slack_api_url=slack.api_url,
        **OPEN,
    )
    fleet.write(ROW, "overheating.yaml")
    return fleet


@pytest.fixture
def sender(fleet: Fleet) -> Iterator[SlackSender]:
    yield SlackSender(fleet.db, fleet.settings, fleet.clock, slack_chat.api(fleet.settings))


def send_all(sender: SlackSender, fleet: Fleet) -> None:
    """The sender until the outbox is empty, a clock second per idle round (its pacing)."""
    for _ in range(200):
        if not sender.run_once():
            with fleet.db.session() as session:
                stmt = select(func.count()).where(OutboxMessage.state == "pending")
                if not session.scalar(stmt):
                    return
            fleet.clock.advance(timedelta(seconds=1))
    raise AssertionError("the outbox did not empty")


def the_card(slack: FakeSlack) -> fake_slack.Message:
    cards = [m for m in slack.messages(CHANNEL) if m.thread_ts is None]
    assert len(cards) == 1, [m.text for m in cards]
    return cards[0]


def assert_slack_accepts(message: list[dict[str, Any]]) -> None:
    """Our walker, then slack_sdk's models (each raises on a text past Slack's limit)."""
    assert_within_limits(message)
    for block in message:
        parsed = Block.parse(block)
        assert parsed is not None, block
        parsed.validate_json()
    for text in mrkdwn_texts(message):
        assert_no_markup_injection(text)


def test_a_32_node_hot_row_card_counts_its_nodes_within_every_limit(
    fleet: Fleet, sender: SlackSender, slack: FakeSlack, sim: SimHandle
) -> None:
    row = [node("a", i) for i in range(32)]
    result = fleet.post(fleet.hot(row), alertname="GPUTemperatureHigh")
    fleet.propose()
    send_all(sender, fleet)

    card = the_card(slack)
    assert_slack_accepts(card.blocks)
    shown = json.dumps(card.blocks, ensure_ascii=False)
    status = card.blocks[1]["elements"][0]["text"]
    assert "row/a · 32 nodes" in status
    approve = next(
        e
        for b in card.blocks
        for e in b.get("elements", [])
        if e.get("action_id") == "step.approve"
    )
    assert approve["text"]["text"] == "Cordon 32 nodes of row/a"
    # Never a line per node: the set is named by its first and last node at most.
    assert sum(shown.count(n) for n in row) <= 4, shown

    # Approved, the cordon runs over the 32 (none is a node of the simulator, so each
    # fails): the card counts them and draws the grid, and names only a few.
    fleet.approve(result.incident, "cordon", "alice", count=32)
    worker = Worker(fleet.db, fleet.settings, fleet.clock, kube_factory=sim.api_client)
    for _ in range(40):
        if not working.passed(worker):
            break
    send_all(sender, fleet)

    card = the_card(slack)
    assert_slack_accepts(card.blocks)
    assert card.edits >= 1
    shown = json.dumps(card.blocks, ensure_ascii=False)
    assert "done 0 · running 0 · failed 32 · left 0" in shown, shown
    assert sum(shown.count(n) for n in row) <= 5 + 2, "five failed nodes named, +27"
    assert "+27" in shown


def test_a_30_step_runbook_card_keeps_the_decision_and_folds_the_rest_within_limits(
    fleet: Fleet, sender: SlackSender, slack: FakeSlack
) -> None:
    fleet.write(thirty_steps(), "gpu-xid.yaml")  # in place of the fleet's
    number = fleet.fire(host="gpu-node-01")
    fleet.propose()
    send_all(sender, fleet)

    states = fleet.states(number)  # the steps proposed so far: 5 of the 30
    card = the_card(slack)
    assert_slack_accepts(card.blocks)
    assert len(card.blocks) <= 12, "thirty steps, one card screen: the rest is one line"
    waiting = [s for s, state in states.items() if state == "awaiting_approval"]
    assert waiting == ["step_05"]
    decision = card.blocks[2]["text"]["text"]
    assert decision.startswith("⏳ *Waiting for a decision: Step 05 of the")
    assert "waiting for someone to do it and mark it done" in decision
    assert card.blocks[3]["block_id"].startswith("step:")
    folded = [e["text"] for b in card.blocks if b["type"] == "context" for e in b["elements"]]
    assert (
        "⏭ 4 steps skipped: informational/fabric/thermal/power branches · 25 not reached yet"
    ) in folded


def test_dialogs_pass_slacks_own_view_checks() -> None:
    also = [f"Step {i:02d} " + "with a long title " * 10 for i in range(40)]
    modal = blocks.skip_modal(21, "Cordon the node " * 30, also)
    View(**modal).validate_json()
    assert_within_limits(modal["blocks"])

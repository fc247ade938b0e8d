"""A flood of warnings never delays a critical card (issue 19, item 9).

Hundreds of warning incidents are opened through the real ingest, then one critical
(an XID); the real sender sends the outbox to the fake Slack Web API on loopback, on
SQLite and PostgreSQL. The critical card is the first message Slack receives; past
`slack_flood_cap` the warnings of one alertname are one summary message, updated in
place, while every incident stays in the database (the console and `/incident list`).
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import func, select

from bot.chat.models import ChatCard, OutboxMessage
from bot.chat.outbox import OutboxChat
from bot.clock import FrozenClock
from bot.db import Database
from bot.incidents.models import Incident
from bot.sim import SimHandle
from tests.chat.slack_rig import CHANNEL, Chat
from tests.support.fake_slack import FakeSlack
from tests.support.payloads import alert, notification

pytestmark = pytest.mark.timeout(300)

FLOOD = 300
CAP = 10


def _warnings(chat: Chat, count: int, *, alertnames: int = 1) -> None:
    for i in range(count):
        name = "GPUTempHigh" if alertnames == 1 else f"GPUWarning{i % alertnames}"
        body = alert(host=f"gpu-node-{i + 100:03d}", alertname=name, severity="warning")
        assert chat.rig.ingest(notification([body])).opened


def _critical(chat: Chat) -> int:
    result = chat.rig.ingest(notification([alert(host="gpu-node-999", gpu=3)]))
    assert result.opened
    return result.incident


def _posts(slack: FakeSlack) -> list[str]:
    return [str(c.params.get("text", "")) for c in slack.calls() if c.method == "chat.postMessage"]


def test_a_critical_card_is_posted_before_a_flood_of_warnings_that_is_summarised(
    db: Database, clock: FrozenClock, tmp_path: Path, slack: FakeSlack, sim: SimHandle
) -> None:
    chat = Chat(db, clock, tmp_path, slack, sim, slack_flood_cap=CAP)
    _warnings(chat, FLOOD)
    critical = _critical(chat)
    clock.advance(timedelta(seconds=1))

    assert chat.send_all(rounds=2000) == 0

    posts = _posts(slack)
    assert f"INC-{critical}" in posts[0], posts[:3]
    cards = [m for m in chat.cards() if "more warning incidents" not in m.text]
    summaries = [m for m in chat.cards() if "more warning incidents" in m.text]
    assert len(cards) == CAP + 1, [m.text for m in cards]
    (summary,) = summaries
    assert summary.text.startswith(f"{FLOOD - CAP} more warning incidents of GPUTempHigh")

    # The flood goes on: the same message is updated, no card or message is added.
    before = len(slack.messages(CHANNEL))
    for i in range(5):
        body = alert(host=f"gpu-node-{i + 500:03d}", alertname="GPUTempHigh", severity="warning")
        assert chat.rig.ingest(notification([body])).opened
    assert chat.send_all(rounds=200) == 0
    assert len(slack.messages(CHANNEL)) == before
    updates = [
        c for c in slack.calls() if c.method == "chat.update" and c.params["ts"] == summary.ts
    ]
    assert [str(c.params["text"]).split(" of ")[0] for c in updates] == [
        f"{FLOOD - CAP + 5} more warning incidents"
    ]
    with db.session() as session:
        opened = session.scalar(select(func.count()).select_from(Incident))
        folded = session.scalar(
            select(func.count()).select_from(ChatCard).where(ChatCard.summary_id.is_not(None))
        )
        rows = session.scalar(
            select(func.count()).select_from(OutboxMessage).where(OutboxMessage.channel == CHANNEL)
        )
    assert (opened, folded) == (FLOOD + 6, FLOOD - CAP + 5)  # every incident is still there
    assert rows is not None and rows < 4 * (CAP + 1) + 20, "a row was queued per folded incident"


def test_a_critical_card_goes_before_warning_cards_of_many_alertnames(
    db: Database, clock: FrozenClock, tmp_path: Path, slack: FakeSlack, sim: SimHandle
) -> None:
    chat = Chat(db, clock, tmp_path, slack, sim, slack_flood_cap=CAP)
    _warnings(chat, 60, alertnames=60)  # no pattern reaches the cap: 60 cards queued
    critical = _critical(chat)
    clock.advance(timedelta(seconds=1))

    assert chat.send_all(rounds=2000) == 0

    posts = _posts(slack)
    assert f"INC-{critical}" in posts[0], posts[:3]
    assert len([m for m in chat.cards() if m.text.startswith("INC-") or "INC-" in m.text]) >= 61


def test_an_incident_counted_in_a_summary_is_still_paged(
    db: Database, clock: FrozenClock, tmp_path: Path, slack: FakeSlack, sim: SimHandle
) -> None:
    chat = Chat(db, clock, tmp_path, slack, sim, slack_flood_cap=2)
    _warnings(chat, 3)
    assert chat.send_all() == 0
    with db.session() as session:
        folded = session.scalars(select(ChatCard).where(ChatCard.summary_id.is_not(None))).one()
    with db.transaction() as session:
        OutboxChat(CHANNEL).page(
            session, folded.incident_number, "slack:UBOB", "nobody answered", clock.now()
        )

    assert chat.send_all() == 0  # not held back waiting for a card that will never come

    (page,) = [m for m in slack.messages(CHANNEL) if "nobody answered" in m.text]
    assert page.thread_ts is None  # in the channel: the incident has no card thread

"""Who is on call (rotation, override), and the hand-over summary sent once to the
outgoing and the incoming on-call, through the real Slack sender to the fake Slack."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import select

from bot.chat import slack as slack_chat
from bot.chat.slack.sender import SlackSender
from bot.clock import FrozenClock
from bot.db import Database
from bot.errors import ConfigInvalid
from bot.escalation import oncall
from bot.escalation.models import OncallHandover
from bot.escalation_settings import Rotation
from bot.worker import Worker
from tests.escalation.rig import EscRig
from tests.support import fake_slack
from tests.support.fake_slack import FakeSlack

START = datetime(2026, 11, 30, 0, 0, tzinfo=UTC)  # Monday 08:00 Shanghai; Carol on call
ROTATION = {
    "people": ["slack:U0ALICE", "slack:U0BOB", "slack:U0CAROL"],
    "every": "1d",
    "handover": "09:00",
    "start": "2026-11-30",
    "timezone": "Asia/Shanghai",
}


@pytest.fixture
def slack() -> Iterator[FakeSlack]:
    with fake_slack.running() as fake:
        yield fake


@pytest.fixture
def rig(db: Database, slack: FakeSlack) -> EscRig:
    return EscRig(
        db,
        FrozenClock(START),
        escalation={"oncall": ROTATION},
        slack_api_url=slack.api_url,
        slack_bot_token=fake_slack.BOT_TOKEN,
    )


def sender(rig: EscRig) -> SlackSender:
    return SlackSender(rig.db, rig.settings, rig.clock, slack_chat.api(rig.settings))


def send_all(rig: EscRig) -> None:
    out = sender(rig)
    for _ in range(50):
        if not out.run_once():
            rig.clock.advance(timedelta(seconds=1))
            if not out.run_once():
                return


def dms(slack: FakeSlack) -> dict[str, list[str]]:
    """Direct messages by user: the channel each conversations.open gave, read back."""
    opened = {
        call.params["users"]: call for call in slack.calls("conversations.open")
    }  # fmt: skip
    channels = {user: slack._dms[user] for user in opened}
    return {
        user: [m.text or "" for m in slack.messages(channel)] for user, channel in channels.items()
    }


def test_the_rotation_turns_at_the_local_handover_time() -> None:
    rotation = Rotation.model_validate(ROTATION)
    before = oncall.shift(rotation, "UTC", datetime(2026, 12, 1, 0, 59, tzinfo=UTC))
    after = oncall.shift(rotation, "UTC", datetime(2026, 12, 1, 1, 0, tzinfo=UTC))
    assert before.person == "slack:U0ALICE" and after.person == "slack:U0BOB"
    assert after.since == datetime(2026, 12, 1, 1, 0, tzinfo=UTC)
    assert after.until == datetime(2026, 12, 2, 1, 0, tzinfo=UTC)
    # Before the rotation's start it counts backwards: the day before was Carol's.
    assert oncall.shift(rotation, "UTC", START - timedelta(hours=1)).person == "slack:U0CAROL"


def test_a_weekly_rotation_keeps_its_local_time_across_daylight_saving() -> None:
    rotation = Rotation(people=["a", "b"], every=timedelta(days=7),
                        start=datetime(2026, 3, 2).date(), timezone="Europe/Berlin")  # fmt: skip
    # Berlin moves to summer time on 2026-03-29: the hand-over stays at 09:00 local.
    winter = oncall.shift(rotation, "UTC", datetime(2026, 3, 23, 9, 0, tzinfo=UTC))
    summer = oncall.shift(rotation, "UTC", datetime(2026, 3, 30, 8, 0, tzinfo=UTC))
    assert winter.since == datetime(2026, 3, 23, 8, 0, tzinfo=UTC)  # 09:00 CET
    assert summer.since == datetime(2026, 3, 30, 7, 0, tzinfo=UTC)  # 09:00 CEST
    assert (winter.person, summer.person) == ("b", "a")


def test_an_override_holds_until_the_next_handover(rig: EscRig) -> None:
    with rig.db.transaction() as session:
        oncall.take(session, rig.settings, "slack:U0DAVE", "slack:U0ALICE", START)
    with rig.db.session() as session:
        now = oncall.current(session, rig.settings, START + timedelta(minutes=30))
        later = oncall.current(session, rig.settings, START + timedelta(hours=1))
    assert (now.person, now.source) == ("slack:U0DAVE", "override")
    assert now.until == START + timedelta(hours=1)  # 09:00 Shanghai
    assert (later.person, later.source) == ("slack:U0ALICE", "rotation")


def test_an_override_has_bounds(rig: EscRig) -> None:
    with rig.db.transaction() as session, pytest.raises(ConfigInvalid, match="1m to 28d"):
        oncall.take(session, rig.settings, "slack:U0DAVE", "x", START, timedelta(days=30))


def test_the_handover_sends_every_unclosed_incident_to_both_once(
    rig: EscRig, slack: FakeSlack
) -> None:
    first = rig.open("critical", host="gpu-node-02")
    second = rig.open("warning", host="gpu-node-05")
    rig.ack(first, "slack:U0ALICE")
    assert rig.worker.hand_over() == 1  # the first hand-over seen: recorded, not sent
    rig.clock.set(START + timedelta(hours=1, seconds=30))  # 09:00:30 Shanghai: Alice's turn
    assert rig.worker.hand_over() == 1
    other = Worker(rig.db, rig.settings, rig.clock, owner="w2", chat=rig.chat)
    assert other.hand_over() == 0  # another replica: already handed over
    assert rig.worker.hand_over() == 0  # checked again too soon, and nothing new anyway
    send_all(rig)

    messages = dms(slack)
    assert set(messages) == {"U0CAROL", "U0ALICE"}
    for texts in messages.values():
        (text,) = texts
        assert "slack:U0CAROL -> slack:U0ALICE" in text
        assert f"INC-{first} critical acknowledged (slack:U0ALICE" in text
        assert f"INC-{second} warning open (no owner" in text
    with rig.db.session() as session:
        rows = session.scalars(select(OncallHandover).order_by(OncallHandover.at)).all()
    assert [(r.outgoing, r.incoming) for r in rows] == [
        (None, "slack:U0CAROL"),
        ("slack:U0CAROL", "slack:U0ALICE"),
    ]


def test_taking_the_pager_is_a_handover_too(rig: EscRig, slack: FakeSlack) -> None:
    rig.worker.hand_over()
    rig.clock.advance(timedelta(minutes=5))
    with rig.db.transaction() as session:
        oncall.take(session, rig.settings, "slack:U0DAVE", "slack:U0DAVE", rig.clock.now())
    rig.clock.advance(timedelta(seconds=11))
    assert rig.worker.hand_over() == 1
    send_all(rig)
    assert set(dms(slack)) == {"U0CAROL", "U0DAVE"}
    assert "No incident is open" in dms(slack)["U0DAVE"][0]


def test_a_handover_found_long_after_is_recorded_not_sent(rig: EscRig, slack: FakeSlack) -> None:
    rig.worker.hand_over()
    rig.clock.set(START + timedelta(hours=3))  # the bot was down at 09:00 Shanghai
    assert rig.worker.hand_over() == 1
    send_all(rig)
    assert dms(slack) == {}

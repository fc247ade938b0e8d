"""Console users are reachable by escalation: the on-call console user is paged through
the console (no Slack configured) and sees the `#paged` banner until someone
acknowledges; a Slack id stays unreachable without Slack."""

from __future__ import annotations

from datetime import UTC, datetime

import httpx

from bot.chat.console import BothChats, ConsoleChat
from bot.chat.console import chat as console_chat
from bot.clock import FrozenClock
from bot.db import Database
from bot.escalation import oncall
from bot.worker import Worker
from tests.console.rig import browser, click, console_settings, login
from tests.escalation.rig import EscRig
from tests.support import server

ROTATION = {
    "people": ["alice", "bob"],
    "every": "1d",
    "handover": "09:00",
    "start": "2026-11-01",
    "timezone": "UTC",
}
NO_SLACK = {"slack_bot_token": None, "slack_signing_secret": None, "slack_channel": None,
            "slack_role_groups": {}}  # fmt: skip


def console_rig(db: Database, clock: FrozenClock) -> EscRig:
    rig = EscRig(
        db, clock, roles={}, console=console_settings(), escalation={"oncall": ROTATION}, **NO_SLACK
    )
    chat = BothChats(None, ConsoleChat())
    rig.worker = Worker(db, rig.settings, clock, owner="w1", chat=chat)
    return rig


def test_the_on_call_console_user_is_paged_and_sees_the_banner(
    db: Database, clock: FrozenClock
) -> None:
    rig = console_rig(db, clock)
    with db.session() as session:
        on_call = oncall.current(session, rig.settings, clock.now()).person
    assert on_call in ("alice", "bob")
    other = "bob" if on_call == "alice" else "alice"
    number = rig.open("critical")
    rig.at(0)

    first = rig.pages(number)[0]
    assert first.data["chat"] == [on_call]
    assert not any(on_call in text for text in first.data["unreachable"])
    assert rig.chat_pages(number) == [on_call]

    with (
        server.running(rig.settings, db, clock) as url,
        browser(url) as paged,
        browser(url) as bystander,
    ):
        csrf = login(paged, on_call)
        login(bystander, other)
        page = paged.get("/").text
        banner = page.split('<div id="paged"', 1)[1].split("</div>", 1)[0]
        assert "hidden" not in banner.split(">", 1)[0]
        assert f'data-paged="{number}"' in banner and f"INC-{number}" in banner
        assert 'data-paged="' not in bystander.get("/").text
        assert f'data-paged="{number}"' in paged.get(f"/incidents/{number}").text

        assert click(paged, f"/incidents/{number}/ack", csrf).json()["ok"] is True
        assert 'data-paged="' not in paged.get("/").text  # acknowledged: the banner clears


def test_with_nobody_on_call_the_console_users_holding_a_role_are_paged(
    db: Database, clock: FrozenClock
) -> None:
    ladder = {
        "policies": {
            "critical": {
                "levels": [
                    {"after": "0m", "notify": ["oncall"]},
                    {"after": "15m", "notify": ["role:second_line"]},
                ]
            }
        }
    }
    rig = EscRig(db, clock, roles={}, console=console_settings(), escalation=ladder, **NO_SLACK)
    rig.worker = Worker(db, rig.settings, clock, owner="w1", chat=BothChats(None, ConsoleChat()))
    number = rig.open("critical")
    rig.at(0)
    rig.at(15)

    first, second = rig.pages(number)[:2]
    assert first.data["chat"] == ["alice", "bob"]  # no rotation: every responder
    assert second.data["chat"] == ["carol"]  # the second line, a console user only
    assert "mallory" not in first.data["chat"] + second.data["chat"]


def test_a_slack_id_is_unreachable_without_slack_while_console_users_are_reached(
    db: Database, clock: FrozenClock
) -> None:
    rotation = {**ROTATION, "people": ["slack:U0ERIN", "slack:U0ERIN"]}
    rig = EscRig(
        db, clock, roles={}, console=console_settings(), escalation={"oncall": rotation},
        **NO_SLACK,
    )  # fmt: skip
    rig.worker = Worker(db, rig.settings, clock, owner="w1", chat=BothChats(None, ConsoleChat()))
    number = rig.open("critical")
    rig.at(0)
    first = rig.pages(number)[0]
    assert first.data["chat"] == []
    assert "slack:U0ERIN (Slack is not configured)" in first.data["unreachable"]
    assert rig.chat_pages(number) == []


def test_a_message_to_a_console_user_is_shown_to_them_only(
    db: Database, clock: FrozenClock
) -> None:
    rig = console_rig(db, clock)
    chat = BothChats(None, ConsoleChat())
    with db.transaction() as session:
        chat.tell(session, "alice", "You are on call until Tue 09:00 UTC", clock.now())
        chat.post(session, "Weekly digest: 2 follow-ups overdue", clock.now())
    with (
        server.running(rig.settings, db, clock) as url,
        browser(url) as alice,
        browser(url) as bob,
    ):
        login(alice, "alice")
        login(bob, "bob")
        mine: httpx.Response = alice.get("/")
        assert "You are on call until Tue 09:00 UTC" in mine.text
        assert "Weekly digest: 2 follow-ups overdue" in mine.text
        theirs = bob.get("/").text
        assert "You are on call" not in theirs and "Weekly digest" in theirs


def test_the_hand_over_summary_reaches_both_console_users(db: Database, clock: FrozenClock) -> None:
    rig = console_rig(db, clock)
    rig.open("critical")
    assert rig.worker.hand_over() == 1  # the first shift the bot sees: nobody to tell
    with db.session() as session:
        assert console_chat.messages(session, "alice") == []
        before = oncall.current(session, rig.settings, clock.now()).person
    # 2026-11-29 22:05 UTC: the next shift starts at 09:00 UTC.
    clock.set(datetime(2026, 11, 30, 9, 1, tzinfo=UTC))
    assert rig.worker.hand_over() == 1
    with db.session() as session:
        after = oncall.current(session, rig.settings, clock.now()).person
        assert {before, after} == {"alice", "bob"}
        for person in ("alice", "bob"):
            (message,) = console_chat.messages(session, person)
            assert "INC-1" in message[1], message

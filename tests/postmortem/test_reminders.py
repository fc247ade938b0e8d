"""Follow-up reminders (the day before, on the day, a week overdue) and the weekly digest,
sent by workers with a frozen clock, each once across two workers; read back from the
outbox and, through the real Slack sender, from the fake Slack."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta

import pytest
from sqlalchemy import select

from bot.chat import slack as slack_chat
from bot.chat.models import OutboxMessage
from bot.chat.slack.sender import SlackSender
from bot.clock import FrozenClock
from bot.db import Database
from bot.incidents import log
from bot.incidents.models import Incident
from bot.postmortem import digest, followups, reminders
from bot.postmortem.models import Digest, Followup
from bot.worker import Worker
from tests.escalation.rig import CHANNEL, EscRig
from tests.support import fake_slack
from tests.support.fake_slack import FakeSlack

START = datetime(2026, 11, 30, 1, 0, tzinfo=UTC)  # Monday 09:00 in Shanghai
SHANGHAI = {"working_hours": {"timezone": "Asia/Shanghai"}}
BOB, ALICE = "slack:U0BOB", "slack:U0ALICE"


def local(day: date, hour: int = 9, minute: int = 0) -> datetime:
    """`day` at `hour`:`minute` in Shanghai, as UTC."""
    return datetime(day.year, day.month, day.day, hour, minute, tzinfo=UTC) - timedelta(hours=8)


@pytest.fixture
def slack() -> Iterator[FakeSlack]:
    with fake_slack.running() as fake:
        yield fake


@pytest.fixture
def rig(db: Database, slack: FakeSlack) -> EscRig:
    return EscRig(
        db,
        FrozenClock(START),
        escalation=SHANGHAI,
        slack_api_url=slack.api_url,
        slack_bot_token=fake_slack.BOT_TOKEN,
    )


def add(rig: EscRig, number: int, title: str, owner: str | None, deadline: date | None) -> int:
    with rig.db.transaction() as session:
        item = followups.add(
            session, number, title, type="prevent", owner=owner, deadline=deadline,
            link=None, actor=log.Actor.human(ALICE), now=rig.clock.now(),
        )  # fmt: skip
        return item.id


def change(
    rig: EscRig, item: int, *, deadline: date | None = None, status: str | None = None
) -> None:
    with rig.db.transaction() as session:
        if deadline is not None:
            followups.update(
                session, item, actor=log.Actor.human(ALICE), now=rig.clock.now(),
                deadline=deadline,
            )  # fmt: skip
        if status is not None:
            followups.update(
                session, item, actor=log.Actor.human(ALICE), now=rig.clock.now(), status=status
            )  # fmt: skip


def workers(rig: EscRig) -> list[Worker]:
    return [rig.worker, Worker(rig.db, rig.settings, rig.clock, owner="w2", chat=rig.chat)]


def sweep(rig: EscRig, at: datetime, times: int = 3) -> None:
    """Both workers look, a few times a minute apart (the first look is always taken)."""
    rig.clock.set(at)
    for _ in range(times):
        for worker in workers(rig):
            worker.remind()
        rig.clock.advance(timedelta(seconds=61))


def direct(rig: EscRig, *, full: bool = False) -> list[tuple[str, str]]:
    """Queued direct messages: (user, first words or, `full`, the text), in order."""
    with rig.db.session() as session:
        rows = session.scalars(
            select(OutboxMessage).where(OutboxMessage.kind == "message").order_by(OutboxMessage.id)
        )
        return [
            (str(r.payload["dm"]), _words(str(r.payload["text"]), full))
            for r in rows
            if "dm" in r.payload
        ]


def _words(text: str, full: bool) -> str:
    return text if full else text.split(":")[0]


def posts(rig: EscRig) -> list[str]:
    """Queued channel messages (no incident, no DM): the digests."""
    with rig.db.session() as session:
        rows = session.scalars(
            select(OutboxMessage).where(OutboxMessage.kind == "message").order_by(OutboxMessage.id)
        )
        return [str(r.payload["text"]) for r in rows if "dm" not in r.payload]


def send_all(rig: EscRig) -> None:
    out = SlackSender(rig.db, rig.settings, rig.clock, slack_chat.api(rig.settings))
    for _ in range(100):
        if not out.run_once():
            rig.clock.advance(timedelta(seconds=1))
            if not out.run_once():
                return


def dms(slack: FakeSlack) -> dict[str, list[str]]:
    opened = {call.params["users"] for call in slack.calls("conversations.open")}
    return {
        user: [m.text or "" for m in slack.messages(slack._dms[user])] for user in opened
    }  # fmt: skip


def test_the_day_before_the_day_and_a_week_overdue_each_once(rig: EscRig) -> None:
    number = rig.open("warning")
    rig.ack(number, ALICE)  # Alice owns the incident
    item = add(rig, number, "Alert on ECC growth", BOB, date(2026, 12, 2))

    sweep(rig, local(date(2026, 11, 30)))
    sweep(rig, local(date(2026, 12, 1), 8, 50))  # the day before, before working hours
    assert direct(rig) == []
    sweep(rig, local(date(2026, 12, 1)))
    assert direct(rig) == [("U0BOB", "Reminder")]
    sweep(rig, local(date(2026, 12, 1), 17))
    sweep(rig, local(date(2026, 12, 2), 9, 30))  # the day
    for day in range(3, 9):  # a day to six days overdue: nothing new
        sweep(rig, local(date(2026, 12, day), 10), times=1)
    assert direct(rig) == [("U0BOB", "Reminder")] * 2
    sweep(rig, local(date(2026, 12, 9)))  # a week overdue: Bob and the incident's owner
    sweep(rig, local(date(2026, 12, 20)))
    assert direct(rig) == [("U0BOB", "Reminder")] * 2 + [("U0BOB", "Overdue"),
                                                         ("U0ALICE", "Overdue")]  # fmt: skip
    with rig.db.session() as session:
        row = session.get(Followup, item)
        assert row is not None
        assert row.reminded_before == row.reminded_due == row.reminded_overdue == date(2026, 12, 2)


def test_a_moved_deadline_reminds_again(rig: EscRig) -> None:
    number = rig.open("warning")
    item = add(rig, number, "RMA the card", BOB, date(2026, 12, 2))
    sweep(rig, local(date(2026, 12, 1)))
    change(rig, item, deadline=date(2026, 12, 4))
    sweep(rig, local(date(2026, 12, 2)))  # the old deadline: nothing
    assert len(direct(rig)) == 1
    sweep(rig, local(date(2026, 12, 3)))
    sweep(rig, local(date(2026, 12, 4)))
    with rig.db.session() as session:
        texts = [
            str(r.payload["text"])
            for r in session.scalars(select(OutboxMessage).order_by(OutboxMessage.id))
            if "dm" in r.payload
        ]
    assert len(texts) == 3
    assert "due tomorrow, 2026-12-02" in texts[0]
    assert "due tomorrow, 2026-12-04" in texts[1]
    assert "due today, 2026-12-04" in texts[2]


def test_a_deadline_found_passed_reminds_once_saying_how_late(rig: EscRig) -> None:
    number = rig.open("warning")
    add(rig, number, "Add the runbook step", BOB, date(2026, 11, 28))  # added late
    sweep(rig, local(date(2026, 11, 30)))
    sweep(rig, local(date(2026, 12, 1)))
    (text,) = [t for _, t in direct(rig, full=True)]
    assert "was due 2026-11-28, 2d ago" in text


def test_done_cancelled_and_undated_items_are_not_reminded(rig: EscRig) -> None:
    number = rig.open("warning")
    done = add(rig, number, "Fix the SOP", BOB, date(2026, 12, 1))
    cancelled = add(rig, number, "Buy spares", BOB, date(2026, 12, 1))
    add(rig, number, "No deadline yet", BOB, None)
    add(rig, number, "No owner yet", None, date(2026, 12, 1))
    change(rig, done, status="done")
    change(rig, cancelled, status="cancelled")
    for day in (date(2026, 11, 30), date(2026, 12, 1), date(2026, 12, 8)):
        with rig.db.session() as session:
            assert reminders.due_reminders(session, local(day, 12), rig.settings) == []
    sweep(rig, local(date(2026, 12, 1)))
    assert direct(rig) == []


def test_an_owner_not_on_slack_is_logged_not_reached(
    rig: EscRig, caplog: pytest.LogCaptureFixture
) -> None:
    number = rig.open("warning")
    item = add(rig, number, "Write the runbook", "dave", date(2026, 12, 1))
    with caplog.at_level(logging.WARNING, logger="bot.postmortem.reminders"):
        sweep(rig, local(date(2026, 12, 1)))
    assert direct(rig) == []
    warned = [r.getMessage() for r in caplog.records if r.name == "bot.postmortem.reminders"]
    assert len(warned) == 1 and f"follow-up #{item}" in warned[0] and "dave" in warned[0]
    with rig.db.session() as session:
        row = session.get(Followup, item)
        assert row is not None and row.reminded_due == date(2026, 12, 1)


def test_the_reminder_reaches_the_owner_through_slack(rig: EscRig, slack: FakeSlack) -> None:
    number = rig.open("warning", host="gpu-node-02")
    item = add(rig, number, "Alert on ECC growth", BOB, date(2026, 12, 1))
    sweep(rig, local(date(2026, 11, 30), 10))
    send_all(rig)
    messages = dms(slack)
    assert set(messages) == {"U0BOB"}
    (text,) = messages["U0BOB"]
    assert f'follow-up #{item} "Alert on ECC growth" (prevent) of INC-{number}' in text
    with rig.db.session() as session:
        incident = session.get(Incident, number)
        assert incident is not None
        title = incident.title
    assert title in text and "due tomorrow, 2026-12-01" in text
    assert f"runbook-bot followup done {item} --as you" in text


# --- the weekly digest -------------------------------------------------------------------


def test_the_digest_week_is_the_last_full_week_in_local_time(rig: EscRig) -> None:
    week = digest.due_week(local(date(2026, 12, 7), 8, 59), rig.settings)
    assert week.monday == date(2026, 11, 23)
    week = digest.due_week(local(date(2026, 12, 7)), rig.settings)
    assert week.monday == date(2026, 11, 30)
    assert week.starts == datetime(2026, 11, 29, 16, 0, tzinfo=UTC)  # Monday 00:00 Shanghai
    assert week.ends == datetime(2026, 12, 6, 16, 0, tzinfo=UTC)
    assert week.due == local(date(2026, 12, 7))
    friday = rig.configure(escalation=SHANGHAI, digest_day="fri", digest_time="17:30")
    assert digest.due_week(local(date(2026, 12, 11), 17, 29), friday).monday == date(2026, 11, 23)
    assert digest.due_week(local(date(2026, 12, 11), 17, 30), friday).monday == date(2026, 11, 30)


def scripted_week(rig: EscRig) -> list[int]:
    """Three incidents in the week of 2026-11-30 (Shanghai) and one the Sunday before;
    follow-ups open, overdue and closed in and before the week."""
    rig.clock.set(local(date(2026, 11, 29), 23))  # the week before: not counted
    before = rig.open("critical")
    rig.ack(before, ALICE)
    numbers = []
    for day, severity, ack, fix in (
        (date(2026, 11, 30), "critical", 5, 60),
        (date(2026, 12, 1), "warning", 15, 120),
        (date(2026, 12, 2), "critical", 10, None),
    ):
        opened = local(day, 10)
        rig.clock.set(opened)
        number = rig.open(severity)
        rig.clock.set(opened + timedelta(minutes=ack))
        rig.ack(number, ALICE)
        if fix is not None:
            rig.clock.set(opened + timedelta(minutes=fix))
            rig.resolve(number, ALICE)
        numbers.append(number)
    rig.clock.set(local(date(2026, 11, 20)))
    old = add(rig, before, "Closed long ago", ALICE, date(2026, 11, 25))
    change(rig, old, status="done")
    rig.clock.set(local(date(2026, 12, 3)))
    add(rig, numbers[0], "Alert on ECC growth", BOB, date(2026, 12, 4))  # overdue on the 7th
    add(rig, numbers[1], "Fix the SOP", ALICE, date(2026, 12, 20))
    done = add(rig, numbers[2], "RMA the card", BOB, date(2026, 12, 10))
    rig.clock.set(local(date(2026, 12, 4)))
    change(rig, done, status="done")
    return numbers


def test_the_digest_reports_the_week_once_across_workers(rig: EscRig) -> None:
    first, second, third = scripted_week(rig)
    sweep(rig, local(date(2026, 12, 7), 8, 59), times=1)  # the week before: its own digest
    (earlier,) = posts(rig)
    assert "2026-11-23 to 2026-11-29" in earlier and "*Incidents opened:* 1 (1 critical)" in earlier
    sweep(rig, local(date(2026, 12, 7)))
    sweep(rig, local(date(2026, 12, 7), 15))
    sweep(rig, local(date(2026, 12, 13), 23))
    _, text = posts(rig)
    assert text.startswith("*Weekly incident digest, 2026-11-30 to 2026-12-06*\n")
    assert "posted late" not in text
    assert "*Incidents opened:* 3 (2 critical, 1 warning)" in text
    assert "MTTA: mean 10m, median 10m (3 of 3 acknowledged)" in text
    assert "MTTR: mean 1h30m, median 1h30m (2 of 3 resolved)" in text
    assert f"- INC-{first} critical resolved: " in text and "(MTTA 5m, MTTR 1h, " in text
    assert f"- INC-{second} warning resolved: " in text and "(MTTA 15m, MTTR 2h, " in text
    assert f"- INC-{third} critical acknowledged: " in text
    assert "(MTTA 10m, MTTR not resolved, owner slack:U0ALICE)" in text
    assert "*Follow-ups:* 2 open, 1 of them overdue; 1 closed this week" in text
    assert f"INC-{first} Alert on ECC growth (slack:U0BOB, due 2026-12-04, 3d overdue)" in text
    assert f"INC-{second} Fix the SOP (slack:U0ALICE, due 2026-12-20)" in text
    assert f"INC-{third} RMA the card (slack:U0BOB, done; due 2026-12-10)" in text
    assert "Closed long ago" not in text
    with rig.db.session() as session:
        weeks = session.scalars(select(Digest.week).order_by(Digest.week)).all()
    assert weeks == [date(2026, 11, 23), date(2026, 11, 30)]


def test_a_late_digest_is_posted_once_and_says_so(rig: EscRig) -> None:
    scripted_week(rig)
    sweep(rig, local(date(2026, 12, 9), 14))  # the bot was down on Monday
    sweep(rig, local(date(2026, 12, 10), 14))
    (text,) = posts(rig)
    assert "2026-11-30 to 2026-12-06" in text
    assert "(posted late: it was due 2026-12-07 01:00 UTC)" in text


def test_a_quiet_week_posts_nothing(rig: EscRig) -> None:
    sweep(rig, local(date(2026, 12, 7)))
    assert posts(rig) == []
    with rig.db.session() as session:
        assert session.scalars(select(Digest.week)).all() == [date(2026, 11, 30)]


def test_the_digest_reaches_the_channel_through_slack(rig: EscRig, slack: FakeSlack) -> None:
    first, _, _ = scripted_week(rig)
    sweep(rig, local(date(2026, 12, 7)))
    send_all(rig)
    texts = [m.text or "" for m in slack.messages(CHANNEL)]
    digests = [t for t in texts if t.startswith("*Weekly incident digest, 2026-11-30")]
    assert len(digests) == 1
    assert "MTTR: mean 1h30m" in digests[0] and f"INC-{first}" in digests[0]

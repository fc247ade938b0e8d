"""The second line of an incident's escalation (`bot.escalation.second_level`): who level 2
reaches beyond the on-call, when it was paged, and paging it now, through the real ladder,
worker and chat outbox with a frozen clock."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import select

from bot import escalation
from bot.clock import FrozenClock
from bot.db import Database
from bot.errors import TransitionRefused
from bot.escalation.models import PageDelivery
from bot.escalation.second_level import SecondLine
from bot.incidents import log
from tests.escalation.rig import EscRig

ROTATION = {"people": ["slack:U0ALICE", "slack:U0BOB"], "every": "1d", "handover": "09:00"}
ALICE = log.Actor("human", "slack:U0ALICE", "Alice", "slack", "slack:U0ALICE")


@pytest.fixture
def rig(db: Database, clock: FrozenClock) -> EscRig:
    return EscRig(db, clock, escalation={"oncall": ROTATION})


def line(rig: EscRig, number: int) -> SecondLine | None:
    with rig.db.session() as session:
        return escalation.second_line(session, rig.settings, number, rig.clock.now())


def page(rig: EscRig, number: int, why: str = "cordon needs a second approval") -> SecondLine:
    with rig.db.transaction() as session:
        return escalation.page_now(
            session, rig.settings, number, actor=ALICE, now=rig.clock.now(), why=why,
            chat=rig.chat,
        )  # fmt: skip


def test_the_second_line_is_who_level_two_reaches_beyond_the_on_call(rig: EscRig) -> None:
    number = rig.open("critical")
    rig.at(0)
    # Level 2 is oncall + role:second_line: Carol and the SRE user group beyond Alice.
    assert line(rig, number) == SecondLine(("slack:U0CAROL", "user group S0SRE"), 2, None)
    rig.at(15)  # the ladder pages level 2
    second = line(rig, number)
    assert second is not None and second.paged_at == rig.start + timedelta(minutes=15)


def test_paging_now_pages_level_two_and_moves_an_open_incident_up_the_ladder(
    rig: EscRig,
) -> None:
    number = rig.open("critical")
    rig.at(0)
    rig.at(2)
    paged = page(rig, number)

    assert paged.paged_at == rig.start + timedelta(minutes=2)
    # Alice asked: she is not paged again; the rest of level 2 is.
    assert rig.chat_pages(number) == ["slack:U0ALICE", "slack:U0CAROL", "slack:S0SRE"]
    entry = rig.pages(number)[-1]
    assert entry.actor_id == "slack:U0ALICE"
    assert entry.data["kind"] == "now" and entry.data["level"] == 1
    assert entry.data["why"] == "cordon needs a second approval"
    assert entry.data["by"]["channel"] == "slack"
    assert "Alice paged the second line now" in entry.summary
    assert "next page at" in entry.summary
    # The level-2 timer (due at 15) is gone; level 3 comes 30 minutes after the page.
    (pending,) = rig.pending(number)
    assert (pending.level, pending.due_at) == (2, rig.start + timedelta(minutes=32))
    rig.walk(31)
    assert rig.page_minutes(number) == [0, 2]
    rig.at(32)
    assert rig.page_minutes(number) == [0, 2, 32]
    assert line(rig, number) == SecondLine(
        ("slack:U0CAROL", "user group S0SRE"), 2, rig.start + timedelta(minutes=2)
    )


def test_paging_now_an_acknowledged_incident_leaves_its_timeout_alone(rig: EscRig) -> None:
    number = rig.open("critical")
    rig.at(0)
    rig.ack(number)
    before = [(t.kind, t.due_at) for t in rig.pending(number)]
    rig.at(3)
    page(rig, number)
    assert (
        [(t.kind, t.due_at) for t in rig.pending(number)]
        == before
        == [("ack", rig.start + timedelta(minutes=30))]
    )
    assert rig.chat_pages(number)[-2:] == ["slack:U0CAROL", "slack:S0SRE"]
    assert "next page" not in rig.pages(number)[-1].summary


def test_paging_a_vendor_target_queues_it_for_the_pager(db: Database, clock: FrozenClock) -> None:
    policies = {
        "critical": {
            "levels": [
                {"after": "0m", "notify": ["oncall"]},
                {"after": "15m", "notify": ["target:hook"]},
            ]
        }
    }
    targets = {"hook": {"kind": "webhook", "url": "http://127.0.0.1:9/hook"}}
    rig = EscRig(
        db, clock, escalation={"oncall": ROTATION, "policies": policies, "targets": targets}
    )
    number = rig.open("critical")
    assert line(rig, number) == SecondLine(("target hook",), 2, None)
    page(rig, number)
    with db.session() as session:
        rows = session.scalars(select(PageDelivery).where(PageDelivery.incident_number == number))
        assert [(r.target, r.event, r.level, r.timer_id) for r in rows] == [
            ("hook", "trigger", 1, None)
        ]


def test_no_second_level_and_an_incident_that_is_over_are_refused(rig: EscRig) -> None:
    info = rig.open("info")  # info never pages
    assert line(rig, info) is None
    with pytest.raises(TransitionRefused, match="no second level to page; call the person"):
        page(rig, info)

    over = rig.open("critical")
    rig.resolve(over)
    with pytest.raises(TransitionRefused, match="is resolved: nobody needs paging"):
        page(rig, over)
    assert rig.entries(over, "escalation.paged") == []

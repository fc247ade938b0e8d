"""Escalation in chat: the card's escalation line in each of its states, and `/incident
silence` and `/incident oncall` through the real slack-bolt app and the fake Slack.

Incidents open through the real ingest with the frozen escalation policy (as the webhook
does); the real worker fires the timers on the test's frozen clock.
"""

from __future__ import annotations

import json
import logging
import threading
from datetime import timedelta
from pathlib import Path

import httpx
import pytest
from sqlalchemy import select

from bot import escalation
from bot.alerts import ingest
from bot.alerts.payload import WebhookPayload
from bot.chat import cards
from bot.chat.slack import blocks
from bot.chat.slack.app import SlackApp
from bot.chat.slack.sender import SlackSender
from bot.clock import FrozenClock, as_utc
from bot.config import load_settings
from bot.db import Database
from bot.escalation.models import EscalationTimer, IncidentEscalation, OncallOverride
from bot.incidents import log
from bot.incidents import service as incidents
from bot.runbooks import service as runbooks
from bot.sim import SimHandle
from bot.worker import Worker
from tests.chat.slack_rig import Chat
from tests.runbooks.rig import Rig
from tests.support.fake_slack import FakeSlack
from tests.support.payloads import alert, notification

LADDER = {
    "policies": {
        "critical": {
            "levels": [
                {"after": "0m", "notify": ["oncall"]},
                {"after": "15m", "notify": ["oncall", "role:second_line"]},
                {"after": "30m", "notify": ["role:second_line"]},
            ],
            "ack_timeout": "30m",
        },
        "warning": {
            "levels": [{"after": "0m", "notify": ["oncall"]}],
            "working_hours_only": True,
        },
        "info": {},
    },
    "oncall": {
        "people": ["slack:UALICE", "slack:UCAROL"],
        "every": "1d",
        "handover": "09:00",
        "start": "2026-11-02",
        "timezone": "UTC",
    },
}
"""Three levels, no second round; a daily rotation. The clock starts on Sunday 2026-11-29
at 22:05:30 UTC: day 27 of the rotation, so UCAROL is on call until Monday 09:00."""


def _open(rig: Rig, severity: str = "critical", host: str = "gpu-node-01") -> int:
    body = notification([alert(host=host, severity=severity)])
    result = ingest.ingest(
        rig.db,
        WebhookPayload.model_validate(body),
        clock=rig.clock,
        reopen_window=rig.settings.reopen_window,
        escalation=escalation.frozen_policy(rig.settings),
    )
    assert result.opened
    return result.incident


def _line(rig: Rig, number: int) -> str | None:
    """The card's escalation line, as Block Kit renders it (None: the card has none)."""
    with rig.db.session() as session:
        _, rendered = blocks.card(cards.card(session, number, rig.clock.now()))
    lines = [
        element["text"]
        for block in rendered
        if block["type"] == "context"
        for element in block["elements"]
        if "Escalation:" in element["text"]
    ]
    assert len(lines) <= 1
    return lines[0] if lines else None


@pytest.fixture
def rig(db: Database, clock: FrozenClock, tmp_path: Path) -> Rig:
    return Rig(db, clock, tmp_path, escalation=LADDER)


def test_the_card_says_where_escalation_stands_as_the_ladder_climbs(rig: Rig) -> None:
    worker = Worker(rig.db, rig.settings, rig.clock, owner="w1")
    number = _open(rig)
    assert _line(rig, number) == "📟 Escalation: not paged yet · level 1 at 22:05 UTC"

    assert worker.fire() == 1
    assert _line(rig, number) == (
        "📟 Escalation: level 1 of 3 paged 22:05 UTC · next: level 2 at 22:20 UTC"
    )

    rig.clock.advance(timedelta(minutes=15))
    assert worker.fire() == 1
    assert _line(rig, number) == (
        "📟 Escalation: level 2 of 3 paged 22:20 UTC · next: level 3 at 22:50 UTC"
    )

    rig.clock.advance(timedelta(minutes=30))
    assert worker.fire() == 1
    assert _line(rig, number) == "📟 Escalation: ladder exhausted: nobody acknowledged"


def test_the_card_line_after_acknowledge_and_silence_and_none_once_resolved(rig: Rig) -> None:
    worker = Worker(rig.db, rig.settings, rig.clock, owner="w1")
    number = _open(rig)
    worker.fire()
    rig.clock.advance(timedelta(minutes=5))  # 22:10:30
    with rig.db.transaction() as session:
        escalation.acknowledge(session, number, actor=_human("alice"), at=rig.clock.now())
    assert _line(rig, number) == (
        "📟 Escalation: acknowledged · re-page at 22:40 UTC unless resolved"
    )

    with rig.db.transaction() as session:
        escalation.silence(
            session, number, timedelta(hours=3), actor=_human("alice"), at=rig.clock.now()
        )
    assert _line(rig, number) == "📟 Escalation: silenced until Mon 01:10 UTC"

    incidents_resolve(rig, number)
    assert _line(rig, number) is None


def test_a_warning_waits_for_working_hours_and_info_never_escalates(rig: Rig) -> None:
    warning = _open(rig, "warning", host="gpu-node-02")
    info = _open(rig, "info", host="gpu-node-03")

    assert _line(rig, warning) == (
        "📟 Escalation: not paged yet · level 1 at Mon 09:00 UTC (working hours)"
    )
    assert _line(rig, info) is None
    with rig.db.session() as session:
        assert cards.card(session, info, rig.clock.now()).escalation is None


# --- /incident silence and /incident oncall ------------------------------------------------


@pytest.fixture
def woken() -> threading.Event:
    """Set when the Slack app wakes the worker after a decision."""
    return threading.Event()


@pytest.fixture
def chat(
    db: Database,
    clock: FrozenClock,
    tmp_path: Path,
    slack: FakeSlack,
    sim: SimHandle,
    woken: threading.Event,
) -> Chat:
    """The chat rig with the ladder and the rotation above in its settings."""
    chat = Chat(db, clock, tmp_path, slack, sim)
    ladder = load_settings(database_url=db.url, escalation=LADDER).escalation
    settings = chat.settings.model_copy(update={"escalation": ladder})
    chat.settings = chat.rig.settings = settings
    api = chat.app.api
    chat.app = SlackApp(settings, db, clock, api, wake=woken.set)
    chat.sender = SlackSender(db, settings, clock, api)
    return chat


def test_silence_from_slack_stops_paging_and_the_card_says_until_when(
    chat: Chat, client: httpx.Client, woken: threading.Event
) -> None:
    number = _open(chat.rig)
    chat.send_all()

    said = chat.command(client, f"silence INC-{number} 2h")
    assert woken.is_set()

    assert "nobody is paged for 2h, until Mon 00:05 UTC" in said
    with chat.rig.db.session() as session:
        row = session.get(IncidentEscalation, number)
        assert row is not None and row.silenced_until is not None
        assert as_utc(row.silenced_until) == chat.rig.clock.now() + timedelta(hours=2)
        (timer,) = session.scalars(
            select(EscalationTimer).where(
                EscalationTimer.incident_number == number, EscalationTimer.state == "pending"
            )
        ).all()
        assert timer.kind == "resume"
    assert "escalation.silenced" in chat.rig.types(number)
    # Nothing fires while silenced, and the log entry it wrote re-rendered the card.
    assert Worker(chat.rig.db, chat.settings, chat.rig.clock, owner="w1").fire() == 0
    assert chat.send_all() == 0
    card = json.dumps(chat.cards()[0].blocks, ensure_ascii=False)
    assert "Escalation: silenced until Mon 00:05 UTC" in card
    shown = chat.command(client, f"show INC-{number}", user="UMALLORY")
    assert "Escalation: silenced until Mon 00:05 UTC" in shown


def test_silence_refuses_no_role_a_bad_duration_and_an_incident_not_active(
    chat: Chat, client: httpx.Client
) -> None:
    number = _open(chat.rig)

    refused = chat.command(client, f"silence INC-{number} 2h", user="UMALLORY")
    assert "responder role to silence" in refused
    assert chat.rig.log(number)[-1].type == "chat.refused"
    assert "not a duration" in chat.command(client, f"silence INC-{number} 2x")
    assert "how long?" in chat.command(client, f"silence INC-{number}")
    assert "1m to 7d" in chat.command(client, f"silence INC-{number} 30d")
    assert "INC-99 does not exist" in chat.command(client, "silence INC-99 2h")
    incidents_resolve(chat.rig, number)
    assert "nothing to silence" in chat.command(client, f"silence INC-{number} 2h")
    assert "escalation.silenced" not in chat.rig.types(number)


def test_oncall_says_who_is_on_call_and_next_and_a_mention_takes_the_pager(
    chat: Chat, client: httpx.Client, woken: threading.Event
) -> None:
    said = chat.command(client, "oncall", user="UMALLORY")  # reading needs no role
    assert not woken.is_set()
    assert "On call now: <@UCAROL> (rotation, until Mon 2026-11-30 09:00 UTC)" in said
    assert "Next: <@UALICE> (rotation, until Tue 2026-12-01 09:00 UTC)" in said

    took = chat.command(client, "oncall <@UBOB|bob> 12h")
    assert "<@UBOB> is on call until 2026-11-30 10:05 UTC (set by <@UALICE>)" in took
    assert woken.is_set()  # the worker sends the hand-over summary
    with chat.rig.db.session() as session:
        (override,) = session.scalars(select(OncallOverride)).all()
        assert (override.person, override.set_by) == ("slack:UBOB", "slack:UALICE")

    said = chat.command(client, "oncall")
    assert "On call now: <@UBOB> (override, until Mon 2026-11-30 10:05 UTC)" in said
    assert "Next: <@UALICE> (rotation" in said  # Monday's shift, after the override

    until_handover = chat.command(client, "oncall <@UALICE>", user="UBOB")
    assert "<@UALICE> is on call until 2026-11-30 09:00 UTC" in until_handover


def test_oncall_refuses_no_role_and_bad_input(
    chat: Chat, client: httpx.Client, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="bot.chat.slack.app"):
        refused = chat.command(client, "oncall <@UMALLORY>", user="UMALLORY")
    assert "responder role to change who is on call" in refused
    assert "refused /incident oncall from slack:UMALLORY" in caplog.text
    assert "as a mention" in chat.command(client, "oncall bob")
    assert "not a duration" in chat.command(client, "oncall <@UBOB> soon")
    assert "1m to 28d" in chat.command(client, "oncall <@UBOB> 60d")
    with chat.rig.db.session() as session:
        assert session.scalars(select(OncallOverride)).all() == []


def test_help_names_the_new_commands(chat: Chat, client: httpx.Client) -> None:
    said = chat.command(client, "help")
    assert "/incident silence INC-7 2h" in said and "/incident oncall" in said


# --- helpers ------------------------------------------------------------------------------


def _human(name: str) -> log.Actor:
    return log.Actor.human(name)


def incidents_resolve(rig: Rig, number: int) -> None:
    runbooks.resolve(
        rig.db, number, actor=_human("alice"), clock=rig.clock, disposition="GPU 5 reset"
    )
    with rig.db.session() as session:
        assert incidents.get(session, number).status == "resolved"

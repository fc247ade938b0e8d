"""Deciding is responding (issue 21 item 2): approving, skipping, marking done, proposing
again and taking ownership acknowledge an open incident in the same transaction, so
escalation stops paging and the postmortem's time to acknowledge is that decision;
`acknowledge=False` opts out, and a refusal acknowledges nothing. Real ingest (with the
escalation policy frozen), engine, worker and chat decisions."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import select

from bot import escalation
from bot.alerts import ingest
from bot.alerts.payload import WebhookPayload
from bot.chat.decisions import Decisions
from bot.clock import FrozenClock
from bot.db import Database
from bot.errors import ApprovalRefused
from bot.escalation.models import EscalationTimer
from bot.incidents import service as incidents
from bot.incidents.models import Incident
from bot.postmortem import draft
from bot.runbooks import service
from bot.worker import Worker
from tests.runbooks.rig import Rig
from tests.runbooks.test_reproposing import RUNBOOK
from tests.support.payloads import alert, notification


@pytest.fixture
def rig(db: Database, clock: FrozenClock, tmp_path: Path) -> Rig:
    rig = Rig(db, clock, tmp_path)
    rig.write(RUNBOOK)
    return rig


HOSTS = iter(f"gpu-node-{n:02d}" for n in range(1, 100))


def fire(rig: Rig) -> int:
    """An incident with its escalation policy frozen (critical pages at once, then every
    15 minutes) and its first step proposed."""
    result = ingest.ingest(
        rig.db,
        WebhookPayload.model_validate(notification([alert(host=next(HOSTS))])),
        clock=rig.clock,
        reopen_window=rig.settings.reopen_window,
        catalog=rig.catalog(),
        escalation=escalation.frozen_policy(rig.settings),
    )
    Worker(rig.db, rig.settings, rig.clock).propose()
    return result.incident


def incident(rig: Rig, number: int) -> Incident:
    with rig.db.session() as session:
        return incidents.get(session, number)


def pending(rig: Rig, number: int) -> list[str]:
    with rig.db.session() as session:
        stmt = select(EscalationTimer.kind).where(
            EscalationTimer.incident_number == number, EscalationTimer.state == "pending"
        )
        return list(session.scalars(stmt))


def acknowledged(rig: Rig, number: int) -> list[str]:
    return [e.summary for e in rig.log(number) if e.type == "incident.acknowledged"]


def test_marking_a_step_done_acknowledges_and_stops_the_paging(rig: Rig) -> None:
    number = fire(rig)
    assert pending(rig, number) == ["level"]
    rig.clock.advance(timedelta(seconds=65))
    rig.done(number, "check", "alice", note="XID 79 on GPU 3")

    found = incident(rig, number)
    assert (found.status, found.acknowledged_by) == ("acknowledged", "alice")
    assert acknowledged(rig, number) == ["alice acknowledged INC-1 by marking done step check"]
    entry = [e for e in rig.log(number) if e.type == "incident.acknowledged"][0]
    assert (entry.data["decision"], entry.data["step"]) == ("done", "check")
    assert entry.data["by"]["channel"] == "cli"
    # The ladder stopped: the level timer is cancelled; the acknowledgement timeout runs.
    assert pending(rig, number) == ["ack"]
    # The log reads the acknowledgement, then the decision.
    types = rig.types(number)
    assert types.index("incident.acknowledged") + 1 == types.index("step.succeeded")
    with rig.db.session() as session:
        assert draft.build(session, number, rig.clock.now()).tta == 1


def test_approving_skipping_and_proposing_again_acknowledge(rig: Rig) -> None:
    first = fire(rig)
    rig.done(first, "check", "alice", note="looked", acknowledge=False)
    rig.approve(first, "cordon", "bob")
    assert acknowledged(rig, first) == ["bob acknowledged INC-1 by approving step cordon"]

    second = fire(rig)
    rig.done(second, "check", "alice", note="looked", acknowledge=False)
    rig.skip(second, "cordon", "carol", note="owner says wait", acknowledge=True)
    assert acknowledged(rig, second) == ["carol acknowledged INC-2 by skipping step cordon"]

    third = fire(rig)
    rig.done(third, "check", "alice", note="looked", acknowledge=False)
    rig.skip(third, "cordon", "alice", note="owner says wait", acknowledge=False)
    assert incident(rig, third).status == "open"
    service.repropose(
        rig.db, third, "cordon", who=rig.who("bob"), clock=rig.clock, settings=rig.settings
    )
    assert acknowledged(rig, third) == ["bob acknowledged INC-3 by proposing again step cordon"]


def test_saying_otherwise_leaves_the_incident_open_and_paging(rig: Rig) -> None:
    number = fire(rig)
    rig.done(number, "check", "alice", note="looked", acknowledge=False)
    rig.approve(number, "cordon", "alice", acknowledge=False)
    assert incident(rig, number).status == "open"
    assert acknowledged(rig, number) == []
    assert pending(rig, number) == ["level"]


def test_a_refused_decision_acknowledges_nothing(rig: Rig) -> None:
    number = fire(rig)
    with pytest.raises(ApprovalRefused):
        rig.done(number, "check", "mallory", note="looked")  # no role
    with pytest.raises(ApprovalRefused):
        rig.approve(number, "check", "alice")  # a manual step is marked done, not approved
    assert incident(rig, number).status == "open"
    assert acknowledged(rig, number) == []
    assert pending(rig, number) == ["level"]


def test_an_acknowledged_incident_is_not_acknowledged_again(rig: Rig) -> None:
    number = fire(rig)
    rig.done(number, "check", "alice", note="looked")
    rig.approve(number, "cordon", "bob")
    assert acknowledged(rig, number) == ["alice acknowledged INC-1 by marking done step check"]


def test_taking_ownership_acknowledges_unless_told_otherwise(rig: Rig) -> None:
    decisions = Decisions(rig.settings, rig.db, rig.clock)
    first, second = fire(rig), fire(rig)
    assert decisions.own(rig.who("bob", "console"), first) == "bob"
    assert acknowledged(rig, first) == ["bob acknowledged INC-1 by taking ownership"]
    assert incident(rig, first).owner == "bob"

    decisions.own(rig.who("bob", "console"), second, acknowledge=False)
    assert (incident(rig, second).status, incident(rig, second).owner) == ("open", "bob")


def test_decisions_step_and_repropose_pass_acknowledge_through(rig: Rig) -> None:
    decisions = Decisions(rig.settings, rig.db, rig.clock)
    number = fire(rig)
    check = rig.runs(number)["check"]
    with pytest.raises(Exception, match="say what was done, e.g. 'replaced the cable'"):
        decisions.step(rig.who("alice", "console"), check, "done", note=" ")
    decisions.step(rig.who("alice", "console"), check, "done", note="ok", acknowledge=False)
    cordon = rig.runs(number)["cordon"]
    decisions.step(rig.who("alice", "console"), cordon, "skip", note="wait", acknowledge=False)
    assert incident(rig, number).status == "open"
    again = decisions.repropose(rig.who("alice", "console"), rig.runs(number)["cordon"], None)
    assert again.state == "awaiting_approval"
    assert acknowledged(rig, number) == ["alice acknowledged INC-1 by proposing again step cordon"]
    with pytest.raises(Exception, match="you need the responder role to propose steps again"):
        decisions.repropose(rig.who("mallory", "console"), again, None)

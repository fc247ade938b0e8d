"""The decisions of issue 21 over the HTTP API, as the owner of a personal token: skipping
a step others read needs a note, proposing a step again, deciding acknowledges unless the
body says `"acknowledge": false`, taking ownership, and paging the second line now."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from sqlalchemy import select

from bot import escalation
from bot.alerts import ingest
from bot.alerts.payload import WebhookPayload
from bot.chat.console import chat as console_chat
from bot.chat.console.passwords import hash_password
from bot.chat.models import OutboxMessage
from bot.clock import FrozenClock
from bot.db import Database
from bot.incidents import log
from bot.incidents import service as incidents
from bot.runbooks import service as runbooks
from bot.worker import Worker
from tests.runbooks.rig import ROLES, Rig
from tests.runbooks.test_reproposing import RUNBOOK
from tests.support import people
from tests.support.payloads import alert, notification


@pytest.fixture
def rig(db: Database, clock: FrozenClock, tmp_path: Path) -> Rig:
    rig = Rig(db, clock, tmp_path)
    rig.write(RUNBOOK)
    return rig


def fire(rig: Rig, host: str) -> int:
    """An incident whose escalation policy is frozen (the default: level 2 is the on-call
    and the second line), its first step proposed."""
    result = ingest.ingest(
        rig.db,
        WebhookPayload.model_validate(notification([alert(host=host)])),
        clock=rig.clock,
        reopen_window=rig.settings.reopen_window,
        catalog=rig.catalog(),
        escalation=escalation.frozen_policy(rig.settings),
    )
    Worker(rig.db, rig.settings, rig.clock).propose()
    return result.incident


def status(rig: Rig, number: int) -> str:
    with rig.db.session() as session:
        return str(incidents.get(session, number).status)


def test_skip_with_a_reason_propose_again_and_opting_out_of_acknowledging(
    rig: Rig, serve: Callable[..., httpx.Client]
) -> None:
    number = fire(rig, "gpu-node-01")
    client = serve(roles=ROLES)
    alice = people.bearer(rig.db, rig.settings, "alice")
    steps = f"/api/incidents/{number}/steps"

    done = client.post(
        f"{steps}/check/done", json={"note": "XID 79", "acknowledge": False}, headers=alice
    )
    assert done.status_code == 200 and status(rig, number) == "open"
    bare = client.post(f"{steps}/cordon/skip", json={"acknowledge": False}, headers=alice)
    assert bare.status_code == 409
    assert bare.json() == {"error": "skipping cordon also skips drain and tell: say why"}
    skipped = client.post(
        f"{steps}/cordon/skip", json={"note": "job ends soon", "acknowledge": False}, headers=alice
    )
    assert skipped.status_code == 200 and status(rig, number) == "open"

    again = client.post(f"{steps}/cordon/repropose", json={"note": "job killed"}, headers=alice)
    assert again.status_code == 200
    assert again.json() == {
        "incident": f"INC-{number}",
        "step": "cordon",
        "attempt": 3,
        "state": "awaiting_approval",
        "actor": None,
        "summary": again.json()["summary"],
    }
    assert "needs one person before" in again.json()["summary"]
    assert status(rig, number) == "acknowledged"  # proposing again is deciding
    twice = client.post(f"{steps}/cordon/repropose", headers=alice)
    assert twice.status_code == 409
    assert twice.json()["error"] == "step cordon is waiting for a decision now: approve or skip it"
    wrong = client.post(f"{steps}/cordon/repropose", json={"acknowledge": "no"}, headers=alice)
    assert wrong.status_code == 400 and wrong.json()["field"] == "acknowledge"

    listed = client.get(steps).json()["steps"]
    assert {row["step"]: row["dependents"] for row in listed}["cordon"] == ["drain", "tell"]


def test_approving_acknowledges_unless_the_body_says_not(
    rig: Rig, serve: Callable[..., httpx.Client]
) -> None:
    quiet, loud = fire(rig, "gpu-node-01"), fire(rig, "gpu-node-02")
    client = serve(roles=ROLES)
    bob = people.bearer(rig.db, rig.settings, "bob")
    for number in (quiet, loud):
        rig.done(number, "check", "carol", note="looked", acknowledge=False)
    url = "/api/incidents/{}/steps/cordon/approve"
    kept = client.post(url.format(quiet), json={"acknowledge": False}, headers=bob)
    assert kept.status_code == 200 and status(rig, quiet) == "open"
    acked = client.post(url.format(loud), json={}, headers=bob)
    assert acked.status_code == 200 and status(rig, loud) == "acknowledged"
    entry = [e for e in rig.log(loud) if e.type == "incident.acknowledged"][0]
    assert entry.summary == f"bob acknowledged INC-{loud} by approving step cordon"
    assert entry.data["by"]["channel"] == "api"


def test_taking_ownership_and_paging_the_second_line(
    rig: Rig, serve: Callable[..., httpx.Client]
) -> None:
    number = fire(rig, "gpu-node-01")
    # Carol (second line) uses the console, so a page reaches her there.
    carol = {"password_hash": hash_password("pw"), "roles": ["second_line"], "name": "Carol"}
    client = serve(roles={**ROLES, "mallory": []}, console={"users": {"carol": carol}})
    alice = people.bearer(rig.db, rig.settings, "alice")
    mallory = people.bearer(
        rig.db, rig.settings.model_copy(update={"roles": {**ROLES, "mallory": []}}), "mallory"
    )

    kept = client.post(f"/api/incidents/{number}/own", json={"acknowledge": False}, headers=alice)
    assert kept.json() == {"incident": f"INC-{number}", "owner": "alice", "status": "open"}
    owned = client.post(f"/api/incidents/{number}/own", headers=alice)
    assert owned.status_code == 200 and owned.json()["status"] == "acknowledged"

    paged = client.post(
        f"/api/incidents/{number}/page-second", json={"why": "drain needs two"}, headers=alice
    )
    assert paged.status_code == 200
    body = paged.json()
    assert (body["incident"], body["level"]) == (f"INC-{number}", 2)
    assert body["names"] == ["carol"]  # the second line beyond the on-call responders
    assert body["paged_at"] == rig.clock.now().isoformat()
    entry = [e for e in rig.log(number) if e.type == "escalation.paged"][-1]
    assert (entry.data["kind"], entry.data["why"]) == ("now", "drain needs two")
    assert entry.data["by"]["channel"] == "api"
    assert entry.data["chat"] == ["carol"]
    with rig.db.session() as session:
        stored = session.scalars(
            select(OutboxMessage).where(
                OutboxMessage.channel == console_chat.CHANNEL, OutboxMessage.kind == "page"
            )
        ).all()
    assert [(m.incident_number, m.payload["who"]) for m in stored] == [(number, "carol")]
    assert "alice asks for the second line now: drain needs two" in stored[0].payload["text"]

    refused = client.post(f"/api/incidents/{number}/page-second", headers=mallory)
    assert refused.status_code == 409
    assert refused.json()["error"].startswith("mallory has no role and may not page the second")
    taken = client.post(f"/api/incidents/{number}/own", headers=mallory)
    assert taken.status_code == 409 and "may not take ownership of incidents" in taken.text

    over = fire(rig, "gpu-node-09")
    runbooks.resolve(
        rig.db, over, actor=log.Actor.human("alice"), clock=rig.clock, disposition="fixed"
    )
    ended = client.post(f"/api/incidents/{over}/page-second", headers=alice)
    assert ended.status_code == 409
    assert "is resolved: nobody needs paging" in ended.json()["error"]

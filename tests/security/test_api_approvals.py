"""Who decides (issue 19, items 1 and 2). The attack of item 1: with the Alertmanager
webhook token alone, a disruptive step was approved "as alice" and then "as bob", and the
node was power-cycled. The attack of item 2: alice approved as console user `alice`, then in
Slack as `slack:UALICE`, and the step ran with two "approvers". Both now fail: the API
decides only as the owner of a personal token, and the two-person rule counts people."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from bot.clock import FrozenClock
from bot.db import Database
from bot.people import tokens
from bot.sim import SimHandle, running, seed
from tests.chat.slack_rig import CHANNEL, DISRUPTIVE, GROUPS, Chat
from tests.console.rig import browser, click, console_settings, login
from tests.runbooks.rig import Rig
from tests.sim.waiting import TIME_SCALE
from tests.support import fake_slack, people, server

TOKEN = "api-t0ken"
POWER_FIRST = """\
    id: node-down
    title: t
    version: 1
    match: {alerts: [GPUXIDError]}
    steps:
      - id: power
        title: Power cycle
        action: bmc.power_cycle
        with: {node: "{{ labels.Hostname }}"}
"""
PEOPLE = {
    "alice": {"name": "Alice Chen", "slack": "UALICE"},
    "bob": {"name": "Bob Li", "slack": "UBOB"},
}


def test_the_webhook_token_decides_nothing_and_a_token_decides_only_as_its_owner(
    db: Database, clock: FrozenClock, tmp_path: Path
) -> None:
    rig = Rig(db, clock, tmp_path, webhook_token=TOKEN)
    rig.write(POWER_FIRST)
    number = rig.fire()
    url = f"/api/incidents/INC-{number}/steps/power/approve"
    webhook = {"Authorization": f"Bearer {TOKEN}"}
    alice = people.token(db, rig.settings, "alice")
    revoked = people.token(db, rig.settings, "bob")
    with db.transaction() as session:
        mine = [t for t in tokens.listed(session) if t.person == "bob"][0]
        tokens.revoke(session, token_id=mine.id, now=clock.now())

    with (
        server.running(rig.settings, db, clock, catalog=rig.catalog()) as base,
        httpx.Client(base_url=base, timeout=10) as client,
    ):
        # The attack of item 1, step by step: each is refused.
        as_alice = client.post(url, json={"as": "alice"}, headers=webhook)
        as_bob = client.post(url, json={"as": "bob"}, headers=webhook)
        anonymous = client.post(url, json={"as": "bob"})
        # A real token: it decides as its owner and cannot name anyone else.
        named = client.post(url, json={"as": "bob"}, headers={"Authorization": f"Bearer {alice}"})
        first = client.post(url, json={}, headers={"Authorization": f"Bearer {alice}"})
        again = client.post(url, json={}, headers={"Authorization": f"Bearer {alice}"})
        gone = client.post(url, json={}, headers={"Authorization": f"Bearer {revoked}"})
        forged = client.post(url, json={}, headers={"Authorization": f"Bearer {alice[:-2]}xx"})
        huge = client.post(url, json={}, headers={"Authorization": "Bearer rbt_" + "a" * 5000})
        webhook_still = client.post(
            "/webhooks/alertmanager",
            content=b"{}",
            headers={**webhook, "Content-Type": "application/json"},
        )

    assert [r.status_code for r in (as_alice, as_bob, anonymous)] == [401, 401, 401]
    assert "personal API token" in as_alice.json()["error"]
    assert "runbook-bot tokens create --person" in as_bob.json()["error"]
    assert named.status_code == 400 and named.json()["field"] == "as"
    assert (first.status_code, first.json()["state"]) == (200, "awaiting_approval")
    assert again.status_code == 409 and "already approved" in again.json()["error"]
    assert [r.status_code for r in (gone, forged, huge)] == [401, 401, 401]
    assert webhook_still.status_code == 400  # the webhook token still opens the webhook
    assert rig.approvals(number, "power") == ["alice"]
    assert rig.runs(number)["power"].state == "awaiting_approval"
    approval = [e for e in rig.log(number) if e.type == "step.approval"][-1]
    assert approval.data["by"]["person"] == "alice" and approval.data["by"]["channel"] == "api"


@pytest.fixture
def sim() -> Iterator[SimHandle]:
    with running(seed(grace_seconds=5, startup_seconds=2), time_scale=TIME_SCALE) as handle:
        yield handle


def test_one_person_through_the_console_and_slack_is_one_approver(
    db: Database, clock: FrozenClock, tmp_path: Path, sim: SimHandle
) -> None:
    with fake_slack.running(usergroups=GROUPS) as slack:
        chat = Chat(db, clock, tmp_path, slack, sim, people=PEOPLE, console=console_settings())
        chat.rig.write(DISRUPTIVE)
        number = chat.rig.fire(host="gpu-node-01")
        chat.work()
        chat.send_all()
        run = chat.rig.runs(number)["drain"].id
        with server.running(chat.settings, db, clock, slack=chat.app) as url:
            console = browser(url)
            csrf = login(console, "alice")
            in_console = click(
                console, f"/incidents/{number}/steps/{run}/approve", csrf, confirmed="1"
            )
            with httpx.Client(base_url=url, timeout=10) as http:
                in_slack = chat.click(http, "step.approve", run, "UALICE")
                after = chat.rig.states(number)["drain"]
                chat.send_all()
                refused = json.dumps(chat.slack.ephemerals(CHANNEL))
                by_bob = chat.click(http, "step.approve", run, "UBOB")
            console.close()

    assert in_console.status_code == 200 and in_console.json()["ok"] is True
    assert in_slack.status_code == 200
    assert after == "awaiting_approval"
    assert "already approved" in refused and "(alice, through console)" in refused
    assert "one person counts once" in refused
    assert by_bob.status_code == 200
    assert chat.rig.approvals(number, "drain") == ["alice", "bob"]
    approved = [e for e in chat.rig.log(number) if e.type == "step.approved"][-1]
    assert approved.data["approvers"] == ["alice", "bob"]
    assert approved.data["channels"] == ["console", "slack"]
    assert approved.data["by"] == {"person": "bob", "channel": "slack", "via": "slack:UBOB"}

"""Skipping a step others need asks why and names what it also skips; a skipped step can
be proposed again; a first approver of a two-person step reads that it waits for one
more, with the second line named, and pages them from the card; the second person's
list says the decision waits for them."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import httpx

from bot import escalation
from bot.alerts import ingest
from bot.alerts.payload import WebhookPayload
from bot.clock import FrozenClock
from bot.db import Database
from bot.worker import Worker
from tests.chat.slack_rig import DISRUPTIVE
from tests.console.rig import ConsoleRig, click, login
from tests.console.test_layout import LAYOUT, block, text_of
from tests.support.payloads import alert, notification

Browsers = Callable[[], httpx.Client]
LADDER = {
    "policies": {
        "critical": {
            "levels": [
                {"after": "0m", "notify": ["role:responder"]},
                {"after": "15m", "notify": ["role:second_line"]},
            ]
        }
    }
}
CORDON = """\
    id: gpu-xid
    title: Single GPU fault
    version: 1
    match: {alerts: [GPUXIDError]}
    steps:
      - {id: cordon, title: Cordon, action: k8s.cordon, with: {node: "{{ labels.Hostname }}"}}
"""
NO_SLACK = {"slack_bot_token": None, "slack_signing_secret": None, "slack_channel": None,
            "slack_role_groups": {}}  # fmt: skip


def test_skipping_a_step_others_need_asks_why_and_lists_them(
    rig: ConsoleRig, browsers: Browsers
) -> None:
    rig.write(LAYOUT)
    number = rig.fire()
    client = browsers()
    csrf = login(client, "alice")
    run = rig.runs(number)["cordon"].id
    decision = block(client.get(f"/incidents/{number}").text, '<section id="decision"')
    form = block(decision, f'<form method="post" action="/incidents/{number}/steps/{run}/skip"')
    assert 'id="skip-' in form and 'name="note" required' in form
    assert text_of(form).startswith("Skipping Cordon the node also skips: Drain the node")
    assert 'data-action="skip" data-reveal="skip-' in decision  # Skip… opens the form

    path = f"/incidents/{number}/steps/{run}/skip"
    before = rig.types(number)
    empty = click(client, path, csrf, note="  ")
    assert empty.status_code == 409
    assert empty.json()["flash"] == "skipping cordon also skips drain: say why"
    assert rig.states(number)["cordon"] == "awaiting_approval"
    assert rig.types(number) == before  # refused before anything was written
    plain = client.post(path, data={"csrf": csrf, "at": "decision"})  # no script
    page = client.get(plain.headers["location"]).text
    assert "also skips drain: say why" in block(page, '<section id="decision"')

    done = click(client, path, csrf, note="node already out of service")
    assert done.json() == {"ok": True, "flash": f"INC-{number} cordon: skipped"}
    skipped = [e for e in rig.log(number) if e.type == "step.skipped" and e.actor_id == "alice"]
    assert "node already out of service" in skipped[-1].summary
    assert "drain" in skipped[-1].summary


def test_a_step_nobody_depends_on_is_skipped_with_one_press(
    rig: ConsoleRig, browsers: Browsers
) -> None:
    rig.write(CORDON)
    number = rig.fire()
    client = browsers()
    csrf = login(client, "alice")
    run = rig.runs(number)["cordon"].id
    decision = block(client.get(f"/incidents/{number}").text, '<section id="decision"')
    assert 'data-reveal="skip-' not in decision and 'name="note"' not in decision
    assert click(client, f"/incidents/{number}/steps/{run}/skip", csrf).json()["ok"] is True
    assert rig.states(number)["cordon"] == "skipped"


def test_a_skipped_step_is_proposed_again_and_waits_for_a_decision(
    rig: ConsoleRig, browsers: Browsers
) -> None:
    rig.write(LAYOUT)
    number = rig.fire()
    client, viewer = browsers(), browsers()
    csrf, viewer_csrf = login(client, "bob"), login(viewer, "mallory")
    first = rig.runs(number)["cordon"].id
    skip = click(client, f"/incidents/{number}/steps/{first}/skip", csrf, note="looked fine")
    assert skip.json()["ok"] is True

    folded = block(client.get(f"/incidents/{number}").text, '<details id="folded"')
    again = f"/incidents/{number}/steps/{first}/repropose"
    assert f'action="{again}"' in folded and 'data-action="repropose"' in folded
    assert "data-action=" not in block(
        viewer.get(f"/incidents/{number}").text, '<section id="card"'
    )
    refused = click(viewer, again, viewer_csrf)
    assert refused.status_code == 403

    answer = click(client, again, csrf)
    assert answer.json() == {
        "ok": True,
        "flash": f"INC-{number} cordon: proposed again; it waits for a decision",
    }
    cordon = rig.runs(number)["cordon"]
    assert cordon.attempt > 1 and cordon.state == "awaiting_approval"
    assert "step.reproposed" in rig.types(number)
    decision = block(client.get(f"/incidents/{number}").text, '<section id="decision"')
    assert 'data-step="cordon"' in decision
    assert f'/steps/{cordon.id}/approve"' in decision
    twice = click(client, again, csrf)
    assert twice.status_code == 409 and "waiting" in twice.json()["flash"]


def open_paging(rig: ConsoleRig) -> int:
    """An incident under the two-level ladder, its first steps proposed."""
    body = notification([alert(host="gpu-node-02")])
    result = ingest.ingest(
        rig.db, WebhookPayload.model_validate(body), clock=rig.clock,
        reopen_window=rig.settings.reopen_window, catalog=rig.catalog(),
        escalation=escalation.frozen_policy(rig.settings),
    )  # fmt: skip
    Worker(rig.db, rig.settings, rig.clock).propose()
    return result.incident


def test_the_first_approver_pages_the_second_line_and_the_second_sees_it_waits_for_them(
    db: Database, clock: FrozenClock, tmp_path: Path
) -> None:
    rig = ConsoleRig(db, clock, tmp_path, escalation=LADDER, **NO_SLACK)
    rig.write(DISRUPTIVE)
    number = open_paging(rig)
    with (
        rig.serving() as url,
        httpx.Client(base_url=url) as alice,
        httpx.Client(base_url=url) as carol,
    ):
        csrf = login(alice, "alice")
        login(carol, "carol")
        run = rig.runs(number)["drain"].id
        approve = f"/incidents/{number}/steps/{run}/approve"
        assert click(alice, approve, csrf, confirmed="1").json()["ok"] is True

        decision = block(alice.get(f"/incidents/{number}").text, '<section id="decision"')
        assert "Waiting for one more person" in decision
        assert "approved by you, waiting for one more (second line: Carol, not paged yet)" in (
            text_of(decision)
        )
        assert 'data-action="page-second"' in decision and 'data-action="approve"' not in decision
        row = carol.get("/").text.split(f'data-incident="{number}"', 1)[1].split("</tr>", 1)[0]
        assert 'data-waiting="you"' in row and "one more approval waits for you" in row

        rig.clock.advance(timedelta(seconds=20))  # alice waits a little, then pages
        paged = click(alice, f"/incidents/{number}/page-second", csrf)
        assert paged.json() == {
            "ok": True,
            "flash": f"INC-{number}: paged the second line (Carol) now",
        }
        now = [e for e in rig.log(number) if e.type == "escalation.paged"][-1]
        assert now.data["kind"] == "now" and now.actor_id == "alice"
        decision = text_of(block(alice.get(f"/incidents/{number}").text, '<section id="decision"'))
        assert re.search(r"second line: Carol, paged \d\d:\d\d:\d\d UTC\)", decision), decision
        banner = block(carol.get("/").text, '<div id="paged"')
        assert f'data-paged="{number}"' in banner  # paged after alice's approval acknowledged it

        carol_csrf = re.search(r'data-csrf="([^"]+)"', carol.get("/").text)
        assert carol_csrf is not None
        second = click(carol, approve, carol_csrf.group(1), confirmed="1")
        assert second.json()["ok"] is True
        assert rig.approvals(number, "drain") == ["alice", "carol"]

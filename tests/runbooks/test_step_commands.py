"""Steps over the HTTP API and the CLI, until chat buttons land."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from bot import cli
from bot.clock import FrozenClock
from bot.db import Database
from tests.runbooks.rig import ROLES, Rig

TOKEN = "s3cret-token"
RUNBOOK = """\
    id: gpu-xid
    title: Single GPU fault
    version: 1
    match: {alerts: [GPUXIDError]}
    steps:
      - {id: call, title: Call the vendor, manual: call them}
      - id: cordon
        title: Cordon the node
        action: k8s.cordon
        with: {node: "{{ labels.Hostname }}", reason: "XID on {{ labels.Hostname }}"}
"""


@pytest.fixture
def rig(db: Database, clock: FrozenClock, tmp_path: Path) -> Rig:
    rig = Rig(db, clock, tmp_path)
    rig.write(RUNBOOK)
    return rig


def test_the_api_lists_steps_and_approves_with_the_webhook_token(
    rig: Rig, serve: Callable[..., httpx.Client]
) -> None:
    number = rig.fire()
    rig.done(number, "call", "carol", note="called")
    client = serve(roles=ROLES, webhook_token=TOKEN)
    auth = {"Authorization": f"Bearer {TOKEN}"}

    listed = client.get(f"/api/incidents/INC-{number}/steps")
    assert listed.status_code == 200
    body = listed.json()
    assert body["runbook"] == "gpu-xid v1"
    steps = {s["step"]: s for s in body["steps"]}
    assert steps["call"]["state"] == "succeeded"
    assert steps["cordon"]["state"] == "awaiting_approval"
    assert steps["cordon"]["params"] == {"node": "gpu-node-01", "reason": "XID on gpu-node-01"}
    url = f"/api/incidents/{number}/steps/cordon/approve"
    good = {"as": "alice", "params_hash": steps["cordon"]["params_hash"]}

    assert client.post(url, json=good).status_code == 401
    assert client.post(url, json={"as": ""}, headers=auth).status_code == 400
    stale = client.post(url, json={**good, "params_hash": "0" * 64}, headers=auth)
    assert stale.status_code == 409
    assert "the parameters changed since you saw them" in stale.json()["error"]
    unknown = client.post(f"/api/incidents/{number}/steps/nope/approve", json=good, headers=auth)
    assert unknown.status_code == 404 and "has no step 'nope'" in unknown.json()["error"]

    approved = client.post(url, json=good, headers=auth)
    assert approved.status_code == 200
    assert approved.json()["state"] == "approved" and approved.json()["actor"] == "alice"
    again = client.post(url, json={"as": "bob"}, headers=auth)
    assert again.status_code == 409 and "already approved by alice" in again.json()["error"]
    assert rig.approvals(number, "cordon") == ["alice"]


def test_the_cli_shows_approves_and_marks_steps_done(
    rig: Rig, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    number = rig.fire()
    monkeypatch.setenv("RUNBOOK_BOT_DATABASE_URL", rig.db.url)
    monkeypatch.setenv("RUNBOOK_BOT_ROLES", '{"alice": ["responder"]}')

    assert cli.main(["done", f"INC-{number}", "call", "--as", "alice", "--note", "called"]) == 0
    assert cli.main(["approve", f"INC-{number}", "cordon", "--as", "mallory"]) == 1
    assert cli.main(["approve", f"INC-{number}", "cordon", "--as", "alice"]) == 0
    assert cli.main(["steps", f"INC-{number}"]) == 0
    out, err = capsys.readouterr()
    assert "mallory has no role" in err
    lines = out.splitlines()
    assert lines[-4] == f"INC-{number} follows gpu-xid v1"
    assert lines[-3].split() == ["STEP", "STATE", "ACTION", "APPROVALS", "SUMMARY"]
    assert lines[-2].split()[:4] == ["call", "succeeded", "manual", "-"]
    assert lines[-1].split()[:4] == ["cordon", "approved", "k8s.cordon", "1/1"]


def test_the_cli_says_when_an_incident_follows_no_runbook(
    rig: Rig, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    number = rig.fire(alertname="NodeDown")
    monkeypatch.setenv("RUNBOOK_BOT_DATABASE_URL", rig.db.url)

    assert cli.main(["steps", f"INC-{number}"]) == 1
    assert cli.main(["skip", f"INC-{number}", "cordon", "--as", "alice"]) == 1

    err = capsys.readouterr().err.splitlines()
    assert err == [
        f"runbook-bot: INC-{number} follows no runbook",
        "runbook-bot: alice has no role that may decide on steps; an admin adds them to the "
        "`roles` setting (responder, second_line or admin)",
    ]


def test_the_api_skips_marks_done_and_cancels_with_the_webhook_token(
    rig: Rig, serve: Callable[..., httpx.Client]
) -> None:
    number, other = rig.fire(), rig.fire()
    client = serve(roles=ROLES, webhook_token=TOKEN)
    auth = {"Authorization": f"Bearer {TOKEN}"}
    steps = f"/api/incidents/{number}/steps"

    assert client.post(f"{steps}/call/done", json={"as": "alice", "note": "x"}).status_code == 401
    blank = client.post(f"{steps}/call/done", json={"as": "alice", "note": " "}, headers=auth)
    assert blank.status_code == 400 and blank.json()["field"] == "note"
    nobody = client.post(f"{steps}/call/skip", json={"as": "mallory"}, headers=auth)
    assert nobody.status_code == 409 and "mallory has no role" in nobody.json()["error"]

    done = client.post(f"{steps}/call/done", json={"as": "alice", "note": "called"}, headers=auth)
    assert done.status_code == 200
    assert done.json() == {
        "incident": f"INC-{number}",
        "step": "call",
        "attempt": 1,
        "state": "succeeded",
        "actor": "alice",
        "summary": "called",
    }
    cancelled = client.post(
        f"{steps}/cordon/cancel", json={"as": "bob", "note": "not needed"}, headers=auth
    )
    assert cancelled.status_code == 200 and cancelled.json()["state"] == "cancelled"
    again = client.post(f"{steps}/cordon/cancel", json={"as": "bob"}, headers=auth)
    assert again.status_code == 409 and "it already ended (cancelled)" in again.json()["error"]
    skipped = client.post(
        f"/api/incidents/{other}/steps/call/skip", json={"as": "carol"}, headers=auth
    )
    assert skipped.status_code == 200 and skipped.json()["summary"] == "skipped by carol"

    assert rig.states(number) == {"call": "succeeded", "cordon": "cancelled"}
    assert rig.states(other) == {"call": "skipped", "cordon": "awaiting_approval"}
    assert rig.types(number)[-2:] == ["step.cancelled", "runbook.stopped"]


def test_the_decision_endpoints_are_open_without_a_webhook_token_like_approve(
    rig: Rig, serve: Callable[..., httpx.Client]
) -> None:
    number = rig.fire()
    client = serve(roles=ROLES)

    skipped = client.post(f"/api/incidents/{number}/steps/call/skip", json={"as": "alice"})

    assert skipped.status_code == 200 and skipped.json()["state"] == "skipped"
    assert client.post(f"/api/incidents/{number}/steps/x/cancel", json=[]).status_code == 400

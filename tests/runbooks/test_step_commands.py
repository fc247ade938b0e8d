"""Steps over the HTTP API (as the owner of a personal token) and the CLI (as `--as`)."""

from __future__ import annotations

import getpass
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from bot import cli
from bot.clock import FrozenClock
from bot.db import Database
from tests.runbooks.rig import ROLES, Rig
from tests.support import people

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


def test_the_api_lists_steps_and_approves_as_the_owner_of_a_personal_token(
    rig: Rig, serve: Callable[..., httpx.Client]
) -> None:
    number = rig.fire()
    rig.done(number, "call", "carol", note="called")
    client = serve(roles=ROLES, webhook_token=TOKEN)
    alice = people.bearer(rig.db, rig.settings, "alice")
    bob = people.bearer(rig.db, rig.settings, "bob")

    listed = client.get(f"/api/incidents/INC-{number}/steps")
    assert listed.status_code == 200
    body = listed.json()
    assert body["runbook"] == "gpu-xid v1"
    steps = {s["step"]: s for s in body["steps"]}
    assert steps["call"]["state"] == "succeeded"
    assert steps["cordon"]["state"] == "awaiting_approval"
    assert steps["cordon"]["params"] == {"node": "gpu-node-01", "reason": "XID on gpu-node-01"}
    url = f"/api/incidents/{number}/steps/cordon/approve"
    good = {"params_hash": steps["cordon"]["params_hash"]}

    assert client.post(url, json=good).status_code == 401
    webhook = client.post(url, json=good, headers={"Authorization": f"Bearer {TOKEN}"})
    assert webhook.status_code == 401 and "personal API token" in webhook.json()["error"]
    named = client.post(url, json={"as": "bob", **good}, headers=alice)
    assert named.status_code == 400 and named.json()["field"] == "as"
    assert "the API token decides who you are (alice)" in named.json()["error"]
    stale = client.post(url, json={"params_hash": "0" * 64}, headers=alice)
    assert stale.status_code == 409
    assert "the parameters changed since you saw them" in stale.json()["error"]
    unknown = client.post(f"/api/incidents/{number}/steps/nope/approve", json=good, headers=alice)
    assert unknown.status_code == 404 and "has no step 'nope'" in unknown.json()["error"]

    approved = client.post(url, json=good, headers=alice)
    assert approved.status_code == 200
    assert approved.json()["state"] == "approved" and approved.json()["actor"] == "alice"
    again = client.post(url, json={}, headers=bob)
    assert again.status_code == 409 and "already approved by alice" in again.json()["error"]
    assert rig.approvals(number, "cordon") == ["alice"]
    approval = [e for e in rig.log(number) if e.type == "step.approved"][-1]
    assert approval.data["by"]["person"] == "alice"
    assert approval.data["by"]["channel"] == "api"
    assert approval.data["by"]["via"].startswith("token ")


def test_the_cli_shows_approves_and_marks_steps_done(
    rig: Rig, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    number = rig.fire()
    monkeypatch.setenv("RUNBOOK_BOT_DATABASE_URL", rig.db.url)
    monkeypatch.setenv("RUNBOOK_BOT_ROLES", '{"alice": ["responder"], "mallory": []}')

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
    approved = [e for e in rig.log(number) if e.type == "step.approved"][-1]
    assert approved.data["by"] == {
        "person": "alice",
        "channel": "cli",
        "via": f"os:{getpass.getuser()}",
    }


def test_the_clis_as_must_name_a_known_person(
    rig: Rig, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    number = rig.fire()
    monkeypatch.setenv("RUNBOOK_BOT_DATABASE_URL", rig.db.url)
    monkeypatch.setenv("RUNBOOK_BOT_PEOPLE", '{"alice": {"roles": ["responder"]}}')
    monkeypatch.setenv("RUNBOOK_BOT_ROLES", '{"bob": ["responder"]}')
    before = rig.types(number)

    code = cli.main(["done", f"INC-{number}", "call", "--as", "mallory", "--note", "x"])

    assert code == 2
    assert capsys.readouterr().err == (
        "runbook-bot: --as 'mallory' is not a person in the settings; known: alice, bob\n"
    )
    assert rig.types(number) == before


def test_the_cli_says_when_an_incident_follows_no_runbook(
    rig: Rig, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    number = rig.fire(alertname="NodeDown")
    monkeypatch.setenv("RUNBOOK_BOT_DATABASE_URL", rig.db.url)
    monkeypatch.setenv("RUNBOOK_BOT_PEOPLE", '{"alice": {}}')

    assert cli.main(["steps", f"INC-{number}"]) == 1
    assert cli.main(["skip", f"INC-{number}", "cordon", "--as", "alice"]) == 1

    err = capsys.readouterr().err.splitlines()
    assert err == [
        f"runbook-bot: INC-{number} follows no runbook",
        "runbook-bot: alice has no role that may decide on steps; an admin gives them one "
        "in the `people` setting (responder, second_line or admin)",
    ]


def test_the_api_skips_marks_done_and_cancels_as_the_tokens_owner(
    rig: Rig, serve: Callable[..., httpx.Client]
) -> None:
    number, other = rig.fire(), rig.fire()
    client = serve(roles=ROLES, webhook_token=TOKEN)
    alice = people.bearer(rig.db, rig.settings, "alice")
    bob = people.bearer(rig.db, rig.settings, "bob")
    carol = people.bearer(rig.db, rig.settings, "carol")
    mallory = people.bearer(
        rig.db, rig.settings.model_copy(update={"roles": {"mallory": []}}), "mallory"
    )
    steps = f"/api/incidents/{number}/steps"

    assert client.post(f"{steps}/call/done", json={"note": "x"}).status_code == 401
    blank = client.post(f"{steps}/call/done", json={"note": " "}, headers=alice)
    assert blank.status_code == 400 and blank.json()["field"] == "note"
    nobody = client.post(f"{steps}/call/skip", json={}, headers=mallory)
    assert nobody.status_code == 401 and "no longer in the settings" in nobody.json()["error"]

    done = client.post(f"{steps}/call/done", json={"note": "called"}, headers=alice)
    assert done.status_code == 200
    assert done.json() == {
        "incident": f"INC-{number}",
        "step": "call",
        "attempt": 1,
        "state": "succeeded",
        "actor": "alice",
        "summary": "called",
    }
    cancelled = client.post(f"{steps}/cordon/cancel", json={"note": "not needed"}, headers=bob)
    assert cancelled.status_code == 200 and cancelled.json()["state"] == "cancelled"
    again = client.post(f"{steps}/cordon/cancel", headers=bob)
    assert again.status_code == 409 and "it already ended (cancelled)" in again.json()["error"]
    skipped = client.post(f"/api/incidents/{other}/steps/call/skip", json={}, headers=carol)
    assert skipped.status_code == 200 and skipped.json()["summary"] == "skipped by carol"

    assert rig.states(number) == {"call": "succeeded", "cordon": "cancelled"}
    assert rig.states(other) == {"call": "skipped", "cordon": "awaiting_approval"}
    assert rig.types(number)[-2:] == ["step.cancelled", "runbook.stopped"]


def test_the_decision_endpoints_answer_401_without_a_token_even_with_no_webhook_token(
    rig: Rig, serve: Callable[..., httpx.Client]
) -> None:
    number = rig.fire()
    client = serve(roles=ROLES)
    alice = people.bearer(rig.db, rig.settings, "alice")

    refused = client.post(f"/api/incidents/{number}/steps/call/skip", json={})
    skipped = client.post(f"/api/incidents/{number}/steps/call/skip", json={}, headers=alice)

    assert refused.status_code == 401 and refused.headers["www-authenticate"].startswith("Bearer")
    assert skipped.status_code == 200 and skipped.json()["state"] == "skipped"
    assert (
        client.post(f"/api/incidents/{number}/steps/x/cancel", json=[], headers=alice).status_code
        == 400
    )
    assert rig.states(number)["call"] == "skipped"


def test_the_cli_skips_with_a_reason_proposes_again_and_decides_without_acknowledging(
    db: Database,
    clock: FrozenClock,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from tests.runbooks.test_reproposing import RUNBOOK as CHAIN

    rig = Rig(db, clock, tmp_path)
    rig.write(CHAIN)
    number = rig.fire()
    monkeypatch.setenv("RUNBOOK_BOT_DATABASE_URL", rig.db.url)
    monkeypatch.setenv("RUNBOOK_BOT_ROLES", '{"alice": ["responder"]}')
    inc = f"INC-{number}"

    assert cli.main(["done", inc, "check", "--as", "alice", "--note", "XID", "--no-ack"]) == 0
    assert cli.main(["skip", inc, "cordon", "--as", "alice", "--no-ack"]) == 1
    _, err = capsys.readouterr()
    assert "skipping cordon also skips drain and tell: say why" in err
    assert cli.main(["skip", inc, "cordon", "--as", "alice", "--note", "later", "--no-ack"]) == 0
    assert [e.type for e in rig.log(number)].count("incident.acknowledged") == 0
    assert cli.main(["repropose", inc, "cordon", "--as", "alice", "--note", "now"]) == 0
    out, _ = capsys.readouterr()
    assert out.splitlines()[-1] == "step cordon is proposed again (attempt 3)"
    assert rig.states(number)["cordon"] == "awaiting_approval"
    acked = [e.summary for e in rig.log(number) if e.type == "incident.acknowledged"]
    assert acked == [f"alice acknowledged {inc} by proposing again step cordon"]
    assert cli.main(["repropose", inc, "cordon", "--as", "alice"]) == 1
    _, err = capsys.readouterr()
    assert "step cordon is waiting for a decision now: approve or skip it" in err

"""The console's buttons decide through the same code as Slack's: a responder approves a
step that then runs against the simulated cluster; acknowledge, take ownership, resolve,
mark done, add a follow-up; people without a role are refused and the refusal is logged;
every POST needs the session's CSRF token."""

from __future__ import annotations

from collections.abc import Callable

import httpx
import pytest

from bot.postmortem import followups
from bot.sim import SimHandle
from bot.worker import Worker
from tests.chat.slack_rig import DISRUPTIVE
from tests.console.rig import ConsoleRig, click, login
from tests.runbooks.rig import TWO_STEPS
from tests.support import working

Browsers = Callable[[], httpx.Client]
CSRF_REFUSED = "CSRF token missing or wrong; reload the page and try again"
MANUAL = """\
    id: gpu-xid
    title: Single GPU fault
    version: 1
    match: {alerts: [GPUXIDError]}
    steps:
      - {id: call, title: Call the vendor, manual: call them}
"""


def work(rig: ConsoleRig, sim: SimHandle) -> None:
    """The worker until it has nothing to do (steps run against the simulator)."""
    worker = Worker(rig.db, rig.settings, rig.clock, kube_factory=sim.api_client)
    for _ in range(20):
        if not working.passed(worker):
            return


def run_id(rig: ConsoleRig, number: int, step: str) -> int:
    return rig.runs(number)[step].id


def test_a_responder_approves_a_step_and_it_runs_on_the_cluster_as_them(
    rig: ConsoleRig, sim: SimHandle, browsers: Browsers
) -> None:
    rig.write(TWO_STEPS)
    number = rig.fire(host="gpu-node-01")
    work(rig, sim)
    client = browsers()
    csrf = login(client, "alice")
    page = client.get(f"/incidents/{number}")
    assert 'data-step="cordon" data-state="awaiting_approval"' in page.text
    run = run_id(rig, number, "cordon")
    assert f'action="/incidents/{number}/steps/{run}/approve"' in page.text

    answer = click(client, f"/incidents/{number}/steps/{run}/approve", csrf)
    assert answer.status_code == 200, answer.text
    assert answer.json()["ok"] is True
    work(rig, sim)

    assert rig.states(number)["cordon"] == "succeeded"
    assert rig.runs(number)["cordon"].actor == "alice"
    assert sim.cluster.snapshot().nodes["gpu-node-01"].unschedulable
    approved = [e for e in rig.log(number) if e.type == "step.approved"]
    assert approved[-1].actor_id == "alice"
    card = client.get(f"/incidents/{number}/card")
    assert 'data-step="cordon" data-state="succeeded"' in card.text
    assert "/approve" not in card.text  # nothing waits any more


def test_a_form_post_without_javascript_redirects_back_with_the_answer(
    rig: ConsoleRig, browsers: Browsers
) -> None:
    rig.write(TWO_STEPS)
    number = rig.fire()
    client = browsers()
    csrf = login(client, "bob")
    answer = client.post(f"/incidents/{number}/ack", data={"csrf": csrf})
    assert answer.status_code == 303
    assert answer.headers["location"] == f"/incidents/{number}#incident-actions"
    page = client.get(f"/incidents/{number}")
    actions = page.text.split('id="incident-actions"', 1)[1].split("</div>", 1)[0]
    shown = 'class="feedback good" id="flash" role="status" aria-live="polite">'
    assert f"{shown}INC-{number} acknowledged<" in actions
    assert 'data-status="acknowledged"' in page.text
    again = client.get(f"/incidents/{number}")
    assert f"INC-{number} acknowledged<" not in again.text  # a flash is shown once
    assert 'id="flash"' not in again.text


def test_a_disruptive_step_needs_two_different_people(
    rig: ConsoleRig, sim: SimHandle, browsers: Browsers
) -> None:
    rig.write(DISRUPTIVE)
    number = rig.fire(host="gpu-node-02")
    work(rig, sim)
    run = run_id(rig, number, "drain")
    alice, carol = browsers(), browsers()
    alice_csrf, carol_csrf = login(alice, "alice"), login(carol, "carol")
    page = alice.get(f"/incidents/{number}")
    assert 'data-risk="disruptive" data-targets="gpu-node-02"' in page.text
    assert 'id="confirm"' in page.text and 'data-action="confirm"' in page.text

    approve = f"/incidents/{number}/steps/{run}/approve"
    unconfirmed = click(alice, approve, alice_csrf)
    assert unconfirmed.status_code == 428 and "gpu-node-02" in unconfirmed.json()["flash"]
    assert rig.approvals(number, "drain") == []  # the targets were not confirmed

    first = click(alice, approve, alice_csrf, confirmed="1")
    assert first.json()["ok"] is True and "your approval is recorded" in first.json()["flash"]
    twice = click(alice, approve, alice_csrf, confirmed="1")
    assert twice.status_code == 409
    assert "someone else" in twice.json()["flash"]
    assert rig.approvals(number, "drain") == ["alice"]
    card = alice.get(f"/incidents/{number}/card")
    assert "approved by you, waiting for one more" in card.text
    assert 'data-action="approve"' not in card.text  # no Approve that would answer 409
    assert 'data-waiting="second"' in card.text
    assert 'data-action="approve"' in carol.get(f"/incidents/{number}/card").text

    second = click(carol, approve, carol_csrf, confirmed="1")
    assert second.json()["ok"] is True
    assert rig.approvals(number, "drain") == ["alice", "carol"]


def test_without_javascript_a_disruptive_approval_asks_on_a_page_naming_its_targets(
    rig: ConsoleRig, sim: SimHandle, browsers: Browsers
) -> None:
    rig.write(DISRUPTIVE)
    number = rig.fire(host="gpu-node-02")
    work(rig, sim)
    run = run_id(rig, number, "drain")
    client = browsers()
    csrf = login(client, "alice")
    approve = f"/incidents/{number}/steps/{run}/approve"

    asked = client.post(approve, data={"csrf": csrf})  # a plain form post, no script
    assert asked.status_code == 428 and "text/html" in asked.headers["content-type"]
    assert 'id="confirm-targets">gpu-node-02<' in asked.text
    assert 'name="confirmed" value="1"' in asked.text and f'action="{approve}"' in asked.text
    assert rig.approvals(number, "drain") == []

    done = client.post(approve, data={"csrf": csrf, "confirmed": "1"})
    assert done.status_code == 303 and done.headers["location"] == f"/incidents/{number}#decision"
    assert rig.approvals(number, "drain") == ["alice"]


def test_a_user_without_a_role_is_refused_and_the_refusal_is_logged(
    rig: ConsoleRig, browsers: Browsers
) -> None:
    rig.write(TWO_STEPS)
    number = rig.fire()
    client = browsers()
    csrf = login(client, "mallory")
    assert client.get(f"/incidents/{number}").status_code == 200  # may look
    for path in ("ack", "own", "resolve"):
        answer = click(client, f"/incidents/{number}/{path}", csrf, disposition="x")
        assert answer.status_code == 403
        assert answer.json()["flash"].startswith("you need the responder role to "), answer.text
    run = run_id(rig, number, "status")
    step = click(client, f"/incidents/{number}/steps/{run}/skip", csrf)
    assert step.json()["flash"].startswith(
        "you need the responder role to decide on incidents; ask an admin"
    )
    refused = [e for e in rig.log(number) if e.type == "chat.refused"]
    assert [e.data["wanted"] for e in refused] == [
        "acknowledge", "take ownership of", "resolve", "decide on"
    ]  # fmt: skip
    assert all(e.actor_id == "mallory" for e in refused)
    types = rig.types(number)
    assert "incident.acknowledged" not in types and "incident.resolved" not in types
    page = client.get(f"/incidents/{number}")
    assert 'id="followup-add"' not in page.text  # the form is for people with a role


def test_acknowledge_take_ownership_and_resolve_with_a_disposition(
    rig: ConsoleRig, browsers: Browsers
) -> None:
    rig.write(TWO_STEPS)
    number = rig.fire()
    client = browsers()
    csrf = login(client, "carol")
    base = f"/incidents/{number}"

    assert click(client, f"{base}/ack", csrf).json() == {
        "ok": True, "flash": f"INC-{number} acknowledged"
    }  # fmt: skip
    assert click(client, f"{base}/own", csrf).json()["flash"] == f"INC-{number} is owned by carol"
    resolved = click(client, f"{base}/resolve", csrf, disposition="replaced GPU 5 <b>now</b>")
    assert resolved.json() == {"ok": True, "flash": f"INC-{number} resolved"}

    entries = {e.type: e for e in rig.log(number)}
    assert entries["incident.acknowledged"].actor_id == "carol"
    assert entries["incident.acknowledged"].data["owner"] == "carol"  # acknowledging owns it
    assert entries["incident.resolved"].actor_id == "carol"
    card = client.get(f"{base}/card")
    assert 'data-status="resolved"' in card.text
    assert "replaced GPU 5 &lt;b&gt;now&lt;/b&gt;" in card.text
    assert 'data-action="ack"' not in card.text and 'id="resolve"' not in card.text


def test_a_manual_step_is_marked_done_with_a_note(rig: ConsoleRig, browsers: Browsers) -> None:
    rig.write(MANUAL)
    number = rig.fire()
    client = browsers()
    csrf = login(client, "alice")
    page = client.get(f"/incidents/{number}")
    assert 'data-action="done"' in page.text and 'name="note"' in page.text
    assert 'data-action="done-submit"' in page.text
    path = f"/incidents/{number}/steps/{run_id(rig, number, 'call')}/done"

    empty = click(client, path, csrf, note="  ")
    assert empty.status_code == 409
    assert empty.json()["flash"] == "say what was done, e.g. 'replaced the cable'"
    assert rig.states(number)["call"] == "awaiting_approval"
    done = click(client, path, csrf, note="vendor ticket 4711 opened")
    assert done.json()["ok"] is True
    assert rig.states(number)["call"] == "succeeded"
    assert "vendor ticket 4711 opened" in " ".join(e.summary for e in rig.log(number))


def test_a_follow_up_is_added_and_listed(rig: ConsoleRig, browsers: Browsers) -> None:
    rig.write(TWO_STEPS)
    number = rig.fire()
    client = browsers()
    csrf = login(client, "bob")
    path = f"/incidents/{number}/followups"
    bad = click(client, path, csrf, title="ECC alert", deadline="next week")
    assert bad.status_code == 409 and "next week" in bad.json()["flash"]
    added = click(
        client, path, csrf, title="Alert on ECC growth", owner="bob", deadline="2026-12-31",
        type="prevent",
    )  # fmt: skip
    assert added.json()["ok"] is True, added.text
    with rig.db.session() as session:
        items = followups.of_incident(session, number)
    assert [(i.title, i.owner, str(i.deadline), i.type) for i in items] == [
        ("Alert on ECC growth", "bob", "2026-12-31", "prevent")
    ]
    page = client.get(f"/incidents/{number}")
    assert f'data-followup="{items[0].id}" data-status="open"' in page.text
    assert "Alert on ECC growth" in page.text


def test_a_follow_up_is_marked_done_only_from_its_own_incident(
    rig: ConsoleRig, browsers: Browsers
) -> None:
    rig.write(TWO_STEPS)
    number = rig.fire(host="gpu-node-01")
    other = rig.fire(host="gpu-node-02")
    client = browsers()
    csrf = login(client, "bob")
    added = click(client, f"/incidents/{number}/followups", csrf, title="Spare GPU in stock")
    assert added.json()["ok"] is True
    with rig.db.session() as session:
        (item,) = followups.of_incident(session, number)

    wrong = click(client, f"/incidents/{other}/followups/{item.id}/done", csrf)
    assert wrong.status_code == 409 and f"not one of INC-{other}'s" in wrong.json()["flash"]
    done = click(client, f"/incidents/{number}/followups/{item.id}/done", csrf)
    assert done.json() == {
        "ok": True,
        "flash": f"Follow-up #{item.id} of INC-{number} is done: Spare GPU in stock",
    }
    with rig.db.session() as session:
        assert followups.get(session, item.id).status == "done"
    assert "followup.done" in rig.types(number)
    page = client.get(f"/incidents/{number}").text
    assert f'data-followup="{item.id}" data-status="done"' in page
    assert f"/followups/{item.id}/done" not in page  # no button on a closed one


@pytest.mark.parametrize("how", ["missing", "wrong", "another session's"])
def test_every_post_is_refused_without_the_sessions_csrf_token(
    rig: ConsoleRig, browsers: Browsers, how: str
) -> None:
    rig.write(TWO_STEPS)
    number = rig.fire()
    client, other = browsers(), browsers()
    login(client, "carol")
    other_csrf = login(other, "alice")
    token = {"missing": None, "wrong": "x" * 43, "another session's": other_csrf}[how]
    run = run_id(rig, number, "status")
    base = f"/incidents/{number}"
    paths = [f"{base}/ack", f"{base}/own", f"{base}/resolve", f"{base}/followups",
             f"{base}/steps/{run}/approve", f"{base}/steps/{run}/skip",
             f"{base}/steps/{run}/done"]  # fmt: skip
    before = rig.types(number)
    for path in paths:
        form = {"title": "t", "note": "n", "disposition": "d"}
        if token is not None:
            form["csrf"] = token
        answer = client.post(path, data=form)
        assert answer.status_code == 403, path
        assert answer.text == CSRF_REFUSED
        if token is not None:
            header = client.post(path, data=form, headers={"X-CSRF-Token": token})
            assert header.status_code == 403, path
    assert rig.types(number) == before  # nothing was decided, nothing logged


def test_a_post_without_a_login_answers_401(rig: ConsoleRig, browsers: Browsers) -> None:
    rig.write(TWO_STEPS)
    number = rig.fire()
    answer = browsers().post(f"/incidents/{number}/ack", data={"csrf": "x"})
    assert answer.status_code == 401
    assert "incident.acknowledged" not in rig.types(number)


def test_a_step_of_another_incident_is_not_decided(rig: ConsoleRig, browsers: Browsers) -> None:
    rig.write(TWO_STEPS)
    first, second = rig.fire(), rig.fire()
    client = browsers()
    csrf = login(client, "alice")
    run = run_id(rig, first, "status")
    answer = click(client, f"/incidents/{second}/steps/{run}/skip", csrf)
    assert answer.status_code == 409 and "no longer exists" in answer.json()["flash"]
    assert "step.skipped" not in rig.types(first)

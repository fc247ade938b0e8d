"""Who may approve, how many, until when, and for which parameters (DESIGN invariant 5)."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from bot.clock import FrozenClock
from bot.db import Database
from bot.errors import ApprovalExpired, ApprovalRefused, TransitionRefused
from bot.runbooks import engine
from tests.runbooks.rig import Rig

RUNBOOK = """\
    id: node-down
    title: t
    version: 1
    match: {alerts: [GPUXIDError]}
    steps:
      - id: cordon
        title: Cordon
        action: k8s.cordon
        with: {node: "{{ labels.Hostname }}", reason: "{{ labels.gpu }}"}
      - id: power
        title: Power cycle
        action: bmc.power_cycle
        with: {node: "{{ labels.Hostname }}"}
      - id: uncordon
        title: Uncordon
        action: k8s.uncordon
        with: {node: "{{ labels.Hostname }}"}
        approval: two
"""


@pytest.fixture
def rig(db: Database, clock: FrozenClock, tmp_path: Path) -> Rig:
    rig = Rig(db, clock, tmp_path)
    rig.write(RUNBOOK)
    return rig


def _to_power(rig: Rig, number: int) -> None:
    """Get past the cordon step without running it: skip it."""
    rig.skip(number, "cordon", "carol", note="already cordoned by hand")


def test_a_person_without_a_role_cannot_approve(rig: Rig) -> None:
    number = rig.fire()

    with pytest.raises(ApprovalRefused, match="mallory has no role that may decide on steps"):
        rig.approve(number, "cordon", "mallory")

    assert rig.states(number) == {"cordon": "awaiting_approval"}
    assert rig.approvals(number, "cordon") == []


def test_an_empty_roles_setting_lets_nobody_approve(
    db: Database, clock: FrozenClock, tmp_path: Path
) -> None:
    rig = Rig(db, clock, tmp_path, roles={})
    rig.write(RUNBOOK)
    number = rig.fire()

    with pytest.raises(ApprovalRefused, match="alice has no role"):
        rig.approve(number, "cordon", "alice")


def test_a_change_step_needs_one_responder_who_becomes_its_actor(rig: Rig) -> None:
    number = rig.fire()
    run = rig.runs(number)["cordon"]
    assert (run.approvals_required, run.expires_at) == (1, rig.clock.now() + timedelta(minutes=15))

    approved = rig.approve(number, "cordon", "alice", params_hash=run.params_hash)

    assert (approved.state, approved.actor) == ("approved", "alice")
    entry = rig.log(number)[-1]
    assert (entry.type, entry.actor_kind, entry.actor_id) == ("step.approved", "human", "alice")
    assert "approved by alice" in entry.summary


def test_a_disruptive_step_needs_two_different_people(rig: Rig) -> None:
    number = rig.fire()
    _to_power(rig, number)
    assert rig.runs(number)["power"].approvals_required == 2

    first = rig.approve(number, "power", "alice")
    assert first.state == "awaiting_approval"
    assert rig.log(number)[-1].summary == (
        "alice (responder) approved step power (1 of 2); 1 more different person needed"
    )
    with pytest.raises(ApprovalRefused, match="you already approved step power at 22:05:30"):
        rig.approve(number, "power", "alice")
    rig.clock.advance(timedelta(minutes=1))
    second = rig.approve(number, "power", "bob")

    assert (second.state, second.actor) == ("approved", "bob")
    assert rig.approvals(number, "power") == ["alice", "bob"]
    assert rig.types(number).count("step.approval") == 1


def test_a_runbook_may_raise_the_approval_above_the_risk(rig: Rig) -> None:
    number = rig.fire()
    _to_power(rig, number)
    rig.skip(number, "power", "carol")

    assert rig.runs(number)["uncordon"].approvals_required == 2
    assert rig.approve(number, "uncordon", "alice").state == "awaiting_approval"


def test_a_second_click_on_a_decided_step_says_who_approved_it_and_when(rig: Rig) -> None:
    number = rig.fire()
    rig.approve(number, "cordon", "alice")

    with pytest.raises(ApprovalRefused) as refused:
        rig.approve(number, "cordon", "bob")

    assert str(refused.value) == (
        "step cordon was already approved by alice at 2026-11-29 22:05:30 UTC; it is approved"
    )
    assert rig.approvals(number, "cordon") == ["alice"]


def test_an_ended_step_cannot_be_approved_or_skipped(rig: Rig) -> None:
    number = rig.fire()
    _to_power(rig, number)

    with pytest.raises(ApprovalRefused, match=r"step cordon already ended \(skipped\)"):
        rig.approve(number, "cordon", "alice")
    with pytest.raises(TransitionRefused, match="cannot skip step cordon: it already ended"):
        rig.skip(number, "cordon", "alice")


def test_an_expired_approval_is_refused_and_the_step_proposed_again(rig: Rig) -> None:
    number = rig.fire()
    first = rig.runs(number)["cordon"]
    rig.clock.advance(timedelta(minutes=15, seconds=1))

    with pytest.raises(ApprovalExpired, match="expired; it is proposed again"):
        rig.approve(number, "cordon", "alice")

    runs = rig.all_runs(number, "cordon")
    assert [(r.attempt, r.state) for r in runs] == [(1, "expired"), (2, "awaiting_approval")]
    assert runs[1].expires_at == rig.clock.now() + timedelta(minutes=15)
    assert runs[1].params_hash == first.params_hash
    assert rig.approvals(number, "cordon") == []
    assert rig.approve(number, "cordon", "alice").attempt == 2


def test_an_approval_exactly_at_the_deadline_still_counts(rig: Rig) -> None:
    number = rig.fire()
    rig.clock.advance(timedelta(minutes=15))

    assert rig.approve(number, "cordon", "alice").state == "approved"


def test_an_approval_for_other_parameters_is_refused(rig: Rig) -> None:
    number = rig.fire()
    run = rig.runs(number)["cordon"]
    stale = engine.params_hash({"node": "gpu-node-09", "reason": "5"})
    assert run.params_hash == engine.params_hash({"node": "gpu-node-01", "reason": "5"})

    with pytest.raises(ApprovalRefused, match="the parameters changed since you saw them"):
        rig.approve(number, "cordon", "alice", params_hash=stale)

    assert rig.states(number) == {"cordon": "awaiting_approval"}
    assert rig.approve(number, "cordon", "alice", params_hash=run.params_hash).state == ("approved")


def test_a_manual_step_is_marked_done_not_approved(rig: Rig) -> None:
    rig.write(
        "id: x\ntitle: t\nversion: 1\nmatch: {alerts: [GPUXIDError]}\n"
        "steps:\n  - {id: call, title: Call the vendor, manual: call them}\n"
    )
    number = rig.fire()

    with pytest.raises(ApprovalRefused, match="mark it done with a note"):
        rig.approve(number, "call", "alice")
    with pytest.raises(ApprovalRefused, match="say what was done"):
        rig.done(number, "call", "alice", note="  ")
    with pytest.raises(ApprovalRefused, match="has no role"):
        rig.done(number, "call", "mallory", note="called")

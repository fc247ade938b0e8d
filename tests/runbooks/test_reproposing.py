"""Skipping a step later steps read asks why and names them; a person with a role
proposes a skipped, failed or expired step again, and the steps after it are decided
again in their turn (issue 21 item 1). The real engine on SQLite and PostgreSQL."""

from __future__ import annotations

import threading
from datetime import timedelta
from pathlib import Path

import pytest

from bot.clock import FrozenClock
from bot.db import Database
from bot.errors import ApprovalRefused, BotError, StepNotFound
from bot.incidents import log
from bot.runbooks import service
from bot.runbooks.models import StepRun
from tests.runbooks.rig import Rig

RUNBOOK = """\
    id: gpu-xid
    title: Single GPU fault
    version: 1
    match: {alerts: [GPUXIDError]}
    facts:
      node: "{{ labels.Hostname }}"
    steps:
      - id: check
        title: Look at the node
        manual: Look at the node
      - id: cordon
        title: Cordon the node
        action: k8s.cordon
        with: {node: "{{ facts.node }}", reason: "XID"}
      - id: drain
        title: Drain the node
        action: k8s.drain
        with: {node: "{{ facts.node }}", reason: "XID"}
        when: steps.cordon.status == "succeeded"
      - id: tell
        title: Tell the owner
        manual: Tell the job's owner the node is drained
        when: steps.drain.status == "succeeded"
      - id: record
        title: Write it down
        manual: Write down what was seen
"""


@pytest.fixture
def rig(db: Database, clock: FrozenClock, tmp_path: Path) -> Rig:
    rig = Rig(db, clock, tmp_path)
    rig.write(RUNBOOK)
    return rig


def repropose(rig: Rig, number: int, step: str, person: str, note: str | None = None) -> StepRun:
    return service.repropose(
        rig.db, number, step, who=rig.who(person), clock=rig.clock, settings=rig.settings,
        note=note,
    )  # fmt: skip


def skipped_cordon(rig: Rig) -> int:
    number = rig.fire()
    rig.done(number, "check", "alice", note="XID 79 on GPU 3")
    rig.skip(number, "cordon", "alice", note="the job finishes in ten minutes")
    return number


def test_skipping_a_step_others_read_needs_a_reason_naming_them(rig: Rig) -> None:
    number = rig.fire()
    rig.done(number, "check", "alice", note="XID 79 on GPU 3")
    before = rig.types(number)
    for note in (None, "   "):
        with pytest.raises(ApprovalRefused) as refused:
            rig.skip(number, "cordon", "alice", note=note)
        assert str(refused.value) == "skipping cordon also skips drain and tell: say why"
    assert rig.types(number) == before  # a refusal writes nothing
    assert rig.states(number)["cordon"] == "awaiting_approval"

    rig.skip(number, "cordon", "alice", note="the job finishes in ten minutes")
    entry = [e for e in rig.log(number) if e.type == "step.skipped"][0]
    assert entry.summary == (
        "alice (responder) skipped step cordon: the job finishes in ten minutes "
        "(also skips drain and tell)"
    )
    assert entry.data["dependents"] == ["drain", "tell"]
    assert rig.states(number) == {
        "check": "succeeded",
        "cordon": "skipped",
        "drain": "skipped",
        "tell": "skipped",
        "record": "awaiting_approval",
    }


def test_a_step_nothing_reads_is_skipped_without_a_reason(rig: Rig) -> None:
    number = skipped_cordon(rig)
    rig.skip(number, "record", "bob")
    entry = [e for e in rig.log(number) if e.type == "step.skipped"][-1]
    assert entry.summary == "bob (responder) skipped step record"
    assert entry.data["dependents"] == []


def test_proposing_a_skipped_step_again_decides_the_later_steps_again(rig: Rig) -> None:
    number = skipped_cordon(rig)
    rig.clock.advance(timedelta(seconds=60))

    again = repropose(rig, number, "cordon", "bob", note="the job was killed")

    assert (again.state, again.attempt, again.approvals_required) == ("awaiting_approval", 3, 1)
    assert rig.approvals(number, "cordon") == []  # approvals start again
    runs = rig.runs(number)
    assert runs["cordon"].id == again.id
    # drain and tell were skipped by `when`: voided, decided again in their turn; the
    # open proposal after cordon (record) is superseded and waits its turn too.
    assert {step: runs[step].state for step in ("drain", "tell", "record")} == {
        "drain": "expired",
        "tell": "expired",
        "record": "expired",
    }
    assert runs["record"].summary.startswith("superseded: step cordon is proposed again by bob")
    reproposed = [e for e in rig.log(number) if e.type == "step.reproposed"]
    assert [e.summary for e in reproposed] == [
        "bob (responder) proposed step cordon again (it was skipped): the job was killed; "
        "its approvals start again"
    ]
    assert reproposed[0].data["from"] == "skipped" and reproposed[0].data["by"]["person"] == "bob"
    replanned = [e.data["step"] for e in rig.log(number) if e.type == "runbook.replanned"]
    assert replanned == ["drain", "tell"]

    rig.approve(number, "cordon", "alice")
    assert rig.states(number)["cordon"] == "approved"


def test_a_skipped_step_proposed_again_and_skipped_again_by_a_person(rig: Rig) -> None:
    number = skipped_cordon(rig)
    repropose(rig, number, "cordon", "bob")
    rig.skip(number, "cordon", "bob", note="the owner says no after all")
    assert rig.states(number) == {
        "check": "succeeded",
        "cordon": "skipped",
        "drain": "skipped",
        "tell": "skipped",
        "record": "awaiting_approval",
    }


def test_what_cannot_be_proposed_again_is_refused_in_plain_words(rig: Rig) -> None:
    number = rig.fire()
    cases = [
        ("check", "alice", "step check is waiting for a decision now: mark it done or skip it"),
        ("cordon", "alice", "step cordon of INC-1 has not been proposed yet"),
        ("nope", "alice", "nope"),
        ("check", "mallory", "mallory has no role that may decide on steps"),
    ]
    rig.done(number, "check", "alice", note="looked")
    cases[0] = ("check", "alice", "step check already succeeded: there is nothing to propose")
    cases[1] = ("cordon", "alice", "step cordon is waiting for a decision now: approve or skip")
    cases.append(("record", "alice", "step record of INC-1 has not been proposed yet"))
    before = rig.types(number)
    for step, person, words in cases:
        with pytest.raises(BotError, match=words):
            repropose(rig, number, step, person)
    assert rig.types(number) == before

    rig.approve(number, "cordon", "alice")
    with pytest.raises(ApprovalRefused, match="cordon is approved and about to run"):
        repropose(rig, number, "cordon", "bob")
    with pytest.raises(StepNotFound):
        repropose(rig, number, "record", "bob")


def test_a_step_whose_when_is_still_false_is_not_proposed_again(rig: Rig) -> None:
    number = skipped_cordon(rig)
    before = rig.types(number)
    with pytest.raises(ApprovalRefused) as refused:
        repropose(rig, number, "drain", "alice")
    assert str(refused.value) == (
        'step drain does not apply now (`when: steps.cordon.status == "succeeded"` is '
        "false): it would be skipped again"
    )
    assert rig.types(number) == before


def test_a_resolved_incidents_steps_are_not_proposed_again(rig: Rig) -> None:
    number = skipped_cordon(rig)
    service.resolve(
        rig.db, number, actor=log.Actor.human("alice"), clock=rig.clock, disposition="fixed"
    )
    assert rig.states(number)["record"] == "cancelled"
    with pytest.raises(ApprovalRefused, match="INC-1 is resolved: its steps no longer run"):
        repropose(rig, number, "record", "alice")


def test_two_people_proposing_a_step_again_at_once_make_one_attempt(rig: Rig) -> None:
    number = skipped_cordon(rig)
    start = threading.Barrier(2)
    outcomes: list[str] = []

    def propose(person: str) -> None:
        start.wait()
        try:
            repropose(rig, number, "cordon", person)
            outcomes.append("proposed")
        except ApprovalRefused as exc:
            outcomes.append(str(exc))

    threads = [threading.Thread(target=propose, args=(p,)) for p in ("alice", "bob")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert sorted(outcomes) == [
        "proposed",
        "step cordon is waiting for a decision now: approve or skip it",
    ]
    attempts = [(run.attempt, run.state) for run in rig.all_runs(number, "cordon")]
    assert attempts == [(1, "skipped"), (2, "expired"), (3, "awaiting_approval")]

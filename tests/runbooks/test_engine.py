"""The engine: matching, freezing, and how `advance` walks the steps (nothing runs here)."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from bot.clock import FrozenClock
from bot.db import Database
from bot.incidents import log
from bot.incidents import service as incidents
from bot.runbooks import engine
from bot.runbooks.catalog import Catalog
from bot.runbooks.loader import load_paths
from bot.worker import Worker
from tests.runbooks.rig import TWO_STEPS, Rig


def _runbook(id: str, match: str, step: str = "look") -> str:
    return (
        f"id: {id}\ntitle: t\nversion: 1\nmatch: {{{match}}}\nsteps:\n"
        f"  - {{id: {step}, title: t, manual: do it}}\n"
    )


def test_the_highest_priority_match_wins_then_the_id_then_the_fallback(tmp_path: Path) -> None:
    files = {
        "a.yaml": _runbook("xid-any", "alerts: [GPUXIDError]"),
        "b.yaml": _runbook(
            "xid-79", "alerts: [GPUXIDError], labels: [{label: xid, in: ['79']}], priority: 10"
        ),
        "c.yaml": _runbook("xid-also", "alerts: [GPUXIDError]"),
        "d.yaml": _runbook("by-label", "labels: [{label: Hostname, regex: 'gpu-node-0[0-9]'}]"),
        "e.yaml": _runbook("default", "fallback: true"),
    }
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    catalog = Catalog.of(load_paths([tmp_path]))

    def match(**labels: str) -> str | None:
        found = catalog.match(labels)
        return None if found is None else found.runbook.id

    assert match(alertname="GPUXIDError", xid="79") == "xid-79"
    assert match(alertname="GPUXIDError", xid="13") == "xid-also"  # same priority: by id
    assert match(alertname="NodeDown", Hostname="gpu-node-03") == "by-label"
    assert match(alertname="NodeDown", Hostname="gpu-node-10") == "default"  # fullmatch
    assert match(alertname="NodeDown") == "default"  # a missing label reads as ""
    assert Catalog.of([]).match({"alertname": "GPUXIDError"}) is None


def test_an_open_incident_keeps_its_runbook_when_the_yaml_changes(rig: Rig) -> None:
    rig.write(TWO_STEPS)
    first = rig.fire()

    frozen = rig.frozen(first)
    assert frozen is not None
    assert (frozen.runbook_id, frozen.runbook_version) == ("gpu-xid", 1)
    assert frozen.facts == {"node": "gpu-node-01"}
    assert frozen.labels["Hostname"] == "gpu-node-01"
    with rig.db.session() as session:
        _, runbook = engine.frozen_runbook(session, first)
        assert [step.id for step in runbook.steps] == ["status", "cordon"]
    assert rig.types(first)[-2:] == ["runbook.matched", "step.approved"]

    edited = TWO_STEPS.replace("version: 1", "version: 2").replace(
        "    steps:\n", "    steps:\n      - {id: call, title: Call the vendor, manual: call}\n"
    )
    rig.write(edited)
    second = rig.fire()
    with rig.db.transaction() as session:
        engine.advance(session, first, rig.clock.now(), rig.settings)

    assert rig.states(second) == {"call": "awaiting_approval"}
    assert rig.states(first) == {"status": "approved"}
    again = rig.frozen(first)
    assert again is not None and again.runbook_version == 1
    assert again.runbook_digest == frozen.runbook_digest


def test_an_alert_no_runbook_matches_opens_an_incident_without_one(rig: Rig) -> None:
    rig.write(TWO_STEPS)
    number = rig.fire(alertname="NodeDown")

    assert rig.frozen(number) is None
    assert rig.runs(number) == {}
    assert not [t for t in rig.types(number) if t.startswith(("runbook.", "step."))]


def test_a_fact_that_does_not_render_is_left_out_and_logged(rig: Rig) -> None:
    rig.write(
        TWO_STEPS.replace(
            '      node: "{{ labels.Hostname }}"\n',
            '      node: "{{ labels.Hostname }}"\n      rack: "{{ labels.rack }}"\n',
        )
    )
    number = rig.fire()

    frozen = rig.frozen(number)
    assert frozen is not None and frozen.facts == {"node": "gpu-node-01"}
    failed = [e for e in rig.log(number) if e.type == "runbook.fact_failed"]
    assert len(failed) == 1
    assert failed[0].summary.startswith("fact rack left out:")
    assert "rack" in failed[0].summary


def test_a_step_whose_when_is_false_is_skipped_with_the_expression(rig: Rig) -> None:
    rig.write(
        """\
        id: gpu-xid
        title: t
        version: 1
        match: {alerts: [GPUXIDError]}
        steps:
          - id: reset
            title: Reset GPU 9
            manual: reset it
            when: labels.gpu == "9" and incident.severity == "critical"
          - id: cordon
            title: Cordon
            action: k8s.cordon
            with: {node: "{{ labels.Hostname }}"}
        """
    )
    number = rig.fire(gpu=5)

    assert rig.states(number) == {"reset": "skipped", "cordon": "awaiting_approval"}
    skipped = next(e for e in rig.log(number) if e.type == "step.skipped")
    assert '`when: labels.gpu == "9" and incident.severity == "critical"` is false' in (
        skipped.summary
    )
    assert skipped.actor_id == "runbook-bot"
    assert rig.runs(number)["cordon"].params == {"node": "gpu-node-01"}


@pytest.mark.parametrize(
    "with_, reason",
    [
        ('{node: "{{ labels.Hostname }}_X"}', "k8s.cordon: invalid parameters: node="),
        ('{node: "{{ labels.nothing }}"}', "'dict object' has no attribute 'nothing'"),
    ],
)
def test_parameters_that_do_not_render_or_validate_fail_the_step_and_stop_the_runbook(
    rig: Rig, with_: str, reason: str
) -> None:
    rig.write(
        f"""\
        id: gpu-xid
        title: t
        version: 1
        match: {{alerts: [GPUXIDError]}}
        steps:
          - {{id: cordon, title: Cordon, action: k8s.cordon, with: {with_}}}
          - {{id: after, title: After, manual: never reached}}
        """
    )
    number = rig.fire()
    with rig.db.transaction() as session:  # walking again logs the stop only once
        engine.advance(session, number, rig.clock.now(), rig.settings)

    run = rig.runs(number)["cordon"]
    assert run.state == "failed" and reason in run.summary
    assert rig.states(number) == {"cordon": "failed"}
    assert rig.types(number).count("runbook.stopped") == 1
    assert rig.types(number)[-2:] == ["step.failed", "runbook.stopped"]


@pytest.mark.parametrize("policy", ["continue", "escalate"])
def test_a_failed_step_that_continues_or_escalates_lets_the_next_step_come(
    rig: Rig, policy: str
) -> None:
    rig.write(
        f"""\
        id: gpu-xid
        title: t
        version: 1
        match: {{alerts: [GPUXIDError]}}
        steps:
          - id: cordon
            title: Cordon
            action: k8s.cordon
            with: {{node: "BAD NAME"}}
            on_failure: {policy}
          - {{id: after, title: After, manual: look at the node}}
        """
    )
    number = rig.fire()

    assert rig.states(number) == {"cordon": "failed", "after": "awaiting_approval"}
    types = rig.types(number)
    assert "runbook.stopped" not in types
    assert types.count("runbook.escalate") == (1 if policy == "escalate" else 0)


def test_manual_steps_wait_for_a_person_who_marks_them_done_or_skips_them(rig: Rig) -> None:
    rig.write(
        """\
        id: ib
        title: t
        version: 1
        match: {alerts: [GPUXIDError]}
        steps:
          - {id: cable, title: Reseat the cable, manual: reseat the cable}
          - {id: module, title: Replace the module, manual: replace it}
          - id: check
            title: Check
            manual: look
            when: steps.cable.ok and steps.module.status == "skipped"
        """
    )
    number = rig.fire()
    assert rig.states(number) == {"cable": "awaiting_approval"}

    rig.clock.advance(timedelta(minutes=30))  # manual steps do not expire
    done = rig.done(number, "cable", "alice", note="reseated port 3")
    rig.skip(number, "module", "bob", note="cable fixed it")

    assert done.state == "succeeded" and done.actor == "alice"
    assert rig.states(number) == {
        "cable": "succeeded",
        "module": "skipped",
        "check": "awaiting_approval",
    }
    entries = {e.type: e for e in rig.log(number)}
    assert entries["step.succeeded"].summary == (
        "alice (responder) did step cable: reseated port 3"
    )
    assert entries["step.succeeded"].actor_id == "alice"
    assert entries["step.skipped"].summary == (
        "bob (responder) skipped step module: cable fixed it (also skips check)"
    )


def test_a_finished_runbook_is_logged_once(rig: Rig) -> None:
    rig.write(_runbook("gpu-xid", "alerts: [GPUXIDError]"))
    number = rig.fire()
    rig.done(number, "look", "carol", note="looked")
    with rig.db.transaction() as session:
        engine.advance(session, number, rig.clock.now(), rig.settings)

    assert rig.types(number).count("runbook.finished") == 1


def test_a_missing_runbooks_directory_gives_no_runbooks(
    db: Database, clock: FrozenClock, tmp_path: Path
) -> None:
    rig = Rig(db, clock, tmp_path, runbooks_dir=tmp_path / "absent")

    assert rig.catalog() == Catalog()
    assert rig.frozen(rig.fire()) is None


def test_an_engine_bug_never_costs_the_alert(
    rig: Rig, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    rig.write(TWO_STEPS)

    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("a bug")

    monkeypatch.setattr(engine, "freeze", broken)
    number = rig.fire()

    assert rig.frozen(number) is None and rig.runs(number) == {}
    types = rig.types(number)
    assert types[0] == "incident.opened" and types[-1] == "runbook.attach_failed"
    assert "runbook.matched" not in types
    assert "freezing its runbook failed" in caplog.text
    with rig.db.session() as session:
        incident = incidents.get(session, number)
        assert log.verify(incident, log.entries(session, number)) is None


def test_a_bug_proposing_steps_is_logged_once_and_the_worker_goes_on(
    rig: Rig, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    rig.write(TWO_STEPS)
    healthy = rig.fire()  # proposed before the bug appears

    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("a bug")

    monkeypatch.setattr(engine, "advance", broken)
    worker = Worker(rig.db, rig.settings, rig.clock)
    number = rig.fire()  # ingest freezes the runbook; proposing it fails in the worker
    worker.propose()
    worker.propose()

    frozen = rig.frozen(number)
    assert frozen is not None and frozen.proposed_at is not None and rig.runs(number) == {}
    # The rig's own worker met the bug first; ours finds nothing left to propose.
    assert rig.types(number).count("runbook.propose_failed") == 1
    assert "proposing steps failed" in caplog.text
    assert rig.states(healthy)  # the other incident's steps are untouched
    with rig.db.session() as session:
        incident = incidents.get(session, number)
        assert log.verify(incident, log.entries(session, number)) is None

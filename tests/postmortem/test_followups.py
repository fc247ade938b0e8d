"""Follow-ups (bot.postmortem.followups) on SQLite and PostgreSQL: validation, the incident
log, listing, and the RMA follow-up a `gpu.fault_history` run calls for; then the
`runbook-bot followup` commands run in-process."""

from __future__ import annotations

from datetime import date, timedelta
from pathlib import Path

import pytest

from bot.cli import main
from bot.clock import FrozenClock
from bot.db import Database
from bot.errors import IncidentNotFound, PayloadInvalid
from bot.incidents import log
from bot.postmortem import followups
from bot.postmortem.models import Followup
from bot.worker import Worker
from tests.runbooks.rig import Rig
from tests.support import working
from tests.support.cli import Run
from tests.support.payloads import alert, notification, resolved
from tests.support.rows import log_types, verifies

ALICE = log.Actor.human("slack:UALICE", "@alice")
HISTORY = """\
    id: gpu-xid
    title: Single GPU fault
    version: 1
    match: {alerts: [GPUXIDError]}
    facts:
      node: "{{ labels.Hostname }}"
      gpu: "{{ labels.gpu }}"
    steps:
      - id: history
        title: This card's earlier drops
        action: gpu.fault_history
        with: {node: "{{ facts.node }}", gpu: "{{ facts.gpu }}", window: 7d}
"""


@pytest.fixture(autouse=True)
def known_people(monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI's `--as` names a person of the settings: these are."""
    monkeypatch.setenv("RUNBOOK_BOT_PEOPLE", '{"alice": {}, "bob": {}, "carol": {}}')


@pytest.fixture
def rig(db: Database, clock: FrozenClock, tmp_path: Path) -> Rig:
    return Rig(db, clock, tmp_path)


def _add(rig: Rig, number: int, title: str = "ECC growth alert", **extra: object) -> Followup:
    fields: dict[str, object] = {
        "type": "prevent",
        "owner": "slack:UBOB",
        "deadline": date(2026, 12, 31),
        "link": None,
        "actor": ALICE,
        "now": rig.clock.now(),
    }
    fields.update(extra)
    with rig.db.transaction() as session:
        return followups.add(session, number, title, **fields)  # type: ignore[arg-type]


def test_add_stores_the_item_and_logs_who_added_what_for_whom(rig: Rig) -> None:
    number = rig.fire()

    item = _add(
        rig,
        number,
        "  Alert on ECC growth\n rate  ",
        type="mitigate",
        link="https://jira.example.com/browse/OPS-12",
    )

    assert (item.title, item.type, item.status, item.source) == (
        "Alert on ECC growth rate",
        "mitigate",
        "open",
        "person",
    )
    assert (item.owner, item.deadline, item.created_by) == (
        "slack:UBOB",
        date(2026, 12, 31),
        "slack:UALICE",
    )
    entry = rig.log(number)[-1]
    assert entry.type == "followup.added"
    assert entry.actor_id == "slack:UALICE"
    assert f"#{item.id}" in entry.summary and "slack:UBOB" in entry.summary
    assert "2026-12-31" in entry.summary
    assert entry.data["owner"] == "slack:UBOB" and entry.data["deadline"] == "2026-12-31"
    assert verifies(rig.db, number)


@pytest.mark.parametrize(
    ("extra", "title", "said"),
    [
        ({}, "   ", "needs a title"),
        ({}, "x" * 501, "at most 500"),
        ({"type": "fix"}, "t", "mitigate, prevent, process"),
        ({"owner": "Bob Smith"}, "t", "slack:U0123ABC"),
        ({"owner": "<@UBOB>"}, "t", "not a person id"),
        ({"deadline": "2026-12-31"}, "t", "like 2026-12-31"),
        ({"link": "jira/OPS-12"}, "t", "not a web link"),
        ({"link": "ftp://x.example.com/a"}, "t", "not a web link"),
    ],
)
def test_add_refuses_bad_input_and_changes_nothing(
    rig: Rig, extra: dict[str, object], title: str, said: str
) -> None:
    number = rig.fire()
    before = log_types(rig.db, number)

    with pytest.raises(PayloadInvalid, match=said):
        _add(rig, number, title, **extra)

    assert log_types(rig.db, number) == before
    with rig.db.session() as session:
        assert followups.of_incident(session, number) == []


def test_add_to_an_incident_that_does_not_exist(rig: Rig) -> None:
    with pytest.raises(IncidentNotFound, match="INC-42 does not exist"):
        _add(rig, 42)


def test_update_changes_only_what_is_given_and_done_closes_it(rig: Rig) -> None:
    number = rig.fire()
    item = _add(rig, number, owner=None, deadline=None)
    later = rig.clock.now() + timedelta(hours=1)

    with rig.db.transaction() as session:
        changed = followups.update(
            session,
            item.id,
            owner="slack:UCAROL",
            deadline=date(2027, 1, 15),
            actor=ALICE,
            now=later,
        )
    assert (changed.owner, changed.deadline, changed.status) == (
        "slack:UCAROL",
        date(2027, 1, 15),
        "open",
    )
    entry = rig.log(number)[-1]
    assert entry.type == "followup.updated"
    assert entry.data["changes"]["owner"] == {"before": None, "after": "slack:UCAROL"}
    assert "deadline -> 2027-01-15" in entry.summary

    with rig.db.transaction() as session:
        done = followups.update(session, item.id, status="done", actor=ALICE, now=later)
    assert done.status == "done" and done.closed_at is not None
    assert rig.log(number)[-1].type == "followup.done"

    # The same again is a no-op (no second entry); reopening clears closed_at.
    count = len(rig.log(number))
    with rig.db.transaction() as session:
        followups.update(session, item.id, status="done", actor=ALICE, now=later)
    assert len(rig.log(number)) == count
    with rig.db.transaction() as session:
        reopened = followups.update(session, item.id, status="open", actor=ALICE, now=later)
    assert reopened.closed_at is None
    assert rig.log(number)[-1].type == "followup.updated"
    assert verifies(rig.db, number)


def test_update_refuses_bad_values_and_unknown_ids(rig: Rig) -> None:
    number = rig.fire()
    item = _add(rig, number)
    now = rig.clock.now()
    with rig.db.transaction() as session, pytest.raises(PayloadInvalid, match="open, done"):
        followups.update(session, item.id, status="finished", actor=ALICE, now=now)
    with rig.db.transaction() as session, pytest.raises(PayloadInvalid, match="nothing to change"):
        followups.update(session, item.id, actor=ALICE, now=now)
    with rig.db.transaction() as session, pytest.raises(PayloadInvalid, match="#999 does not"):
        followups.update(session, 999, status="done", actor=ALICE, now=now)


def test_open_items_across_incidents_earliest_deadline_first(rig: Rig) -> None:
    one, two = rig.fire(), rig.fire()
    late = _add(rig, one, "late", deadline=date(2027, 3, 1))
    undated = _add(rig, two, "undated", deadline=None)
    soon = _add(rig, two, "soon", deadline=date(2026, 12, 5))
    closed = _add(rig, one, "closed")
    with rig.db.transaction() as session:
        followups.update(session, closed.id, status="cancelled", actor=ALICE, now=rig.clock.now())
        assert [i.id for i in followups.open_items(session)] == [soon.id, late.id, undated.id]
        assert [i.id for i in followups.of_incident(session, one)] == [late.id, closed.id]


def test_a_second_drop_in_a_week_adds_the_rma_follow_up_once(rig: Rig) -> None:
    rig.write(HISTORY)
    first = alert(starts_at="2026-11-25T03:00:00Z", xid="79")
    rig.ingest(notification([first]))
    rig.ingest(notification([resolved(first, ends_at="2026-11-25T05:00:00Z")]))
    second = rig.ingest(notification([alert(starts_at="2026-11-29T22:00:00Z", xid="79")]))
    number = second.incident
    worker = Worker(rig.db, rig.settings, rig.clock)
    worker.propose()
    for _ in range(10):
        if not working.passed(worker):
            break
    run = rig.runs(number)["history"]
    assert run.state == "succeeded" and run.result is not None and run.result["rma"] is True

    # The worker added it when the step succeeded (the runbook's RMA item).
    with rig.db.session() as session:
        added = followups.of_incident(session, number)
    assert [(i.title, i.type, i.source, i.owner, i.deadline) for i in added] == [
        (
            "RMA: replace gpu-node-02/GPU 5 (dropped twice this week)",
            "mitigate",
            "runbook",
            None,
            None,
        )
    ]
    assert any((e.type, e.actor_id) == ("followup.added", "runbook-bot") for e in rig.log(number))

    # Never twice, even once it is done.
    with rig.db.transaction() as session:
        assert followups.from_runs(session, number, rig.clock.now()) == []
        followups.update(session, added[0].id, status="done", actor=ALICE, now=rig.clock.now())
        assert followups.from_runs(session, number, rig.clock.now()) == []
        assert len(followups.of_incident(session, number)) == 1


def test_no_rma_follow_up_without_a_repeat(rig: Rig) -> None:
    rig.write(HISTORY)
    number = rig.fire(host="gpu-node-02", xid="79")
    worker = Worker(rig.db, rig.settings, rig.clock)
    for _ in range(10):
        if not working.passed(worker):
            break
    run = rig.runs(number)["history"]
    assert run.state == "succeeded" and run.result is not None and run.result["rma"] is False
    with rig.db.transaction() as session:
        assert followups.from_runs(session, number, rig.clock.now()) == []


def test_rma_titles() -> None:
    assert (
        followups.rma_title({"node": "gpu-node-02", "card": "GPU-6648", "drops": 3})
        == "RMA: replace GPU-6648 on gpu-node-02 (dropped 3 times this week)"
    )


# --- runbook-bot followup ------------------------------------------------------------------


def test_cli_add_list_set_done(run: Run, inc1: int, db: Database) -> None:
    code, out, err = run(
        "followup",
        "add",
        "INC-1",
        "ECC growth rate alert",
        "--owner",
        "slack:UBOB",
        "--deadline",
        "2026-12-31",
        "--type",
        "mitigate",
        "--link",
        "https://jira.example.com/browse/OPS-12",
        "--as",
        "alice",
    )
    assert (code, err) == (0, "")
    assert out.startswith("follow-up #1 added to INC-1: ECC growth rate alert (mitigate, open;")
    assert "note:" not in out

    code, out, _ = run("followup", "add", "INC-1", "SOP: act on ECC thresholds", "--as", "alice")
    assert code == 0 and "cannot be final until it has an owner and a deadline" in out

    code, out, _ = run("followup", "list", "INC-1")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split() == ["ID", "INC", "TYPE", "STATUS", "OWNER", "DEADLINE", "TITLE"]
    assert "#1" in lines[1] and "slack:UBOB" in lines[1] and "2026-12-31" in lines[1]
    assert "<https://jira.example.com/browse/OPS-12>" in lines[1]
    assert "#2" in lines[2] and "SOP: act on ECC thresholds" in lines[2]

    code, out, _ = run(
        "followup", "set", "2", "--owner", "bob", "--deadline", "2027-01-10", "--as", "carol"
    )
    assert code == 0 and "(prevent, open; bob, 2027-01-10)" in out
    assert "bob has no chat address" in out

    code, out, _ = run("followup", "done", "#1", "--as", "bob")
    assert (code, out) == (0, "follow-up #1 of INC-1 is done: ECC growth rate alert\n")
    code, out, _ = run("followup", "list", "--open")
    assert code == 0 and "#2" in out and "#1 " not in out
    code, out, _ = run("followup", "list", "INC-1", "--open")
    assert "#1 " not in out
    assert log_types(db, inc1)[-4:] == [
        "followup.added",
        "followup.added",
        "followup.updated",
        "followup.done",
    ]


def usage_error(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    """argparse's own refusals exit 2 from inside `main`; what it said on stderr."""
    capsys.readouterr()
    with pytest.raises(SystemExit) as exited:
        main(list(argv))
    assert exited.value.code == 2
    return capsys.readouterr().err


def test_cli_errors(run: Run, inc1: int, capsys: pytest.CaptureFixture[str]) -> None:
    err = usage_error(
        capsys, "followup", "add", "INC-1", "t", "--deadline", "31.12.2026", "--as", "a"
    )
    assert "'31.12.2026' is not a date: write the deadline like 2026-12-31" in err
    code, _, err = run("followup", "add", "INC-9", "t", "--as", "alice")
    assert code == 1 and "INC-9 does not exist" in err
    code, _, err = run("followup", "add", "INC-1", "t", "--link", "nope", "--as", "alice")
    assert code == 1 and "not a web link" in err
    code, _, err = run("followup", "add", "INC-1", "t", "--owner", "Bob Smith", "--as", "alice")
    assert code == 1 and "slack:U0123ABC" in err
    code, _, err = run("followup", "done", "7", "--as", "alice")
    assert code == 1 and "follow-up #7 does not exist" in err
    assert "not a follow-up id" in usage_error(capsys, "followup", "done", "seven", "--as", "a")
    code, _, err = run("followup", "set", "1", "--as", "alice")
    assert code == 2 and "give --owner, --deadline, --status or --link" in err
    err = usage_error(capsys, "followup", "set", "1", "--status", "finished", "--as", "a")
    assert "invalid choice: 'finished'" in err
    code, out, _ = run("followup", "list")
    assert (code, out) == (0, "No follow-up is open\n")
    code, out, _ = run("followup", "list", "INC-1")
    assert (code, out) == (0, "INC-1 has no follow-ups\n")

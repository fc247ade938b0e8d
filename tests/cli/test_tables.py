"""`runbook-bot steps` and the other tables, run in-process as a shell would: as wide as
COLUMNS says (80, 40) with no word cut, one row a line on a pipe, colour only on a
terminal (FORCE_COLOR) and never with NO_COLOR or --no-color; who approved each step."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from bot.clock import FrozenClock
from bot.db import Database
from tests.cli.conftest import ANSI, plain
from tests.runbooks.rig import ROLES, Rig
from tests.support.cli import Run

RUNBOOK = """\
    id: gpu-xid
    title: Single GPU fault
    version: 1
    match: {alerts: [GPUXIDError]}
    facts:
      node: "{{ labels.Hostname }}"
    steps:
      - id: power_cycle
        title: Power-cycle the node through its BMC so the GPU comes back on the bus
        action: bmc.power_cycle
        with:
          node: "{{ facts.node }}"
          reason: "XID 79 on {{ facts.node }}: the GPU fell off the bus and needs power"
      - id: uncordon
        title: Put the node back into service once its GPUs answer again
        action: k8s.uncordon
        when: steps.power_cycle.ok
        with: {node: "{{ facts.node }}"}
      - {id: vendor, title: Call the vendor if it happens again, manual: call them}
"""
HEADER = ["STEP", "STATE", "ACTION", "APPROVALS", "SUMMARY"]


@pytest.fixture
def incident(
    db: Database, clock: FrozenClock, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[Rig, int]:
    """An incident whose first step, a power cycle, needs two people."""
    rig = Rig(db, clock, tmp_path)
    rig.write(RUNBOOK)
    monkeypatch.setenv("RUNBOOK_BOT_DATABASE_URL", db.url)
    return rig, rig.fire()


def _words(text: str) -> set[str]:
    return set(plain(text).split())


def test_steps_names_who_approved_after_the_count(run: Run, incident: tuple[Rig, int]) -> None:
    rig, number = incident

    before = run("steps", f"INC-{number}")[1]
    rig.approve(number, "power_cycle", "alice")
    one = run("steps", f"INC-{number}")[1]
    rig.approve(number, "power_cycle", "bob")
    code, both, _ = run("steps", f"INC-{number}")

    assert code == 0
    row = {line.split()[0]: line for line in both.splitlines()[2:]}
    assert row["power_cycle"].split()[:4] == ["power_cycle", "approved", "bmc.power_cycle", "2/2"]
    assert "2/2 (alice, bob)" in row["power_cycle"]
    assert "1/2 (alice)" in one and "0/2 " in before
    assert "· skipping it also skips uncordon" in before
    assert "skips" not in row["power_cycle"]  # approved: nobody skips it now
    assert row["vendor"].split()[:4] == ["vendor", "not", "reached", "manual"]


def test_a_pipe_gets_one_row_a_line_with_no_colour(run: Run, incident: tuple[Rig, int]) -> None:
    _, number = incident

    code, out, _ = run("steps", f"INC-{number}")

    lines = out.splitlines()
    assert code == 0
    assert lines[0] == f"INC-{number} follows gpu-xid v1"
    assert lines[1].split() == HEADER
    assert [line.split()[0] for line in lines[2:]] == ["power_cycle", "uncordon", "vendor"]
    assert "the GPU fell off the bus and needs power" in lines[2]  # not wrapped
    assert not ANSI.search(out)
    assert all(line == line.rstrip() for line in lines)


@pytest.mark.parametrize("columns", [80, 100])
def test_at_the_terminals_width_the_summary_wraps_readably_and_no_word_is_cut(
    run: Run, incident: tuple[Rig, int], monkeypatch: pytest.MonkeyPatch, columns: int
) -> None:
    rig, number = incident
    rig.approve(number, "power_cycle", "alice")
    wide = run("steps", f"INC-{number}")[1]
    monkeypatch.setenv("COLUMNS", str(columns))

    code, out, _ = run("steps", f"INC-{number}")

    lines = out.splitlines()
    assert code == 0
    assert max(len(line) for line in lines) <= columns
    assert lines[1].split() == HEADER  # still a table
    assert _words(out) == _words(wide)  # every word there, whole
    summary_at = lines[1].index("SUMMARY")
    assert columns - summary_at >= 24, "the summary has room to be read"
    assert len(lines) > len(wide.splitlines())  # the summaries wrapped


def test_at_40_columns_each_step_is_a_block_of_labelled_lines(
    run: Run, incident: tuple[Rig, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    rig, number = incident
    rig.approve(number, "power_cycle", "alice")
    wide = run("steps", f"INC-{number}")[1]
    monkeypatch.setenv("COLUMNS", "40")

    code, out, _ = run("steps", f"INC-{number}")

    lines = out.splitlines()
    assert code == 0
    assert max(len(line) for line in lines) <= 40
    assert _words(out) - _words(wide) == {"state", "action", "approvals", "summary"}
    assert _words(wide) - _words(out) == {"-", *HEADER}  # a manual step's "-" says nothing
    starts = [line for line in lines if line and not line.startswith(" ")]
    assert starts[1:] == ["power_cycle", "uncordon", "vendor"]
    block = lines[lines.index("power_cycle") : lines.index("uncordon")]
    assert [line.split()[0] for line in block[1:] if not line.startswith("   ")] == [
        "state",
        "action",
        "approvals",
        "summary",
    ]
    assert "  approvals  1/2 (alice)" in block


def test_force_color_colours_the_state_and_no_color_or_the_flag_turns_it_off(
    run: Run, incident: tuple[Rig, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    _, number = incident
    piped = run("steps", f"INC-{number}")[1]
    monkeypatch.setenv("FORCE_COLOR", "1")

    coloured = run("steps", f"INC-{number}")[1]
    flagged = run("--no-color", "steps", f"INC-{number}")[1]
    monkeypatch.setenv("NO_COLOR", "1")
    no_color = run("steps", f"INC-{number}")[1]

    assert "\x1b[1;33mawaiting" in coloured  # bold yellow: a decision waits
    assert _words(coloured) == _words(piped)
    for text in (flagged, no_color):
        assert not re.search(r"\x1b\[[0-9;]*3[0-7]m", text), "no colour"  # bold may stay
        assert _words(text) == _words(piped)


def test_the_incident_list_fits_40_columns_too(
    run: Run, incident: tuple[Rig, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    wide = run("incidents", "list")[1]
    monkeypatch.setenv("COLUMNS", "40")

    code, out, _ = run("incidents", "list")

    assert code == 0
    assert max(len(line) for line in out.splitlines()) <= 40
    # Only the headers (each a label now) and a "-" for nothing are gone.
    assert _words(wide) - _words(out) <= {"-", *wide.splitlines()[0].split()}
    assert "INC-1" in out.split()


def test_a_refusal_for_want_of_a_note_names_the_flag_that_gives_one(
    run: Run, incident: tuple[Rig, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    rig, number = incident
    monkeypatch.setenv("RUNBOOK_BOT_ROLES", json.dumps(ROLES))
    call = "      - {id: call, title: Call, manual: call}\n"
    rig.write(RUNBOOK.replace("steps:\n", "steps:\n" + call))  # a manual step first
    manual = rig.fire()
    before = rig.types(number), rig.types(manual)

    code, out, err = run("incidents", "resolve", f"INC-{number}", "--as", "alice")
    done = run("done", f"INC-{manual}", "call", "--as", "alice", "--note", " ")

    assert (code, out) == (1, ""), err
    assert "is critical: say what was done before resolving it" in err
    assert err.rstrip().endswith("(give it with --note TEXT)")
    assert done[0] == 1 and done[2].rstrip().endswith("(give it with --note TEXT)"), done
    assert (rig.types(number), rig.types(manual)) == before

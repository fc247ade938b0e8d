"""Which later steps read a step (`bot.runbooks.dependents`): directly or through another
dependent, through `when`, `with` or `expect`, in runbook order; and the step rows people
see carry them."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from bot.clock import FrozenClock
from bot.db import Database
from bot.runbooks import service
from bot.runbooks.dependents import dependents, reads
from bot.runbooks.loader import load_file, parse
from bot.runbooks.schema import Runbook
from tests.runbooks.rig import Rig

CHAIN = """\
id: node-fault
title: Node fault
version: 1
match: {alerts: [GPUXIDError]}
facts:
  node: "{{ labels.Hostname }}"
steps:
  - id: status
    title: Node status
    action: k8s.node_status
    with: {node: "{{ facts.node }}"}
  - id: cordon
    title: Cordon the node
    action: k8s.cordon
    with: {node: "{{ facts.node }}", reason: "not ready"}
    when: not steps.status.ok
  - id: call
    title: Call the owner
    manual: Call the job's owner
  - id: drain
    title: Drain the node
    action: k8s.drain
    with: {node: "{{ facts.node }}", reason: "cordoned: {{ steps['cordon'].status }}"}
  - id: recheck
    title: Status again
    action: k8s.node_status
    with: {node: "{{ facts.node }}"}
    expect: {that: "steps.drain.ok and result.ready"}
  - id: ticket
    title: Open a ticket
    manual: Open a ticket
    when: steps.call.status == "succeeded"
"""


def chain() -> Runbook:
    return parse(textwrap.dedent(CHAIN)).runbook


def test_a_step_with_nothing_reading_it_has_no_dependents() -> None:
    assert dependents(chain(), "recheck") == ()
    assert dependents(chain(), "ticket") == ()


def test_dependents_are_transitive_and_in_runbook_order() -> None:
    # drain reads cordon (a subscript in `with`), recheck reads drain (in `expect`).
    assert dependents(chain(), "cordon") == ("drain", "recheck")
    assert dependents(chain(), "status") == ("cordon", "drain", "recheck")
    assert dependents(chain(), "call") == ("ticket",)


def test_reads_names_the_steps_a_steps_templates_look_up() -> None:
    steps = {step.id: step for step in chain().steps}
    assert reads(steps["cordon"]) == {"status"}
    assert reads(steps["drain"]) == {"cordon"}
    assert reads(steps["recheck"]) == {"drain"}
    assert reads(steps["call"]) == set()


def test_an_unknown_step_is_refused_with_the_runbooks_steps() -> None:
    with pytest.raises(KeyError, match="no step 'cordn'; its steps: status, cordon"):
        dependents(chain(), "cordn")


def test_the_shipped_xid_runbook_skipping_cordon_skips_the_recovery() -> None:
    runbook = load_file(Path(__file__).resolve().parents[2] / "runbooks/gpu-xid.yaml").runbook
    following = dependents(runbook, "cordon")
    assert following[:2] == ("drain", "reset")
    assert "power_cycle" in following and "uncordon" in following
    assert "notify_owner" not in following  # the application branch reads classify only
    assert dependents(runbook, "snapshot") == ()


def test_step_rows_carry_each_steps_dependents(
    db: Database, clock: FrozenClock, tmp_path: Path
) -> None:
    rig = Rig(db, clock, tmp_path)
    rig.write(CHAIN)
    number = rig.fire(alertname="GPUXIDError")
    _runbook, rows = service.step_rows(db, number)
    assert {row.step: row.dependents for row in rows} == {
        "status": ("cordon", "drain", "recheck"),
        "cordon": ("drain", "recheck"),
        "call": ("ticket",),
        "drain": ("recheck",),
        "recheck": (),
        "ticket": (),
    }
    assert rows[0].as_dict()["dependents"] == ("cordon", "drain", "recheck")

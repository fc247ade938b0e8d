"""A read step's `expect`: validated (read actions only, `that` over known names and result
fields), and run by the engine as bounded re-reads due `every` apart, which wait in the
database (not in a sleeping worker) and end with the step's last read and what it saw."""

from __future__ import annotations

from datetime import timedelta

import pytest

from bot.incidents import log
from bot.runbooks import engine, service
from bot.runbooks.steps import StepState
from bot.runbooks.validate import validate_paths
from bot.sim import SimHandle
from bot.worker import Worker
from tests.runbooks.conftest import Write
from tests.runbooks.rig import Rig
from tests.support import working

NODE = "gpu-node-01"

pytestmark = pytest.mark.timeout(60)

EXPECTS = """\
    id: not-ready
    title: t
    version: 1
    match: {alerts: [GPUXIDError]}
    steps:
      - id: look
        title: Node status
        action: k8s.node_status
        with: {node: gpu-node-01}
        expect:
          that: result.ready != "True"
          reads: 3
          every: 30s
          meaning: the node NotReady, as the alert says
      - id: after
        title: After
        manual: go on
        when: steps.look.reads >= 1 and steps.look.error.kind == ""
      - id: flapping
        title: Flapping
        manual: it flaps
        when: steps.look.unexpected
"""


def _worker(rig: Rig, sim: SimHandle) -> Worker:
    return Worker(rig.db, rig.settings, rig.clock, kube_factory=sim.api_client)


def _drain(worker: Worker) -> int:
    for done in range(20):
        if not working.passed(worker):
            return done
    pytest.fail("the worker still had work after 20 rounds")


def _reads(rig: Rig, number: int) -> list[tuple[int, str]]:
    return [(run.attempt, run.state) for run in rig.all_runs(number, "look")]


# -- the engine ------------------------------------------------------------------------------


def test_a_read_that_contradicts_the_alert_is_read_again_every_interval_until_it_agrees(
    rig: Rig, sim: SimHandle
) -> None:
    rig.write(EXPECTS)
    number = rig.fire()
    worker = _worker(rig, sim)

    assert _drain(worker) == 1  # the first read: Ready=True

    assert _reads(rig, number) == [(1, "succeeded"), (2, "approved")]
    again = rig.all_runs(number, "look")[1]
    assert again.not_before == rig.clock.now() + timedelta(seconds=30)
    assert again.summary.startswith(
        "read 1 of 3 did not show the node NotReady, as the alert says (gpu-node-01: Ready=True"
    )
    assert "after" not in rig.states(number)  # nothing is decided on the early read
    reread = [e for e in rig.log(number) if e.type == "step.approved"][-1]
    assert reread.data["reread_of"] == rig.all_runs(number, "look")[0].id
    assert reread.data["read"] == 2 and reread.data["reads"] == 3

    rig.clock.advance(timedelta(seconds=29))
    assert worker.run_once() is False  # due in a second: the worker does not wait for it
    sim.cluster.set_node_ready(NODE, False)
    rig.clock.advance(timedelta(seconds=1))
    assert _drain(worker) == 1

    assert _reads(rig, number) == [(1, "succeeded"), (2, "succeeded")]
    assert rig.states(number)["after"] == "awaiting_approval"
    assert "step.unexpected" not in rig.types(number)


def test_reads_that_never_agree_end_the_step_with_its_last_read_and_say_what_they_saw(
    rig: Rig, sim: SimHandle
) -> None:
    rig.write(EXPECTS)
    number = rig.fire()
    worker = _worker(rig, sim)
    _drain(worker)
    for _ in range(2):
        rig.clock.advance(timedelta(seconds=30))
        assert _drain(worker) == 1

    assert _reads(rig, number) == [(1, "succeeded"), (2, "succeeded"), (3, "succeeded")]
    look = rig.runs(number)["look"]
    assert look.summary.startswith("gpu-node-01: Ready=True")
    read, note = look.summary.split(" — ")
    assert note == (
        "expected the node NotReady, as the alert says, but 3 reads over 1m did not show "
        "it; the steps after it go on from that last read"
    )
    unexpected = [e for e in rig.log(number) if e.type == "step.unexpected"]
    assert len(unexpected) == 1 and unexpected[0].data["run"] == look.id
    assert unexpected[0].summary == (
        "step look (Node status): expected the node NotReady, as the alert says, but 3 "
        f"reads over 1m did not show it (the last: {read}); the steps after it go on from "
        "that last read"
    )
    # `after` asks for a person; once it is done the engine sees `unexpected` (and says
    # it only once however often it walks the steps).
    rig.done(number, "after", "alice", "noted")
    assert rig.states(number)["flapping"] == "awaiting_approval"
    assert rig.types(number).count("step.unexpected") == 1
    assert worker.run_once() is False


def test_a_read_that_agrees_at_once_is_read_once(rig: Rig, sim: SimHandle) -> None:
    sim.cluster.set_node_ready(NODE, False)
    rig.write(EXPECTS)
    number = rig.fire()

    _drain(_worker(rig, sim))

    assert _reads(rig, number) == [(1, "succeeded")]
    assert rig.states(number) == {
        "look": "succeeded",
        "after": "awaiting_approval",
    }


def test_resolving_the_incident_cancels_a_re_read_that_waits(rig: Rig, sim: SimHandle) -> None:
    rig.write(EXPECTS)
    number = rig.fire()
    worker = _worker(rig, sim)
    _drain(worker)

    service.resolve(
        rig.db, number, actor=log.Actor.human("alice"), clock=rig.clock, disposition="flap"
    )
    rig.clock.advance(timedelta(minutes=5))

    assert _drain(worker) == 0
    assert _reads(rig, number) == [(1, "succeeded"), (2, "cancelled")]


def test_later_steps_see_a_failures_kind_and_a_timeout_as_its_own() -> None:
    refused = {"ok": False, "summary": "refused the login", "error": "credentials"}

    assert engine.seen(StepState.FAILED, refused, "refused the login")["error"] == {
        "kind": "credentials",
        "message": "refused the login",
    }
    assert engine.seen(StepState.FAILED, None, "no such node")["error"]["kind"] == "other"
    assert engine.seen(StepState.TIMED_OUT, None, "no result")["error"]["kind"] == "timeout"
    assert engine.seen(StepState.SUCCEEDED, {"ok": True}, "fine")["error"] == {
        "kind": "",
        "message": "",
    }


# -- validation -------------------------------------------------------------------------------


def _step(expect: str, action: str = "k8s.node_status", extra: str = "") -> str:
    return (
        "id: rb\ntitle: t\nversion: 1\nmatch: {alerts: [A]}\nsteps:\n"
        "  - {id: first, title: t, action: k8s.node_status, with: {node: n}}\n"
        f"  - id: look\n    title: t\n    action: {action}\n    with: {{node: n}}\n"
        f"    expect: {expect}\n{extra}"
    )


@pytest.mark.parametrize(
    ("expect", "problem"),
    [
        (
            '{that: result.redy == "False"}',
            "11:20 steps[1].expect.that: k8s.node_status's result has no field 'redy'; its "
            "fields: cordoned_by, dry_run, gpus_allocatable, gpus_allocated, node, ok, "
            "pods_by_owner, ready, ready_reason, ready_since, summary, taints, unschedulable",
        ),
        (
            '{that: "result.ready ==", reads: 3}',
            "11:20 steps[1].expect.that: template 'result.ready ==' does not parse: "
            "unexpected 'end of template'",
        ),
        (
            "{that: steps.look.ok}",
            "11:20 steps[1].expect.that: `expect` sees this step's own read as `result`, not "
            "steps.look",
        ),
        (
            '{that: steps.lok.ok and result.ready == "False"}',
            "11:20 steps[1].expect.that: unknown step 'lok'; the steps here are first",
        ),
        (
            '{that: result.ready == "False", reads: 1}',
            "11:52 steps[1].expect.reads: Input should be greater than or equal to 2, not 1",
        ),
        (
            '{that: result.ready == "False", every: 2h}',
            "11:52 steps[1].expect.every: re-read every 1s to 1h, not 2h",
        ),
        (
            '{that: result.ready == "False", tries: 3}',
            "11:45 steps[1].expect.tries: unknown key 'tries'; did you mean 'reads'?",
        ),
    ],
)
def test_validate_points_at_what_is_wrong_with_an_expect(
    write: Write, expect: str, problem: str
) -> None:
    problems = [str(p) for p in validate_paths([write(_step(expect))])]

    assert problems == [f"rb.yaml:{problem}"]


def test_only_read_actions_may_expect(write: Write) -> None:
    path = write(_step("{that: result.ok}", action="k8s.cordon"))

    problems = [str(p) for p in validate_paths([path])]

    assert problems == [
        "rb.yaml:11:5 steps[1].expect: `expect` re-runs the step until its read agrees, so "
        "only read actions may have it; k8s.cordon is change risk"
    ]


def test_a_manual_step_cannot_expect(write: Write) -> None:
    text = (
        "id: rb\ntitle: t\nversion: 1\nmatch: {alerts: [A]}\nsteps:\n"
        "  - {id: look, title: t, manual: look, expect: {that: result.ok}}\n"
    )

    problems = [str(p) for p in validate_paths([write(text)])]

    assert len(problems) == 1
    assert "`expect` re-reads an action's result; a manual step has none" in problems[0]


def test_an_expect_may_use_labels_facts_earlier_steps_and_mapping_methods(write: Write) -> None:
    expect = (
        '{that: \'labels.alertname != "A" or (steps.first.ok and '
        'result.get("ready") != "True")\', reads: 4, every: 20s}'
    )

    assert validate_paths([write(_step(expect))]) == []

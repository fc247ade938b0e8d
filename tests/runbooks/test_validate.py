"""`validate`: what the schema cannot see, each reported at the node to edit, with the fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.runbooks import validate
from bot.runbooks.loader import RunbookInvalid
from tests.runbooks.conftest import STEPS, Write, runbook
from tests.support.cli import Run


def found(*paths: Path) -> list[str]:
    return [str(problem) for problem in validate.validate_paths(list(paths))]


def edited(old: str, new: str, text: str = STEPS) -> str:
    assert old in text
    return text.replace(old, new, 1)


def test_valid_runbooks_have_no_problems(write: Write) -> None:
    assert found(write(STEPS), write(runbook(), "gpu.yaml")) == []


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        pytest.param(
            "action: bmc.power_cycle",
            "action: bmc.power_cylce",
            "rb.yaml:15:13 steps[1].action: unknown action 'bmc.power_cylce'; "
            "did you mean 'bmc.power_cycle'?",
            id="unknown-action",
        ),
        pytest.param(
            '    with: {node: "{{ facts.node }}"}\n    when',
            '    with: {nod: "{{ facts.node }}"}\n    when',
            [
                "rb.yaml:16:11 steps[1].with: bmc.power_cycle needs parameter 'node' in `with`",
                "rb.yaml:16:12 steps[1].with.nod: bmc.power_cycle has no parameter 'nod'; "
                "did you mean 'node'?",
            ],
            id="unknown-parameter",
        ),
        pytest.param(
            '    with: {node: "{{ facts.node }}"}\n    when',
            '    with: {reason: "down"}\n    when',
            "rb.yaml:16:11 steps[1].with: bmc.power_cycle needs parameter 'node' in `with`",
            id="missing-parameter",
        ),
        pytest.param(
            "    action: bmc.power_cycle\n",
            "    action: bmc.power_cycle\n    approval: one\n",
            "rb.yaml:16:15 steps[1].approval: approval 'one' is below the risk of "
            "bmc.power_cycle (disruptive needs 'two')",
            id="approval-below-risk",
        ),
        pytest.param(
            "    action: bmc.power_status\n",
            "    action: bmc.power_status\n    approval: auto\n",
            None,
            id="approval-equal-to-risk",
        ),
        pytest.param(
            "    when: not steps.status.ok",
            "    when: not steps.status.ok and",
            "rb.yaml:17:11 steps[1].when: template 'not steps.status.ok and' does not parse: "
            "unexpected 'end of template'",
            id="when-syntax",
        ),
        pytest.param(
            '  bmc: "{{ facts.node }}-bmc"',
            '  bmc: "{{ facts.node | nope }}-bmc"',
            "rb.yaml:7:8 facts.bmc: template '{{ facts.node | nope }}-bmc' does not parse: "
            "No filter named 'nope'.",
            id="fact-syntax",
        ),
        pytest.param(
            '    with: {node: "{{ facts.node }}"}\n    when',
            '    with: {node: "{{ facts.nod }}"}\n    when',
            "rb.yaml:16:18 steps[1].with.node: unknown fact 'nod'; did you mean 'node'?",
            id="unknown-fact",
        ),
        pytest.param(
            '  node: "{{ labels.Hostname }}"',
            '  node: "{{ facts.bmc }}"',
            "rb.yaml:6:9 facts.node: fact 'bmc' is defined below 'node'; a fact sees only "
            "the facts above it",
            id="later-fact",
        ),
        pytest.param(
            '  bmc: "{{ facts.node }}-bmc"',
            '  bmc: "{{ facts.bmc }}-bmc"',
            "rb.yaml:7:8 facts.bmc: fact 'bmc' uses itself",
            id="fact-uses-itself",
        ),
        pytest.param(
            '  bmc: "{{ facts.node }}-bmc"',
            '  bmc: "{{ steps.status.result }}"',
            "rb.yaml:7:8 facts.bmc: a fact cannot use steps: facts are rendered when the "
            "incident opens, from labels, annotations and the facts above",
            id="fact-uses-steps",
        ),
        pytest.param(
            "    when: not steps.status.ok",
            "    when: not steps.stauts.ok",
            "rb.yaml:17:11 steps[1].when: unknown step 'stauts'; did you mean 'status'?",
            id="unknown-step",
        ),
        pytest.param(
            '    with: {node: "{{ facts.node }}"}\n  - id: cycle',
            '    with: {node: "{{ facts.node }}"}\n    when: steps.cycle.ok\n  - id: cycle',
            "rb.yaml:13:11 steps[0].when: step 'cycle' comes later; a step sees only the "
            "steps before it",
            id="later-step",
        ),
        pytest.param(
            "    when: not steps.status.ok",
            "    when: not steps.cycle.ok",
            "rb.yaml:17:11 steps[1].when: step 'cycle' cannot use its own result",
            id="own-step",
        ),
        pytest.param(
            '    with: {node: "{{ facts.node }}"}\n    when',
            '    with: {node: "{{ lables.Hostname }}"}\n    when',
            "rb.yaml:16:18 steps[1].with.node: unknown name 'lables'; did you mean 'labels'? "
            "(templates here see annotations, facts, incident, labels, steps)",
            id="unknown-name",
        ),
        pytest.param(
            'regex: ".+"}]}',
            'regex: ".+"}, {label: node, regex: "gpu-(node"}]}',
            "rb.yaml:4:91 match.labels[1].regex: regex does not compile: missing ), "
            "unterminated subpattern at position 4",
            id="regex",
        ),
    ],
)
def test_each_check_reports_at_the_offending_node(
    write: Write, old: str, new: str, expected: str | list[str] | None
) -> None:
    if expected is None:
        expected = []
    assert found(write(edited(old, new))) == ([expected] if isinstance(expected, str) else expected)


def test_approval_may_raise_the_risk(write: Write) -> None:
    text = edited(
        "    action: bmc.power_status\n", "    action: bmc.power_status\n    approval: two\n"
    )

    loaded = validate.load_valid([write(text)])

    assert loaded[0].runbook.steps[0].approval == "two"


def test_templates_in_nested_parameters_are_checked_at_their_own_node(write: Write) -> None:
    text = edited(
        '    with: {node: "{{ facts.node }}"}\n  - id: cycle',
        '    with:\n      node: n\n      extra: [a, {b: "{{ facts.gpu }}"}]\n  - id: cycle',
    )

    assert found(write(text)) == [
        "rb.yaml:14:7 steps[0].with.extra: bmc.power_status has no parameter 'extra'; "
        "its parameters: node",
        "rb.yaml:14:22 steps[0].with.extra[1].b: unknown fact 'gpu'; the facts here are node, bmc",
    ]


def test_duplicate_runbook_ids_across_files_point_at_the_later_one(write: Write) -> None:
    write(runbook(id="gpu-xid"), "a.yaml")
    write(runbook(id="gpu-xid", match="alerts: [Other]"), "b.yaml")

    assert found(Path(".")) == [
        "b.yaml:1:5 id: runbook id 'gpu-xid' is also used by a.yaml:1:5",
    ]


def test_a_second_fallback_runbook_is_an_error(write: Write) -> None:
    write(runbook(id="default", match="fallback: true"), "a.yaml")
    write(runbook(id="catch-all", match="fallback: true"), "b.yaml")

    assert found(Path(".")) == [
        "b.yaml:4:19 match.fallback: a second fallback runbook: 'default' (a.yaml:4:19) "
        "already answers alerts no other runbook matches",
    ]


def test_same_priority_runbooks_for_one_alert_get_a_warning_that_does_not_invalidate(
    write: Write,
) -> None:
    write(runbook(id="xid", match="alerts: [GPUXIDError, GPUDown]"), "a.yaml")
    write(runbook(id="down", match="alerts: [GPUDown], priority: 0"), "b.yaml")

    problems = validate.validate_paths([Path(".")])

    assert [str(p) for p in problems] == [
        "b.yaml:4:38 match.priority: warning: 'xid' (a.yaml:4:8) also matches alert "
        "'GPUDown' at priority 0, where the id that sorts first wins ('down'); give one a "
        "higher match.priority, or label matchers that rule the other out",
    ]
    assert [p.is_warning for p in problems] == [True]
    assert [r.runbook.id for r in validate.load_valid([Path(".")])] == ["xid", "down"]


@pytest.mark.parametrize(
    ("first", "second", "warned"),
    [
        ("alerts: [A]", "alerts: [B]", False),
        ("alerts: [A]", "alerts: [A], priority: 10", False),
        ("alerts: [A]", "labels: [{label: node, equals: n1}]", True),
        ("alerts: [A], labels: [{label: xid, equals: '79'}]", "alerts: [A]", True),
        (
            "alerts: [A], labels: [{label: xid, equals: '79'}]",
            "alerts: [A], labels: [{label: xid, in: ['13', '31']}]",
            False,
        ),
        (
            "alerts: [A], labels: [{label: xid, in: ['13', '79']}]",
            "alerts: [A], labels: [{label: xid, in: ['31', '79']}]",
            True,
        ),
        (
            "alerts: [A], labels: [{label: xid, equals: '79'}]",
            "alerts: [A], labels: [{label: xid, not_equals: '79'}]",
            False,
        ),
        (
            "alerts: [A], labels: [{label: xid, in: ['13', '31']}]",
            "alerts: [A], labels: [{label: xid, regex: '7[0-9]'}]",
            False,
        ),
        (
            "alerts: [A], labels: [{label: xid, regex: '1[0-9]'}]",
            "alerts: [A], labels: [{label: xid, regex: '7[0-9]'}]",
            True,
        ),
        ("alerts: [A]", "fallback: true", False),
    ],
)
def test_overlap_is_warned_unless_the_matchers_prove_the_runbooks_apart(
    write: Write, first: str, second: str, warned: bool
) -> None:
    write(runbook(id="one", match=first), "a.yaml")
    write(runbook(id="two", match=second), "b.yaml")

    problems = validate.validate_paths([Path(".")])

    assert [p.is_warning for p in problems] == ([True] if warned else [])


def test_files_that_do_not_load_report_their_problems_alongside_the_others(
    write: Write,
) -> None:
    write(runbook(id="a", match="alerts: [A]"), "a.yaml")
    write("id: b\nid: c\n", "b.yaml")
    write(edited("action: bmc.power_cycle", "action: bmc.power_cylce"), "c.yaml")

    checked = validate.check_paths([Path(".")])

    assert [str(p) for p in checked.problems] == [
        "b.yaml:2:1 id: duplicate key 'id' (first at line 1)",
        "c.yaml:15:13 steps[1].action: unknown action 'bmc.power_cylce'; did you mean "
        "'bmc.power_cycle'?",
    ]
    assert [r.runbook.id for r in checked.runbooks] == ["a", "node-down"]
    with pytest.raises(RunbookInvalid) as raised:
        validate.load_valid([Path(".")])
    assert raised.value.problems == checked.errors


def label_runbook(match: str, template: str, *, where: str = "fact") -> str:
    """A runbook whose match is `match` (flow style) and that uses `template` in a fact,
    a step's `with` or its `when`, on line 7."""
    uses = {
        "fact": f'facts:\n  value: "{template}"\nsteps: [{{id: a, title: t, manual: m}}]\n',
        "with": (
            "facts: {}\nsteps:\n"
            f'  - {{id: a, title: t, action: k8s.node_status, with: {{node: "{template}"}}}}\n'
        ),
        "when": f"facts: {{}}\nsteps:\n  - {{id: a, title: t, manual: m, when: {template}}}\n",
    }
    return f"id: x\ntitle: t\nversion: 1\nmatch: {{{match}}}\n{uses[where]}"


def test_a_template_using_a_label_the_match_does_not_require_is_warned_naming_both(
    write: Write, run: Run
) -> None:
    write(
        label_runbook(
            'alerts: [NodeDown], labels: [{label: node, regex: ".+"}]', "{{ labels.nodename }}"
        )
    )

    code, out, _ = run("validate", "rb.yaml")

    assert code == 0
    assert out.splitlines() == [
        "rb.yaml:6:10 facts.value: warning: labels.nodename: the match (alerts [NodeDown]; "
        "labels [node]) does not require label 'nodename', so an alert without it fails "
        "this template at run time; require it in match.labels ({label: nodename, regex: "
        "\".+\"}) or give a fallback: labels.nodename | default('')",
        "1 runbook valid (1 warning)",
    ]
    assert run("validate", "--strict", "rb.yaml")[:2] == (
        1,
        out.splitlines()[0] + "\n1 warning (--strict: warnings fail)\n",
    )


@pytest.mark.parametrize(
    ("match", "template", "where", "warned"),
    [
        pytest.param(
            'labels: [{label: node, regex: ".+"}]',
            "{{ labels.node }}",
            "fact",
            [],
            id="required-by-regex",
        ),
        pytest.param(
            'labels: [{label: node, regex: ".*"}]',
            "{{ labels.node }}",
            "fact",
            ["node"],
            id="regex-that-accepts-empty",
        ),
        pytest.param(
            "labels: [{label: node, equals: n1}]",
            "{{ labels['node'] }}",
            "fact",
            [],
            id="required-by-equals-item-syntax",
        ),
        pytest.param(
            "labels: [{label: node, in: [a, '']}]",
            "{{ labels.node }}",
            "fact",
            ["node"],
            id="in-with-empty",
        ),
        pytest.param(
            "labels: [{label: node, not_equals: ''}]",
            "{{ labels.node }}",
            "fact",
            [],
            id="not-equals-empty",
        ),
        pytest.param(
            "labels: [{label: node, not_equals: x}]",
            "{{ labels.node }}",
            "fact",
            ["node"],
            id="not-equals-value",
        ),
        pytest.param("alerts: [A]", "{{ labels.alertname }}", "fact", [], id="alertname"),
        pytest.param("alerts: [A]", "{{ labels.rack | default('') }}", "fact", [], id="default"),
        pytest.param(
            "alerts: [A]",
            "{{ labels.rack | d(labels.row | default('')) }}",
            "fact",
            [],
            id="nested-defaults",
        ),
        pytest.param("alerts: [A]", "{{ labels.get('rack', '') }}", "fact", [], id="get"),
        pytest.param(
            "alerts: [A]",
            "{{ labels.rack if 'rack' in labels else '' }}",
            "fact",
            [],
            id="asked-with-in",
        ),
        pytest.param(
            "alerts: [A]",
            "{{ labels.rack if labels.rack is defined else labels.row }}",
            "fact",
            ["row"],
            id="asked-with-defined-not-in-else",
        ),
        pytest.param(
            "alerts: [A]", "{{ labels.rack ~ labels.row }}", "with", ["rack", "row"], id="in-with"
        ),
        pytest.param(
            "alerts: [A]", "labels.severity == 'critical'", "when", ["severity"], id="in-when"
        ),
        pytest.param(
            "fallback: true", "{{ labels.Hostname }}", "fact", ["Hostname"], id="fallback"
        ),
    ],
)
def test_which_label_uses_are_warned(
    write: Write, match: str, template: str, where: str, warned: list[str]
) -> None:
    problems = validate.validate_paths([write(label_runbook(match, template, where=where))])

    assert [p.message.split(":", 2)[1].strip() for p in problems] == [
        f"labels.{label}" for label in warned
    ]
    assert all(p.is_warning for p in problems)


def test_the_shipped_runbooks_use_only_labels_their_match_requires() -> None:
    shipped = Path(__file__).resolve().parents[2] / "runbooks"

    assert [str(p) for p in validate.validate_paths([shipped])] == []

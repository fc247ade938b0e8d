"""Loading runbook YAML: every problem at the exact file:line:column an author must edit,
and nothing but RunbookInvalid leaves the loader, whatever the bytes."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.errors import BotError
from bot.runbooks import loader
from bot.runbooks.loader import Problem, RunbookInvalid
from tests.runbooks.conftest import GOOD, Write, runbook


def problems(path: Path) -> list[str]:
    with pytest.raises(RunbookInvalid) as raised:
        loader.load_file(path)
    return [str(problem) for problem in raised.value.problems]


def test_a_valid_file_loads_and_knows_where_each_value_is(write: Write) -> None:
    loaded = loader.load_file(write(GOOD))

    assert loaded.runbook.id == "gpu-xid"
    assert [step.id for step in loaded.runbook.steps] == ["status", "cordon"]
    assert loaded.path == Path("rb.yaml")
    assert loaded.text == GOOD
    assert loaded.source.position(("steps", 1, "action")) == (15, 13)
    assert loaded.source.position(("steps", 1, "with", "node")) == (17, 13)
    assert loaded.source.position(("steps", 1, "with"), key=True) == (16, 5)
    # Not written: the nearest enclosing value.
    assert loaded.source.position(("steps", 1, "approval")) == (13, 5)


def test_problem_prints_file_line_column_where_and_message() -> None:
    problem = Problem("runbooks/gpu-xid.yaml", 23, 13, "steps[2].action", "unknown action")

    assert str(problem) == "runbooks/gpu-xid.yaml:23:13 steps[2].action: unknown action"
    assert str(Problem("a.yaml", 1, 1, "", "empty file")) == "a.yaml:1:1 empty file"


def test_runbook_invalid_is_a_bot_error_listing_every_problem() -> None:
    invalid = RunbookInvalid([Problem("a.yaml", 1, 1, "id", "x"), Problem("b.yaml", 2, 3, "", "y")])

    assert isinstance(invalid, BotError)
    assert str(invalid) == "2 problems in 2 files:\na.yaml:1:1 id: x\nb.yaml:2:3 y"


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        pytest.param(
            "    title: Cordon the node\n",
            "    title: Cordon the node\n    aproval: one\n",
            ["rb.yaml:15:5 steps[1].aproval: unknown key 'aproval'; did you mean 'approval'?"],
            id="typo-key",
        ),
        pytest.param(
            "version: 1\n",
            "version: one\n",
            [
                "rb.yaml:3:10 version: Input should be a valid integer, unable to parse "
                "string as an integer, not 'one'"
            ],
            id="wrong-type",
        ),
        pytest.param(
            "    title: Node status\n",
            "",
            ["rb.yaml:9:5 steps[0].title: required key is missing"],
            id="missing-key",
        ),
        pytest.param(
            "  - id: cordon\n",
            "  - id: status\n",
            ["rb.yaml:13:9 steps[1].id: step id 'status' is used twice (first at line 9)"],
            id="duplicate-step-id",
        ),
        pytest.param(
            "version: 1\n",
            "version: 1\nversion: 2\n",
            ["rb.yaml:4:1 version: duplicate key 'version' (first at line 3)"],
            id="duplicate-key",
        ),
        pytest.param(
            '    with: {node: "{{ facts.node }}"}\n',
            '    with: {node: "{{ facts.node }}"\n',
            [
                "rb.yaml:12:11 YAML: the mapping {...} opened here is not closed before line "
                "13, column 3: add the closing '}' where it ends (and a comma between its items)"
            ],
            id="bad-yaml",
        ),
        pytest.param(
            "    action: k8s.node_status\n",
            "    action: k8s.node_status\n    approval: three\n",
            [
                "rb.yaml:12:15 steps[0].approval: Input should be 'auto', 'one' or 'two', "
                "not 'three'"
            ],
            id="not-a-choice",
        ),
        pytest.param(
            "title: {en: Single GPU fault, zh: 单卡故障}\n",
            "title: 5\n",
            [
                "rb.yaml:2:8 title: Input should be a valid string, or a mapping of en, zh; "
                "YAML reads 5 as int: quote it"
            ],
            id="text-not-a-string",
        ),
        pytest.param(
            "title: {en: Single GPU fault, zh: 单卡故障}\n",
            "title: {en: Single GPU fault, fr: Panne}\n",
            ["rb.yaml:2:31 title.fr: unknown key 'fr'; expected one of en, zh"],
            id="text-mapping-unknown-language",
        ),
        pytest.param(
            "  alerts: [GPUXIDError]\n",
            "  alerts: [GPUXIDError]\n  labels: [{label: xid, equals: on}]\n",
            [
                "rb.yaml:6:33 match.labels[0].equals: Input should be a valid string; "
                "YAML reads on as bool: quote it"
            ],
            id="yaml-1.1-boolean",
        ),
        pytest.param(
            "    action: k8s.cordon\n",
            "    action: k8s.cordon\n    manual: Cordon it by hand\n",
            ["rb.yaml:13:5 steps[1]: a step has exactly one of action and manual"],
            id="model-validator",
        ),
        pytest.param(
            '  node: "{{ labels.Hostname }}"\n',
            '  Node: "{{ labels.Hostname }}"\n',
            ["rb.yaml:7:3 facts.Node: fact name 'Node': use lowercase letters, digits and _"],
            id="fact-name",
        ),
        pytest.param(
            "    action: k8s.cordon\n",
            "    action: k8s.cordon\n    timeout: 99999999999999d\n",
            [
                "rb.yaml:16:14 steps[1].timeout: '99999999999999d' is longer than 3650d; "
                "write a shorter duration"
            ],
            id="duration-overflow",
        ),
    ],
)
def test_each_problem_is_reported_at_the_node_to_edit(
    write: Write, old: str, new: str, expected: list[str]
) -> None:
    assert old in GOOD

    assert problems(write(GOOD.replace(old, new, 1))) == expected


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        pytest.param(
            "    title: Node status\n",
            "    title: Node status\n     manual: look\n",
            "rb.yaml:11:6 YAML: `manual:` is indented more than `title:` on line 10, so YAML "
            "reads it as more of the value of `title:`, where ': ' is not allowed: move it to "
            "column 5, like `title:`, or quote the value if the colon belongs to it",
            id="key-indented-more",
        ),
        pytest.param(
            "    title: Node status\n",
            "    title: Node status\n  manual: look\n",
            "rb.yaml:11:3 YAML: `manual:` starts at column 3, where the items of the list on "
            "line 9 start (`- id: status`), but it is not a list item: indent it to column 5 "
            "to go on with that item (like `title:`, line 10), or write '- ' before it to "
            "start a new item",
            id="key-at-the-items-column",
        ),
        pytest.param(
            "facts:\n",
            " facts:\n",
            "rb.yaml:6:2 YAML: this line is indented differently from the keys above it: "
            "`facts:` starts at column 2, the keys around it at column 3 (`alerts:`, line 5) "
            "or column 1 (`match:`, line 4); move it to the column of the key it belongs with "
            "(spaces only)",
            id="key-between-levels",
        ),
        pytest.param(
            "  - id: cordon\n",
            "   - id: cordon\n",
            "rb.yaml:13:4 YAML: this list item starts at column 4, the items of the lists "
            "above it at column 3 (line 9): line it up with the items of its list (spaces "
            "only)",
            id="list-item",
        ),
        pytest.param(
            "    title: Node status\n",
            "\ttitle: Node status\n",
            "rb.yaml:10:1 YAML: a tab character; YAML indents with spaces only: replace the "
            "tab with spaces",
            id="tab",
        ),
        pytest.param(
            "    title: Node status\n",
            "    title: Node status: first\n",
            "rb.yaml:10:23 YAML: the value of `title:` contains ': ' (a colon and a space), "
            'which YAML reads as the start of a key: put the whole value in quotes (key: "a: b")',
            id="colon-in-a-value",
        ),
        pytest.param(
            "    title: Node status\n",
            '    title: "Node status\n',
            "rb.yaml:10:12 YAML: this quoted value is not closed on its line, so YAML reads "
            "on past it to line 12 and fails there: add the closing quote where the value ends",
            id="unclosed-quote",
        ),
    ],
)
def test_a_yaml_mistake_is_said_in_plain_words_at_the_line_to_fix(
    write: Write, old: str, new: str, expected: str
) -> None:
    assert old in GOOD

    assert problems(write(GOOD.replace(old, new, 1))) == [expected]


def test_every_problem_of_a_file_is_reported_at_once_in_line_order(write: Write) -> None:
    text = GOOD.replace("version: 1", "version: x").replace("    title: Node status\n", "")
    text = text.replace("k8s.cordon", "k8s.cordon\n    retries: 9")

    assert problems(write(text)) == [
        "rb.yaml:3:10 version: Input should be a valid integer, unable to parse string as an "
        "integer, not 'x'",
        "rb.yaml:9:5 steps[0].title: required key is missing",
        "rb.yaml:15:14 steps[1].retries: Input should be less than or equal to 5, not 9",
    ]


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        pytest.param(
            b"",
            "rb.yaml:1:1 empty file; a runbook is a mapping with id, title, "
            "version, match and steps",
            id="empty",
        ),
        pytest.param(
            b"- a\n- b\n",
            "rb.yaml:1:1 a runbook is a mapping (id: ..., steps: ...), not a list",
            id="list",
        ),
        pytest.param(
            b"just text\n",
            "rb.yaml:1:1 a runbook is a mapping (id: ..., steps: ...), not a single value",
            id="scalar",
        ),
        pytest.param(
            b"id: a\n---\nid: b\n",
            "rb.yaml:2:1 YAML: more than one YAML document (---); a file holds one runbook",
            id="two-documents",
        ),
        pytest.param(
            b"id: a\ntitle: \xe5\x8d\x95\xff\n",
            "rb.yaml:2:9 not UTF-8 text (byte 0xff); save the file as UTF-8",
            id="not-utf-8",
        ),
        pytest.param(
            b"id: a\x00\n",
            "rb.yaml:1:6 YAML: character U+0000 is not allowed in YAML text",
            id="nul",
        ),
        pytest.param(
            b"a: &x [1]\nb: *x\n",
            "rb.yaml:1:4 YAML: anchor &x is not allowed in runbooks; write each value out",
            id="anchor",
        ),
        pytest.param(
            b"a: *x\n",
            "rb.yaml:1:4 YAML: alias *x is not allowed in runbooks; write the value out",
            id="alias",
        ),
        pytest.param(
            b"a: " + b"[" * 60 + b"]" * 60 + b"\n",
            "rb.yaml:1:43 YAML: nested deeper than 40 levels",
            id="deep",
        ),
        pytest.param(
            b"id: !!python/object:os.system x\n",
            "rb.yaml:1:5 id: YAML: could not "
            "determine a constructor for the tag 'tag:yaml.org,2002:python/object:"
            "os.system'",
            id="python-tag",
        ),
        pytest.param(
            b"id: a\nsteps: !!set {a, b}\n",
            "rb.yaml:2:8 steps: YAML tag 'tag:yaml.org,2002:set' is not supported here",
            id="set-tag",
        ),
        pytest.param(
            b"id: 2024-13-45\n",
            "rb.yaml:1:5 id: cannot read this value: month must be in 1..12",
            id="bad-date",
        ),
        pytest.param(
            b"? [a, b]\n: c\n",
            "rb.yaml:1:3 a key must be plain text, not a list or mapping",
            id="complex-key",
        ),
    ],
)
def test_files_that_are_no_runbook_yaml_are_one_positioned_problem(
    write: Write, content: bytes, expected: str
) -> None:
    assert problems(write(content)) == [expected]


def test_a_file_over_the_size_limit_is_refused_unread(write: Write) -> None:
    path = write(b"# " + b"x" * loader.MAX_BYTES + b"\n")

    assert problems(path) == ["rb.yaml:1:1 larger than 1024 KiB; is this a runbook?"]


def test_a_missing_file_is_a_problem_not_an_oserror() -> None:
    with pytest.raises(RunbookInvalid) as raised:
        loader.load_paths([Path("/nonexistent/rb.yaml")])

    assert [str(p) for p in raised.value.problems] == ["/nonexistent/rb.yaml:1:1 no such file"]


def test_load_paths_reads_a_directory_in_name_order_and_reports_all_files(write: Write) -> None:
    write(runbook(id="b"), "dir/b.yml")
    write(runbook(id="a"), "dir/a.yaml")
    write("not: [a runbook", "dir/notes.txt")
    write("id: hidden", "dir/.draft.yaml")

    assert [r.runbook.id for r in loader.load_paths([Path("dir")])] == ["a", "b"]

    write("version: 2\n", "dir/c.yaml")
    write("id: d\nid: e\n", "other.yaml")
    with pytest.raises(RunbookInvalid) as raised:
        loader.load_paths([Path("dir"), Path("other.yaml")])
    assert [str(p) for p in raised.value.problems] == [
        "dir/c.yaml:1:1 id: required key is missing",
        "dir/c.yaml:1:1 title: required key is missing",
        "dir/c.yaml:1:1 match: required key is missing",
        "dir/c.yaml:1:1 steps: required key is missing",
        "other.yaml:2:1 id: duplicate key 'id' (first at line 1)",
    ]


def test_parse_loads_text_under_a_given_name() -> None:
    loaded = loader.parse(GOOD, file="snapshot:gpu-xid@1")

    assert loaded.runbook.version == 1
    with pytest.raises(RunbookInvalid) as raised:
        loader.parse("id: [", file="snapshot:x")
    assert str(raised.value.problems[0]).startswith("snapshot:x:1:")

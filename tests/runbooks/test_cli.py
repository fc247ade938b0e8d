"""`runbook-bot validate` and `runbook-bot schema`, in-process: exit codes and output; and
the generated documents (schema file, docs example, schema docstring) stay true."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from bot.runbooks import schema, validate
from tests.runbooks.conftest import STEPS, Write, runbook
from tests.support.cli import Run

ROOT = Path(__file__).resolve().parents[2]


def test_validate_valid_runbooks_exits_0_and_counts_them(write: Write, run: Run) -> None:
    write(runbook(id="a", match="alerts: [A]"), "runbooks/a.yaml")
    write(runbook(id="b", match="alerts: [B]"), "runbooks/b.yml")

    assert run("validate", "runbooks") == (0, "2 runbooks valid\n", "")
    assert run("validate", "runbooks/a.yaml") == (0, "1 runbook valid\n", "")


def test_validate_prints_each_problem_then_a_summary_and_exits_1(write: Write, run: Run) -> None:
    write(
        runbook(id="a", match="alerts: [A]").replace("k8s.node_status", "k8s.node_stats"), "a.yaml"
    )
    write("id: b\nid: c\n", "b.yaml")
    write(runbook(id="c", match="alerts: [C]"), "c.yaml")

    code, out, err = run("validate", "a.yaml", "b.yaml", "c.yaml")

    assert code == 1
    assert out.splitlines() == [
        "a.yaml:6:34 steps[0].action: unknown action 'k8s.node_stats'; did you mean "
        "'k8s.node_status'?",
        "b.yaml:2:1 id: duplicate key 'id' (first at line 1)",
        "2 problems in 2 files",
    ]
    assert err == ""


def test_validate_with_only_warnings_exits_0_and_says_so(write: Write, run: Run) -> None:
    write(runbook(id="a", match="alerts: [A]"), "a.yaml")
    write(runbook(id="b", match="alerts: [A]"), "b.yaml")

    code, out, _ = run("validate", ".")

    assert code == 0
    assert out.splitlines()[0].startswith("b.yaml:4:8 match.priority: warning: 'a' (a.yaml:4:8)")
    assert out.splitlines()[1:] == ["2 runbooks valid (1 warning)"]


def test_validate_a_path_that_does_not_exist_exits_2(write: Write, run: Run) -> None:
    write(runbook(), "a.yaml")

    assert run("validate", "a.yaml", "missing.yaml") == (
        2,
        "",
        "runbook-bot: no such file or directory: missing.yaml\n",
    )


def test_validate_defaults_to_the_runbooks_dir_setting(
    write: Write, run: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(STEPS, "elsewhere/node-down.yaml")
    monkeypatch.setenv("RUNBOOK_BOT_RUNBOOKS_DIR", "elsewhere")

    assert run("validate") == (0, "1 runbook valid\n", "")

    monkeypatch.setenv("RUNBOOK_BOT_RUNBOOKS_DIR", "nowhere")
    assert run("validate") == (2, "", "runbook-bot: no such file or directory: nowhere\n")


def test_schema_prints_the_json_schema(run: Run) -> None:
    code, out, _ = run("schema")

    assert code == 0
    assert json.loads(out) == schema.json_schema()


def test_the_shipped_schema_file_is_the_generated_schema() -> None:
    shipped = (ROOT / "docs" / "runbook.schema.json").read_text(encoding="utf-8")

    assert shipped == json.dumps(schema.json_schema(), indent=2, ensure_ascii=False) + "\n", (
        "regenerate it: runbook-bot schema > docs/runbook.schema.json"
    )


def test_the_example_in_the_authors_guide_is_valid(write: Write) -> None:
    guide = (ROOT / "docs" / "runbooks.md").read_text(encoding="utf-8")
    example = re.search(r"```yaml\n(# yaml-language-server.*?)```", guide, re.S)
    assert example is not None

    assert validate.validate_paths([write(example.group(1))]) == []


def test_the_example_in_the_schema_docstring_is_valid(write: Write) -> None:
    assert schema.__doc__ is not None
    example = schema.__doc__.split("Example (abridged):\n", 1)[1].split("\nTemplates see")[0]

    assert validate.validate_paths([write(example)]) == []

"""The CI guards (tests/support/ci.py): `CI` read case-insensitively, a missing tool that
skips locally and fails in CI, and the settings that would make a CI run test less than it
claims (a backend left out, golden files rewritten) refused before collection."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.ci import environment_problems, in_ci

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = ROOT / "tests" / "postmortem" / "golden"
A_TOOL_TEST = """
from tests.support.ci import skip_or_fail

def test_needs_a_tool():
    skip_or_fail("frobnicate not found on PATH", install="apt-get install frobnicate")
"""


def pytest_run(*args: str, cwd: Path = ROOT, **env: str) -> subprocess.CompletedProcess[str]:
    """pytest in a process of its own, `CI` unset unless given."""
    environ = {k: v for k, v in os.environ.items() if k != "CI" and not k.startswith("UPDATE_")}
    environ |= {"PYTHONPATH": str(ROOT), **env}
    command = [sys.executable, "-m", "pytest", "-n0", "-rsf", "-p", "no:cacheprovider", *args]
    return subprocess.run(
        command, cwd=cwd, env=environ, capture_output=True, text=True, timeout=120, check=False
    )


@pytest.mark.parametrize("value", ["true", "TRUE", "True", "1", "yes", " Yes "])
def test_ci_is_on_whatever_the_case(value: str) -> None:
    assert in_ci({"CI": value}) is True
    assert environment_problems({"CI": value}) == []


@pytest.mark.parametrize("value", ["", "false", "False", "0", "no"])
def test_ci_is_off_when_unset_or_false(value: str) -> None:
    assert in_ci({"CI": value}) is False
    assert environment_problems({"CI": value}) == []


def test_ci_is_off_when_unset() -> None:
    assert in_ci({}) is False


def test_a_ci_value_that_is_neither_counts_as_ci_and_is_refused() -> None:
    assert in_ci({"CI": "maybe"}) is True
    assert environment_problems({"CI": "maybe"}) == [
        "CI='maybe' is neither true nor false: set CI=true (1, yes) to run as CI, or unset it"
    ]


def test_leaving_out_postgresql_is_refused_in_ci_and_allowed_locally() -> None:
    only_sqlite = {"RUNBOOK_BOT_TEST_BACKENDS": "sqlite"}

    assert environment_problems(only_sqlite) == []
    assert environment_problems({**only_sqlite, "CI": "true"}) == [
        "RUNBOOK_BOT_TEST_BACKENDS='sqlite' leaves out postgresql, but CI runs every database "
        "test on every backend: unset it"
    ]
    everything = {"CI": "true", "RUNBOOK_BOT_TEST_BACKENDS": " postgresql , sqlite "}
    assert environment_problems(everything) == []


@pytest.mark.parametrize(
    ("value", "named"),
    [("sqlite,postgres", "'postgres'"), ("", "no backend"), (" , ", "no backend")],
)
def test_an_unknown_or_empty_backend_list_is_refused_everywhere(value: str, named: str) -> None:
    for ci in ("false", "true"):
        assert environment_problems({"RUNBOOK_BOT_TEST_BACKENDS": value, "CI": ci}) == [
            f"RUNBOOK_BOT_TEST_BACKENDS={value!r} names {named}: the backends are sqlite, "
            "postgresql (comma-separated; unset means all)"
        ]


@pytest.mark.parametrize("name", ["UPDATE_GOLDEN", "UPDATE_SCREENSHOTS"])
def test_rewriting_committed_files_is_refused_in_ci_only(name: str) -> None:
    assert environment_problems({name: "1"}) == []
    (problem,) = environment_problems({name: "1", "CI": "yes"})
    assert problem.startswith(f"{name} is set, but CI compares ")
    assert problem.endswith("never rewrites them: unset it (regenerate them locally, then commit)")


def test_a_missing_tool_skips_locally_naming_its_install_command(tmp_path: Path) -> None:
    (tmp_path / "test_tool.py").write_text(A_TOOL_TEST)

    done = pytest_run("test_tool.py", cwd=tmp_path)

    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 skipped" in done.stdout
    assert "frobnicate not found on PATH (apt-get install frobnicate)" in done.stdout


def test_a_missing_tool_fails_in_ci_spelt_in_capitals(tmp_path: Path) -> None:
    (tmp_path / "test_tool.py").write_text(A_TOOL_TEST)

    done = pytest_run("test_tool.py", cwd=tmp_path, CI="TRUE")

    assert done.returncode == 1, done.stdout + done.stderr
    assert "1 failed" in done.stdout and "skipped" not in done.stdout
    assert "frobnicate not found on PATH (apt-get install frobnicate); CI must run every test" in (
        done.stdout
    )


def test_the_suite_refuses_to_start_in_ci_without_postgresql() -> None:
    done = pytest_run("tests/test_ci.py", "--collect-only", CI="true",
                      RUNBOOK_BOT_TEST_BACKENDS="sqlite")  # fmt: skip

    assert done.returncode == pytest.ExitCode.USAGE_ERROR, done.stdout + done.stderr
    assert "RUNBOOK_BOT_TEST_BACKENDS='sqlite' leaves out postgresql" in done.stderr
    assert "collected" not in done.stdout


def test_the_suite_refuses_to_rewrite_golden_files_in_ci() -> None:
    before = {path.name: path.read_bytes() for path in GOLDEN.iterdir()}

    done = pytest_run(
        "tests/postmortem/test_draft.py", "-k", "golden", CI="true", UPDATE_GOLDEN="1"
    )

    assert done.returncode == pytest.ExitCode.USAGE_ERROR, done.stdout + done.stderr
    assert "UPDATE_GOLDEN is set, but CI compares" in done.stderr
    assert {path.name: path.read_bytes() for path in GOLDEN.iterdir()} == before


def test_ci_runs_the_readmes_test_command_last_in_a_clone_of_its_own() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    after = readme.split("Run the whole test suite:\n", 1)[1]
    command = after.split("```sh\n", 1)[1].split("\n```", 1)[0]
    script = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    syntax = subprocess.run(["bash", "-n", str(ROOT / ".ci" / "run")], capture_output=True,
                            text=True, timeout=30, check=False)  # fmt: skip

    assert syntax.returncode == 0, syntax.stderr
    assert script.rstrip("\n").splitlines()[-1] == command
    assert 'work=$(mktemp -d "${TMPDIR:-/tmp}/runbook-bot-ci.XXXXXX")' in script
    before_installing, installing = script.split('\nstage "system packages"\n')
    assert 'cd "$work/runbook-bot"' in before_installing and "cd " not in installing

"""Property: no input makes the loader (or the validator after it) raise anything but
RunbookInvalid, and every problem it reports has a real position in the file named."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bot.runbooks import loader, validate
from bot.runbooks.loader import RunbookInvalid
from tests.runbooks.conftest import GOOD

# Pieces of runbook YAML, so random text reaches past the scanner into the schema.
FRAGMENTS = [
    "id: gpu-xid",
    "title: t",
    "version: 1",
    "match:",
    "alerts: [A]",
    "steps:",
    "- id: a",
    "action: k8s.cordon",
    "with: {node: n}",
    "manual: m",
    "when: x",
    "approval: two",
    "facts:",
    "node: '{{ labels.x }}'",
    "{{",
    "}}",
    "{%",
    "- ",
    "  ",
    "    ",
    "\n",
    "\t",
    ": ",
    "{",
    "}",
    "[",
    "]",
    ",",
    "&a ",
    "*a",
    "!!str ",
    "!x ",
    "---\n",
    "...\n",
    "'",
    '"',
    "#",
    "? ",
    "| ",
    "> ",
    "<<: ",
    "%YAML 1.1\n",
    "\\",
    "\x00",
    "\ufeff",
    "单卡",
    "9" * 5000,
    "1e999",
    ".nan",
    "2024-13-45",
    "~",
]
KEYS = [
    "id",
    "title",
    "version",
    "match",
    "alerts",
    "labels",
    "label",
    "regex",
    "in",
    "equals",
    "priority",
    "fallback",
    "facts",
    "steps",
    "action",
    "with",
    "manual",
    "when",
    "approval",
    "timeout",
    "retries",
    "on_failure",
    "en",
    "zh",
    "node",
]
SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=30)
    | st.sampled_from(["k8s.cordon", "{{ facts.x }}", "{% for %}", "[", "one", "15m", "1e9d"])
)
DATA = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.sampled_from(KEYS) | st.text(max_size=8), inner, max_size=5)
    ),
    max_leaves=30,
)
# FUZZ_EXAMPLES=5000 for a longer hunt than CI's.
SETTINGS = settings(
    database=None,
    deadline=None,
    max_examples=int(os.environ.get("FUZZ_EXAMPLES", "300")),
    suppress_health_check=[HealthCheck.too_slow],
)


def _never_crashes(text: str) -> None:
    try:
        loaded = loader.parse(text, file="fuzz.yaml")
    except RunbookInvalid as invalid:
        assert invalid.problems
        lines = text.count("\n") + 2
        for problem in invalid.problems:
            assert problem.file == "fuzz.yaml"
            assert 1 <= problem.line <= lines, problem
            assert problem.column >= 1, problem
            assert problem.message, problem
        return
    for problem in validate.check_runbook(loaded):
        assert problem.file == "fuzz.yaml" and problem.line >= 1 and problem.column >= 1


@SETTINGS
@given(st.text(max_size=400))
def test_random_text_only_ever_yields_problems(text: str) -> None:
    _never_crashes(text)


@SETTINGS
@given(st.lists(st.sampled_from(FRAGMENTS), max_size=40).map("".join))
def test_random_yaml_ish_text_only_ever_yields_problems(text: str) -> None:
    _never_crashes(text)


@SETTINGS
@given(DATA)
def test_random_nested_data_only_ever_yields_problems(data: Any) -> None:
    _never_crashes(yaml.safe_dump(data, allow_unicode=True))


@SETTINGS
@given(st.sampled_from(KEYS + ["steps.0", "steps.1", "match.alerts"]), DATA)
def test_a_valid_runbook_with_one_value_replaced_only_ever_yields_problems(
    where: str, value: Any
) -> None:
    data = yaml.safe_load(GOOD)
    target = data
    *parents, last = where.split(".")
    for part in parents:
        target = target[int(part)] if isinstance(target, list) else target[part]
    if isinstance(target, list):
        target[int(last)] = value
    else:
        target[last] = value

    _never_crashes(yaml.safe_dump(data, allow_unicode=True))


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fuzz") / "fuzz.yaml"


@SETTINGS
@given(content=st.binary(max_size=300))
def test_random_bytes_in_a_file_only_ever_yield_problems(scratch: Path, content: bytes) -> None:
    scratch.write_bytes(content)
    try:
        loader.load_file(scratch)
    except RunbookInvalid as invalid:
        assert all(p.file == str(scratch) and p.line >= 1 for p in invalid.problems)


SHIPPED = sorted((Path(__file__).resolve().parents[2] / "runbooks").glob("*.yaml"))


@SETTINGS
@given(
    shipped=st.sampled_from(SHIPPED),
    where=st.sampled_from(["steps.0", "steps.1", "facts", "match", "steps.0.with"]),
    value=DATA,
)
def test_a_shipped_runbook_with_one_value_replaced_only_ever_yields_problems(
    shipped: Path, where: str, value: Any
) -> None:
    data = yaml.safe_load(shipped.read_text(encoding="utf-8"))
    target = data
    *parents, last = where.split(".")
    for part in parents:
        target = target[int(part)] if isinstance(target, list) else target[part]
    if isinstance(target, list):
        target[int(last)] = value
    else:
        target[last] = value

    _never_crashes(yaml.safe_dump(data, allow_unicode=True))

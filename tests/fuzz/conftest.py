"""The fuzz suite's tally: each fuzz test records how many inputs it tried and how many
answers broke a rule; the run ends with one line per test, the figures docs/reliability.md
quotes (`pytest tests/fuzz -q` prints them under "fuzz summary"; with
RUNBOOK_BOT_TEST_FUZZ_FIGURES=FILE they are also written to FILE as JSON, which
`python -m tests.fuzz.figures` turns into docs/reliability.md's rows)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

import pytest


@dataclass
class Tally:
    """What one fuzz test tried: `tried` inputs, of which `by_outcome` says what came back."""

    name: str
    tried: int = 0
    by_outcome: dict[str, int] = field(default_factory=dict)

    def count(self, outcome: str) -> None:
        self.tried += 1
        self.by_outcome[outcome] = self.by_outcome.get(outcome, 0) + 1

    def line(self) -> str:
        outcomes = ", ".join(f"{key}: {n}" for key, n in sorted(self.by_outcome.items()))
        return f"{self.name}: {self.tried} inputs ({outcomes})"


TALLIES: list[Tally] = []


@pytest.fixture
def tally(request: pytest.FixtureRequest) -> Iterator[Tally]:
    record = Tally(request.node.nodeid)
    yield record
    TALLIES.append(record)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not TALLIES:
        return
    terminalreporter.section("fuzz summary")
    for record in TALLIES:
        terminalreporter.write_line(record.line())


def pytest_sessionfinish(session: pytest.Session) -> None:
    target = os.environ.get("RUNBOOK_BOT_TEST_FUZZ_FIGURES")
    if target and TALLIES:
        Path(target).write_text(json.dumps([asdict(record) for record in TALLIES], indent=1))

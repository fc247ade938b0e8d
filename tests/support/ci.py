"""Whether the suite runs in CI, and the one way a test says that something it needs is missing.

Locally a missing tool or server skips the tests that need it, naming the command that
installs it; in CI (`CI` set to true, 1 or yes, in any case) nothing may skip, so the same
call fails. `environment_problems` lists the test settings that would quietly run less than
the whole suite in CI, or that make no sense anywhere; tests/conftest.py stops the run on them
before collection.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import NoReturn

import pytest

TRUE = ("true", "1", "yes")
FALSE = ("false", "0", "no", "")
BACKENDS = ("sqlite", "postgresql")
"""Every database backend the suite knows; CI runs on all of them."""
REWRITERS = {
    "UPDATE_GOLDEN": "the postmortem drafts with their golden files",
    "UPDATE_SCREENSHOTS": "the console with the README's screenshot",
}
"""Variables that make tests rewrite committed files instead of comparing with them."""


def _ci_value(environ: Mapping[str, str]) -> str:
    return environ.get("CI", "").strip().lower()


def in_ci(environ: Mapping[str, str] = os.environ) -> bool:
    """True when `CI` says so; a value that is neither yes nor no counts as CI (fail loud)."""
    return _ci_value(environ) not in FALSE


def skip_or_fail(reason: str, *, install: str | None = None) -> NoReturn:
    """Skip the test locally, saying why and how to install what is missing; fail it in CI."""
    message = f"{reason} ({install})" if install else reason
    if in_ci():
        pytest.fail(f"{message}; CI must run every test", pytrace=False)
    pytest.skip(message)


def backends(environ: Mapping[str, str] = os.environ) -> list[str]:
    """The backends `RUNBOOK_BOT_TEST_BACKENDS` asks for (default: all), as written."""
    wanted = environ.get("RUNBOOK_BOT_TEST_BACKENDS", ",".join(BACKENDS))
    return [name.strip() for name in wanted.split(",") if name.strip()]


def environment_problems(environ: Mapping[str, str] = os.environ) -> list[str]:
    """What in the environment would make this run test less than it claims, one line each."""
    problems = []
    value = _ci_value(environ)
    if value not in TRUE + FALSE:
        problems.append(
            f"CI={environ['CI']!r} is neither true nor false: set CI=true (1, yes) to run as CI, "
            "or unset it"
        )
    chosen = backends(environ)
    unknown = [name for name in chosen if name not in BACKENDS]
    if unknown or not chosen:
        problems.append(
            f"RUNBOOK_BOT_TEST_BACKENDS={environ.get('RUNBOOK_BOT_TEST_BACKENDS', '')!r} names "
            f"{', '.join(map(repr, unknown)) or 'no backend'}: the backends are "
            f"{', '.join(BACKENDS)} (comma-separated; unset means all)"
        )
    elif in_ci(environ) and set(chosen) != set(BACKENDS):
        left_out = ", ".join(name for name in BACKENDS if name not in chosen)
        problems.append(
            f"RUNBOOK_BOT_TEST_BACKENDS={environ['RUNBOOK_BOT_TEST_BACKENDS']!r} leaves out "
            f"{left_out}, but CI runs every database test on every backend: unset it"
        )
    for name, what in REWRITERS.items():
        if in_ci(environ) and environ.get(name):
            problems.append(
                f"{name} is set, but CI compares {what} and never rewrites them: unset it "
                "(regenerate them locally, then commit)"
            )
    return problems


__all__ = ["BACKENDS", "backends", "environment_problems", "in_ci", "skip_or_fail"]

"""The type of the `run` fixture (tests/conftest.py): the CLI run in-process."""

from __future__ import annotations

from collections.abc import Callable

Run = Callable[..., tuple[int, str, str]]
"""(*argv) -> (exit code, stdout, stderr)."""

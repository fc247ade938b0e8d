"""What a rendered command comes back as: its output, exit code, run time and effect."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Answer:
    output: str
    exit_code: int = 0
    seconds: float = 1.0
    effect: Callable[[], None] | None = None
    """A change to the machine, made when the run ends (not when it is planned)."""

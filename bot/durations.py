"""Durations as operators write them: `90s`, `15m`, `1h30m`, `24h`, `7d`.

Used by settings now and by runbook steps later, so a wait reads the same everywhere.
"""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Annotated, Any

from pydantic import BeforeValidator, PlainSerializer

MAX_SECONDS = 3650 * 86400
"""Ten years: past it no duration means anything here, and `now + it` may overflow."""
_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400}
_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)")


def parse_duration(text: str) -> timedelta:
    """Parse `1h30m` style text; raise ValueError with an example of the right form."""
    cleaned = text.strip().lower()
    if not cleaned:
        raise ValueError("empty duration; write it like 30s, 15m, 1h30m or 7d")
    total = 0.0
    pos = 0
    for match in _PART.finditer(cleaned):
        if match.start() != pos:
            break
        total += float(match.group(1)) * _UNITS[match.group(2)]
        pos = match.end()
    if pos != len(cleaned):
        raise ValueError(
            f"{text!r} is not a duration; write it like 30s, 15m, 1h30m or 7d "
            "(units: ms, s, m, h, d)"
        )
    if total > MAX_SECONDS:
        raise ValueError(f"{text!r} is longer than 3650d; write a shorter duration")
    return timedelta(seconds=total)


def format_duration(value: timedelta) -> str:
    """The shortest `1h30m` form of `value` (whole seconds)."""
    seconds = int(value.total_seconds())
    if seconds == 0:
        return "0s"
    parts = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        count, seconds = divmod(seconds, size)
        if count:
            parts.append(f"{count}{unit}")
    return "".join(parts)


def _coerce(value: Any) -> Any:
    try:
        if isinstance(value, str):
            return parse_duration(value)
        if isinstance(value, int | float) and not isinstance(value, bool):
            return timedelta(seconds=value)
    except OverflowError:
        # pydantic passes OverflowError through, which would hide every other error.
        raise ValueError(f"{value!r} is too long a duration (at most 999999999 days)") from None
    return value


Duration = Annotated[
    timedelta,
    BeforeValidator(_coerce),
    PlainSerializer(format_duration, return_type=str, when_used="json"),
]
"""A timedelta field that accepts `15m`-style text or a number of seconds."""

"""The incident lifecycle: severities, statuses and which transitions are allowed.

    open ──ack──> acknowledged ──resolve──> resolved ──close──> closed
      └────────────resolve────────────────────^  │
      ^─────────────────reopen───────────────────┘

A closed incident is final: a new firing opens a new incident that points back to it.
"""

from __future__ import annotations

from enum import StrEnum

from bot.errors import TransitionRefused


class Severity(StrEnum):
    CRITICAL = "critical"
    WARNING = "warning"
    INFO = "info"

    @property
    def rank(self) -> int:
        return _RANK[self]

    @classmethod
    def from_label(cls, value: str | None) -> Severity | None:
        """The severity named by an alert's `severity` label, or None when it names none."""
        try:
            return cls((value or "").strip().lower())
        except ValueError:
            return None


_RANK = {Severity.INFO: 0, Severity.WARNING: 1, Severity.CRITICAL: 2}


class Status(StrEnum):
    OPEN = "open"
    ACKNOWLEDGED = "acknowledged"
    RESOLVED = "resolved"
    CLOSED = "closed"

    @property
    def active(self) -> bool:
        return self in (Status.OPEN, Status.ACKNOWLEDGED)


class AlertStatus(StrEnum):
    """What Alertmanager says of one alert, stored as it says it."""

    FIRING = "firing"
    RESOLVED = "resolved"


_ALLOWED: dict[Status, set[Status]] = {
    Status.OPEN: {Status.ACKNOWLEDGED, Status.RESOLVED},
    Status.ACKNOWLEDGED: {Status.RESOLVED},
    Status.RESOLVED: {Status.OPEN, Status.CLOSED},
    Status.CLOSED: set(),
}

_VERB = {
    Status.OPEN: "reopen",
    Status.ACKNOWLEDGED: "acknowledge",
    Status.RESOLVED: "resolve",
    Status.CLOSED: "close",
}


def check_transition(ref: str, current: Status, target: Status) -> None:
    """Raise `TransitionRefused` with the way forward unless `current -> target` is allowed."""
    if target in _ALLOWED[current]:
        return
    hint = {
        Status.CLOSED: "it is closed; a new alert opens a new incident",
        Status.RESOLVED: "reopen it first" if target is Status.ACKNOWLEDGED else "",
        Status.OPEN: "resolve it first" if target is Status.CLOSED else "",
        Status.ACKNOWLEDGED: "resolve it first" if target is Status.CLOSED else "",
    }[current]
    message = f"cannot {_VERB[target]} {ref}: it is {current.value}"
    raise TransitionRefused(f"{message}; {hint}" if hint else message)

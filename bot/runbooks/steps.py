"""The life of a step run: its states and the only transitions allowed between them.

    proposed ──> awaiting_approval ──> approved ──> running ──> succeeded
       │              │    │              │            ├──────> failed
       │              │    │              │            ├──────> timed_out
       │              │    │              │            └──────> interrupted (lease lost)
       ├─> approved   │    └─> expired    └─> expired
       ├─> failed     │  (its `when` or `with` does not render, or the
       │              │   parameters fail the action's model: nothing ran)
       ├─> skipped  <─┤
       └─> cancelled <┴─ (and from approved; and from running, for a `for_each` run a
                          person stopped: the rest of its nodes never started)

A `read` step with `auto` approval goes proposed -> approved at once; a manual step waits
in awaiting_approval until a person marks it done (-> succeeded) or skips it. Terminal
states never change: a run interrupted by a crash is never resumed, the engine proposes a
new attempt of the step instead, so a person decides again (DESIGN invariant 2).
Every transition is one incident-log entry, written by the engine in the same transaction.
"""

from __future__ import annotations

from enum import StrEnum

from bot.errors import TransitionRefused


class StepState(StrEnum):
    PROPOSED = "proposed"
    AWAITING_APPROVAL = "awaiting_approval"
    APPROVED = "approved"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    TIMED_OUT = "timed_out"
    SKIPPED = "skipped"
    CANCELLED = "cancelled"
    EXPIRED = "expired"
    INTERRUPTED = "interrupted"

    @property
    def terminal(self) -> bool:
        return not _ALLOWED[self]

    @property
    def done(self) -> bool:
        """Finished in a way later steps may build on (their `when` sees the result)."""
        return self in (StepState.SUCCEEDED, StepState.FAILED, StepState.TIMED_OUT)


S = StepState
_ALLOWED: dict[StepState, frozenset[StepState]] = {
    S.PROPOSED: frozenset({S.AWAITING_APPROVAL, S.APPROVED, S.SKIPPED, S.CANCELLED, S.FAILED}),
    S.AWAITING_APPROVAL: frozenset({S.APPROVED, S.SUCCEEDED, S.SKIPPED, S.CANCELLED, S.EXPIRED}),
    S.APPROVED: frozenset({S.RUNNING, S.CANCELLED, S.EXPIRED}),
    S.RUNNING: frozenset({S.SUCCEEDED, S.FAILED, S.TIMED_OUT, S.INTERRUPTED, S.CANCELLED}),
    S.SUCCEEDED: frozenset(),
    S.FAILED: frozenset(),
    S.TIMED_OUT: frozenset(),
    S.SKIPPED: frozenset(),
    S.CANCELLED: frozenset(),
    S.EXPIRED: frozenset(),
    S.INTERRUPTED: frozenset(),
}

_WHY = {
    S.APPROVED: "approve",
    S.RUNNING: "start",
    S.SUCCEEDED: "complete",
    S.SKIPPED: "skip",
    S.CANCELLED: "cancel",
    S.EXPIRED: "expire",
}


def allowed(current: StepState) -> frozenset[StepState]:
    return _ALLOWED[current]


def check(step: str, current: str | StepState, target: StepState) -> None:
    """Raise TransitionRefused, saying what the step is and what can still be done."""
    now = StepState(current)
    if target in _ALLOWED[now]:
        return
    verb = _WHY.get(target, f"move to {target.value}")
    if now.terminal:
        raise TransitionRefused(
            f"cannot {verb} step {step}: it already ended ({now.value.replace('_', ' ')})"
        )
    options = ", ".join(sorted(s.value for s in _ALLOWED[now]))
    raise TransitionRefused(
        f"cannot {verb} step {step}: it is {now.value.replace('_', ' ')} (next: {options})"
    )

"""The step-run state machine: every legal transition, and refusals that say why."""

from __future__ import annotations

import itertools

import pytest

from bot.errors import TransitionRefused
from bot.runbooks.steps import StepState, allowed, check

S = StepState
LEGAL = {
    (S.PROPOSED, S.AWAITING_APPROVAL),
    (S.PROPOSED, S.APPROVED),
    (S.PROPOSED, S.SKIPPED),
    (S.PROPOSED, S.CANCELLED),
    (S.PROPOSED, S.FAILED),
    (S.AWAITING_APPROVAL, S.APPROVED),
    (S.AWAITING_APPROVAL, S.SUCCEEDED),
    (S.AWAITING_APPROVAL, S.SKIPPED),
    (S.AWAITING_APPROVAL, S.CANCELLED),
    (S.AWAITING_APPROVAL, S.EXPIRED),
    (S.APPROVED, S.RUNNING),
    (S.APPROVED, S.CANCELLED),
    (S.APPROVED, S.EXPIRED),
    (S.RUNNING, S.SUCCEEDED),
    (S.RUNNING, S.FAILED),
    (S.RUNNING, S.TIMED_OUT),
    (S.RUNNING, S.INTERRUPTED),
    (S.RUNNING, S.CANCELLED),  # a for_each run a person stopped
}


@pytest.mark.parametrize("current, target", list(itertools.product(S, S)))
def test_only_the_drawn_transitions_are_allowed(current: S, target: S) -> None:
    if (current, target) in LEGAL:
        check("cordon", current, target)
        assert target in allowed(current)
    else:
        with pytest.raises(TransitionRefused):
            check("cordon", current, target)


def test_terminal_states_say_the_step_already_ended() -> None:
    with pytest.raises(TransitionRefused, match=r"cannot approve step drain: it already ended"):
        check("drain", S.SUCCEEDED, S.APPROVED)
    assert {s for s in S if s.terminal} == {
        S.SUCCEEDED,
        S.FAILED,
        S.TIMED_OUT,
        S.SKIPPED,
        S.CANCELLED,
        S.EXPIRED,
        S.INTERRUPTED,
    }


def test_a_refusal_lists_what_can_still_happen() -> None:
    with pytest.raises(TransitionRefused) as refused:
        check("reset_gpu", S.AWAITING_APPROVAL, S.RUNNING)
    assert str(refused.value) == (
        "cannot start step reset_gpu: it is awaiting approval "
        "(next: approved, cancelled, expired, skipped, succeeded)"
    )


def test_an_interrupted_run_is_never_resumed() -> None:
    assert allowed(S.INTERRUPTED) == frozenset()
    assert not S.INTERRUPTED.done and S.FAILED.done

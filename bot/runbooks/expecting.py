"""A read step's `expect`: read again, a bounded number of times, until the read agrees
with the alert.

A read taken a moment too early (the node still Ready, the power still "powering off")
must not decide a runbook. When the newest attempt of a step that expects has succeeded
and `expect.that` is false for its result, the engine asks `reread` for the next attempt:
a new run, approved as the first was, with the same parameters, due `every` later
(`not_before`, as a retry waits: no worker sleeps). The step is not over meanwhile, so
nothing after it is proposed. Once `reads` reads were taken, or as soon as one agrees,
the step stands with its newest read: later steps see `steps.ID.reads` and
`steps.ID.unexpected`, and a step whose reads never agreed says so in its summary and in
one `step.unexpected` log entry.

`check` is what `runbook-bot validate` adds for the key: read actions only, and `that`
refers to `result` fields the action's result has and to names `when` may use.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session

from bot.actions import registry
from bot.actions.registry import Risk
from bot.clock import as_utc
from bot.durations import format_duration
from bot.errors import ActionUnknown
from bot.incidents import log
from bot.incidents.models import Incident
from bot.runbooks import templates
from bot.runbooks.loader import LoadedRunbook, Loc, Problem
from bot.runbooks.models import StepRun
from bot.runbooks.schema import Expect, Runbook, Step, Text
from bot.runbooks.steps import StepState

S = StepState
RESULT = "result"
"""The name `that` sees the read's result by."""
MAPPING_METHODS = frozenset({"get", "items", "keys", "values"})


@dataclass(frozen=True)
class Reads:
    """What the reads of a step that expects showed: how many succeeded, over how long,
    and whether the newest agrees (`agrees`), or why that could not be told (`error`)."""

    count: int
    span: str
    agrees: bool
    error: str | None = None

    def exhausted(self, expect: Expect) -> bool:
        return self.error is not None or self.count >= expect.reads


def meaning(expect: Expect) -> str:
    return _text(expect.meaning) or f"`{expect.that}`"


def judge(expect: Expect, runs: Sequence[StepRun], context: Mapping[str, Any]) -> Reads:
    """Judge the newest of `runs` (one step's, oldest first; the newest succeeded) against
    `expect`, in `context` (what `when` sees) with `result` added."""
    read = [run for run in runs if run.state is S.SUCCEEDED]
    newest = read[-1]
    first, last = read[0].finished_at, newest.finished_at
    span = format_duration(as_utc(last) - as_utc(first)) if first and last else "0s"
    seen = {**context, RESULT: dict(newest.result or {})}
    try:
        agrees = templates.evaluate(expect.that, seen)
    except templates.TemplateError as exc:
        return Reads(len(read), span, agrees=False, error=str(exc))
    return Reads(len(read), span, agrees)


def reread(
    session: Session,
    incident: Incident,
    step: Step,
    run: StepRun,
    reads: Reads,
    now: datetime,
    *,
    actor: log.Actor,
    transition: Callable[..., None],
) -> StepRun:
    """The next read of `step` after `run` (which did not agree), approved as `run` was,
    due `every` later; recorded as a `step.approved` entry that says why."""
    assert step.expect is not None
    due = now + step.expect.every
    wanted = meaning(step.expect)
    again = run.next_attempt(
        now=now,
        not_before=due,
        summary=(
            f"read {reads.count} of {step.expect.reads} did not show {wanted} "
            f"({run.summary}); reading again at {due:%H:%M:%S} UTC"
        ),
    )
    session.add(again)
    session.flush()
    summary = (
        f"step {step.id} re-read: read {reads.count + 1} of {step.expect.reads} "
        f"(attempt {again.attempt}, same parameters) not before {due:%H:%M:%S} UTC: read "
        f"{reads.count} did not show {wanted} ({run.summary})"
    )
    data = {
        "reread_of": run.id,
        "not_before": due.isoformat(),
        "read": reads.count + 1,
        "reads": step.expect.reads,
        "expect": step.expect.that,
    }
    transition(
        session, incident, again, S.APPROVED, now=now, actor=actor, summary=summary, data=data
    )
    return again


def unexpected(step: Step, run: StepRun, reads: Reads, *, last: bool = True) -> str:
    """What a step whose reads never agreed says: what it wanted and, with `last`, what
    its last read saw (the run's own summary already says it)."""
    assert step.expect is not None
    wanted = meaning(step.expect)
    if reads.error is not None:
        return f"could not tell whether the read shows {wanted}: {reads.error}"
    times = "1 read" if reads.count == 1 else f"{reads.count} reads over {reads.span}"
    saw = f" (the last: {run.summary})" if last else ""
    return (
        f"expected {wanted}, but {times} did not show it{saw}; the steps after it go on "
        "from that last read"
    )


def check(
    loaded: LoadedRunbook,
    index: int,
    step: Step,
    reference: Callable[[str, Runbook, int], str | None],
) -> list[Problem]:
    """`runbook-bot validate`'s checks of a step's `expect`. `reference` judges one name
    the expression uses as it would in `when` (validate's step references)."""
    if step.expect is None or step.action is None:
        return []
    here: Loc = ("steps", index, "expect")
    problems: list[Problem] = []
    result_fields: set[str] | None = None
    try:
        action = registry.get(step.action)
    except ActionUnknown:
        pass  # the action check reports it
    else:
        if action.risk != Risk.READ:
            message = (
                f"`expect` re-runs the step until its read agrees, so only read actions may "
                f"have it; {action.name} is {action.risk.value} risk"
            )
            problems.append(loaded.problem(here, message, key=True))
        result_fields = set(action.result.model_fields)
    loc: Loc = (*here, "that")
    try:
        used = references(step.expect.that)
    except templates.TemplateError as exc:
        return [*problems, loaded.problem(loc, str(exc))]
    for ref in sorted(used):
        top, _, rest = ref.partition(".")
        if top == RESULT:
            known = result_fields is None or rest in result_fields or rest in MAPPING_METHODS
            if rest and not known:
                assert step.action is not None and result_fields is not None
                fields = ", ".join(sorted(result_fields))
                message = f"{step.action}'s result has no field {rest!r}; its fields: {fields}"
                problems.append(loaded.problem(loc, message))
            continue
        if ref == f"steps.{step.id}":
            message = f"`expect` sees this step's own read as `{RESULT}`, not steps.{step.id}"
            problems.append(loaded.problem(loc, message))
            continue
        wrong = reference(ref, loaded.runbook, index)
        if wrong:
            problems.append(loaded.problem(loc, wrong))
    return problems


def references(that: str) -> set[str]:
    """The names `that` uses, as `templates.references` gives them, plus `result.X` for
    each field of the read it looks up literally."""
    used = templates.references(that, expression=True)
    return used | templates.attributes(that, RESULT)


def _text(value: Text | None) -> str:
    if value is None or isinstance(value, str):
        return value or ""
    return value.en or value.zh or ""

"""Which later steps depend on a step: those whose `when`, `with` or `expect` read
`steps.<id>`, directly or through another dependent (drain reads cordon, reset reads
drain: skipping cordon skips both).

Skipping a step with dependents asks for a reason that names them, and cards list them,
so a person sees what one tap on Skip will also skip. A template that does not parse, or
looks a step up by a computed name, names no step here (`runbook-bot validate` reports
the first; the second cannot be known before it runs).
"""

from __future__ import annotations

from collections.abc import Iterator

from bot.runbooks import templates
from bot.runbooks.problems import strings_in
from bot.runbooks.schema import Runbook, Step

_STEPS = "steps."


def dependents(runbook: Runbook, step_id: str) -> tuple[str, ...]:
    """The later steps that read `steps.<step_id>`, transitively, in runbook order.
    Raises KeyError when the runbook has no step `step_id`."""
    ids = [step.id for step in runbook.steps]
    if step_id not in ids:
        raise KeyError(f"runbook {runbook.id} has no step {step_id!r}; its steps: {', '.join(ids)}")
    return _closure(runbook, [reads(step) for step in runbook.steps], ids.index(step_id))


def every_step(runbook: Runbook) -> dict[str, tuple[str, ...]]:
    """`dependents` of every step, reading each step's templates once (a card shows them
    all: one parse per step, not one per pair)."""
    read = [reads(step) for step in runbook.steps]
    return {step.id: _closure(runbook, read, index) for index, step in enumerate(runbook.steps)}


def _closure(runbook: Runbook, read: list[set[str]], start: int) -> tuple[str, ...]:
    reached = {runbook.steps[start].id}
    found: list[str] = []
    for step, used in zip(runbook.steps[start + 1 :], read[start + 1 :], strict=True):
        if used & reached:
            reached.add(step.id)
            found.append(step.id)
    return tuple(found)


def reads(step: Step) -> set[str]:
    """The ids of the steps `step`'s templates look up literally (`steps.cordon.status`)."""
    found: set[str] = set()
    for source, expression in _sources(step):
        try:
            used = templates.references(source, expression=expression)
        except templates.TemplateError:
            continue
        found |= {ref.removeprefix(_STEPS) for ref in used if ref.startswith(_STEPS)}
    return found


def _sources(step: Step) -> Iterator[tuple[str, bool]]:
    if step.when is not None:
        yield step.when, True
    if step.expect is not None:
        yield step.expect.that, True
    for _loc, source, expression in strings_in(step.with_, ("with",)):
        yield source, expression

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
    start = ids.index(step_id) if step_id in ids else None
    if start is None:
        raise KeyError(f"runbook {runbook.id} has no step {step_id!r}; its steps: {', '.join(ids)}")
    reached = {step_id}
    found: list[str] = []
    for step in runbook.steps[start + 1 :]:
        if reads(step) & reached:
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

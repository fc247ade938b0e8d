"""`runbook-bot validate`: load runbooks, then check what the schema alone cannot.

Per runbook: actions exist, `with` names exactly the action's parameters (all required
ones), `approval` never lowers the action's risk, every template parses and refers only
to names it can see (facts defined above it, steps that ran before it), label regexes
compile, and templates use only labels the match requires (else a warning:
`required_labels`). Across runbooks: ids are unique, at most one is the fallback, and two runbooks
that could answer the same alert at the same priority get a warning.

A warning is a `Problem` whose message starts with "warning:"; it does not make the
runbooks invalid. Same-priority overlap is a warning, not an error: the catalog breaks
the tie by id, so the outcome is defined, only probably not meant; and label regexes can
keep two runbooks apart in ways this check cannot prove. It is reported unless the
alert names are disjoint, or one label's `equals`/`in` values are all rejected by the
other runbook's matchers on that label (`equals`, `in`, `not_equals`, `regex`).
"""

from __future__ import annotations

import contextlib
import difflib
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from bot.actions import registry
from bot.errors import ActionUnknown
from bot.runbooks import expecting, required_labels, templates
from bot.runbooks.loader import (
    LoadedRunbook,
    Loc,
    Problem,
    RunbookInvalid,
    load_file,
    runbook_files,
)
from bot.runbooks.problems import strings_in
from bot.runbooks.schema import APPROVALS, LabelMatcher, Runbook, Step

_APPROVAL_NAMES = {count: name for name, count in APPROVALS.items()}
EACH_NAME = "node"
"""What a `for_each: nodes` step's `with` sees besides the usual names: the node."""


@dataclass
class Checked:
    """What `check_paths` found: the files read, the runbooks that loaded, every problem."""

    files: list[Path]
    runbooks: list[LoadedRunbook]
    problems: list[Problem] = field(default_factory=list)

    @property
    def errors(self) -> list[Problem]:
        return [p for p in self.problems if not p.is_warning]

    @property
    def warnings(self) -> list[Problem]:
        return [p for p in self.problems if p.is_warning]


def validate_paths(paths: Iterable[Path]) -> list[Problem]:
    """Every problem (errors and warnings) with the runbooks in `paths`; [] means valid."""
    return check_paths(paths).problems


def load_valid(paths: Iterable[Path]) -> list[LoadedRunbook]:
    """The runbooks in `paths` after every check; RunbookInvalid lists the errors."""
    checked = check_paths(paths)
    if checked.errors:
        raise RunbookInvalid(checked.errors)
    return checked.runbooks


def check_paths(paths: Iterable[Path]) -> Checked:
    files = runbook_files(paths)
    checked = Checked(files, [])
    for file in files:
        try:
            loaded = load_file(file)
        except RunbookInvalid as invalid:
            checked.problems.extend(invalid.problems)
            continue
        checked.runbooks.append(loaded)
        checked.problems.extend(check_runbook(loaded))
    checked.problems.extend(_across(checked.runbooks))
    order = {str(file): i for i, file in enumerate(files)}
    checked.problems.sort(key=lambda p: (order.get(p.file, len(order)), p.line, p.column))
    return checked


def check_runbook(loaded: LoadedRunbook) -> list[Problem]:
    """The checks of one runbook beyond its schema."""
    runbook = loaded.runbook
    problems: list[Problem] = []
    for i, matcher in enumerate(runbook.match.labels):
        if matcher.regex is not None:
            try:
                re.compile(matcher.regex)
            except re.error as exc:
                loc = ("match", "labels", i, "regex")
                problems.append(loaded.problem(loc, f"regex does not compile: {exc}"))
    problems += _facts(loaded)
    for i, step in enumerate(runbook.steps):
        problems += _step(loaded, i, step)
        problems += expecting.check(loaded, i, step, _step_reference)
    problems += required_labels.check(loaded)
    return problems


def _facts(loaded: LoadedRunbook) -> list[Problem]:
    problems = []
    names = list(loaded.runbook.facts)
    for index, (name, template) in enumerate(loaded.runbook.facts.items()):
        loc: Loc = ("facts", name)
        try:
            used = templates.references(template)
        except templates.TemplateError as exc:
            problems.append(loaded.problem(loc, str(exc)))
            continue
        for ref in sorted(used):
            message = _fact_reference(ref, name, names[:index], names[index + 1 :])
            if message:
                problems.append(loaded.problem(loc, message))
    return problems


def _fact_reference(ref: str, name: str, earlier: list[str], later: list[str]) -> str | None:
    top, _, rest = ref.partition(".")
    if not rest:
        if ref in templates.FACT_NAMES or ref in templates.GLOBALS:
            return None
        if ref in templates.NAMES:
            return (
                f"a fact cannot use {ref}: facts are rendered when the incident opens, "
                "from labels, annotations and the facts above"
            )
        return _unknown_name(ref, templates.FACT_NAMES)
    if top != "facts":
        return None
    if rest == name:
        return f"fact {name!r} uses itself"
    if rest in later:
        return f"fact {rest!r} is defined below {name!r}; a fact sees only the facts above it"
    if rest not in earlier:
        return _unknown("fact", rest, earlier + later)
    return None


def _step(loaded: LoadedRunbook, i: int, step: Step) -> list[Problem]:
    problems = []
    here: Loc = ("steps", i)
    if step.action is not None:
        try:
            action = registry.get(step.action)
        except ActionUnknown as exc:
            problems.append(loaded.problem((*here, "action"), str(exc)))
        else:
            problems += _parameters(loaded, here, step, action)
            needed = action.risk.approvals
            if step.approval is not None and APPROVALS[step.approval] < needed:
                message = (
                    f"approval {step.approval!r} is below the risk of {action.name} "
                    f"({action.risk.value} needs {_APPROVAL_NAMES[needed]!r})"
                )
                problems.append(loaded.problem((*here, "approval"), message))
    sources: list[tuple[Loc, str, bool]] = list(strings_in(step.with_, (*here, "with")))
    if step.when is not None:
        sources.insert(0, ((*here, "when"), step.when, True))
    runbook = loaded.runbook
    for loc, source, expression in sources:
        try:
            used = templates.references(source, expression=expression)
        except templates.TemplateError as exc:
            problems.append(loaded.problem(loc, str(exc)))
            continue
        # A `for_each` step's `with` is rendered once per node, with `node` set to it.
        per_node = step.for_each is not None and loc[2] == "with"
        for ref in sorted(used):
            wrong = _step_reference(ref, runbook, i, (EACH_NAME,) if per_node else ())
            if wrong:
                problems.append(loaded.problem(loc, wrong))
    return problems


def _parameters(
    loaded: LoadedRunbook, here: Loc, step: Step, action: registry.Action
) -> list[Problem]:
    problems = []
    fields = {f.alias or name: f for name, f in action.params.model_fields.items()}
    for key in step.with_:
        if key not in fields:
            message = f"{action.name} has no parameter {key!r}"
            close = difflib.get_close_matches(key, list(fields), n=1)
            message += f"; did you mean {close[0]!r}?" if close else _listing(list(fields))
            problems.append(loaded.problem((*here, "with", key), message, key=True))
    missing = [name for name, f in fields.items() if f.is_required() and name not in step.with_]
    if missing:
        names = ", ".join(repr(name) for name in missing)
        plural = "s" if len(missing) > 1 else ""
        message = f"{action.name} needs parameter{plural} {names} in `with`"
        problems.append(loaded.problem((*here, "with"), message))
    return problems


def _listing(names: list[str]) -> str:
    return f"; its parameters: {', '.join(names)}" if names else "; it takes no parameters"


def _step_reference(
    ref: str, runbook: Runbook, index: int, extra: tuple[str, ...] = ()
) -> str | None:
    top, _, rest = ref.partition(".")
    if not rest:
        if ref in templates.NAMES or ref in templates.GLOBALS or ref in extra:
            return None
        return _unknown_name(ref, [*templates.NAMES, *extra])
    if top == "facts" and rest not in runbook.facts:
        return _unknown("fact", rest, list(runbook.facts))
    if top == "steps":
        ids = [step.id for step in runbook.steps]
        if rest == ids[index]:
            return f"step {rest!r} cannot use its own result"
        if rest in ids[index + 1 :]:
            return f"step {rest!r} comes later; a step sees only the steps before it"
        if rest not in ids:
            return _unknown("step", rest, ids[:index])
    return None


def _unknown(kind: str, name: str, known: list[str]) -> str:
    message = f"unknown {kind} {name!r}"
    close = difflib.get_close_matches(name, known, n=1)
    if close:
        return f"{message}; did you mean {close[0]!r}?"
    if known:
        return f"{message}; the {kind}s here are {', '.join(known)}"
    return f"{message}; there are no {kind}s it could use"


def _unknown_name(name: str, allowed: Iterable[str]) -> str:
    names = sorted(allowed)
    message = f"unknown name {name!r}"
    close = difflib.get_close_matches(name, names, n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return f"{message}{hint} (templates here see {', '.join(names)})"


def _across(runbooks: list[LoadedRunbook]) -> list[Problem]:
    problems = []
    by_id: dict[str, LoadedRunbook] = {}
    fallback: LoadedRunbook | None = None
    for loaded in runbooks:
        runbook = loaded.runbook
        first = by_id.setdefault(runbook.id, loaded)
        if first is not loaded:
            message = f"runbook id {runbook.id!r} is also used by {_at(first, ('id',))}"
            problems.append(loaded.problem(("id",), message))
        if runbook.match.fallback:
            if fallback is None:
                fallback = loaded
            else:
                message = (
                    f"a second fallback runbook: {fallback.runbook.id!r} "
                    f"({_at(fallback, ('match', 'fallback'))}) already answers alerts "
                    "no other runbook matches"
                )
                problems.append(loaded.problem(("match", "fallback"), message))
    for index, later in enumerate(runbooks):
        for earlier in runbooks[:index]:
            overlap = _overlap(earlier.runbook, later.runbook)
            if overlap is not None:
                winner = min(earlier.runbook.id, later.runbook.id)
                message = (
                    f"warning: {earlier.runbook.id!r} ({_at(earlier, ('match',))}) also "
                    f"matches {overlap} at priority {later.runbook.match.priority}, where the "
                    f"id that sorts first wins ({winner!r}); give one a higher "
                    "match.priority, or label matchers that rule the other out"
                )
                problems.append(later.problem(("match", "priority"), message))
    return problems


def _at(loaded: LoadedRunbook, loc: Loc) -> str:
    line, column = loaded.source.position(loc)
    return f"{loaded.source.file}:{line}:{column}"


def _overlap(a: Runbook, b: Runbook) -> str | None:
    """What alerts both runbooks could match at the same priority, said for a human, or
    None when they cannot both match one alert."""
    if a.match.fallback or b.match.fallback or a.match.priority != b.match.priority:
        return None
    if a.match.alerts and b.match.alerts:
        shared = [name for name in b.match.alerts if name in a.match.alerts]
        if not shared:
            return None
        described = f"alert {shared[0]!r}"
    elif a.match.alerts or b.match.alerts:
        described = f"alert {(a.match.alerts or b.match.alerts)[0]!r}"
    else:
        described = "the same alerts"
    if _labels_exclude(a.match.labels, b.match.labels):
        return None
    return described


@dataclass
class _Constraint:
    """What one runbook's matchers on one label allow."""

    values: set[str] | None = None  # None: any value
    excluded: set[str] = field(default_factory=set)
    patterns: list[re.Pattern[str]] = field(default_factory=list)

    def allows(self, value: str) -> bool:
        if self.values is not None and value not in self.values:
            return False
        if value in self.excluded:
            return False
        return all(pattern.fullmatch(value) for pattern in self.patterns)


def _constraints(matchers: list[LabelMatcher]) -> dict[str, _Constraint]:
    found: dict[str, _Constraint] = {}
    for matcher in matchers:
        constraint = found.setdefault(matcher.label, _Constraint())
        allowed = None
        if matcher.equals is not None:
            allowed = {matcher.equals}
        elif matcher.in_ is not None:
            allowed = set(matcher.in_)
        elif matcher.not_equals is not None:
            constraint.excluded.add(matcher.not_equals)
        elif matcher.regex is not None:
            with contextlib.suppress(re.error):  # check_runbook reports it
                constraint.patterns.append(re.compile(matcher.regex))
        if allowed is not None:
            constraint.values = (
                allowed if constraint.values is None else constraint.values & allowed
            )
    return found


def _labels_exclude(a: list[LabelMatcher], b: list[LabelMatcher]) -> bool:
    """True when some label's matchers prove that no alert satisfies both lists."""
    ours, theirs = _constraints(a), _constraints(b)
    for label in ours.keys() & theirs.keys():
        one, other = ours[label], theirs[label]
        finite = [c.values for c in (one, other) if c.values is not None]
        if not finite:
            continue
        candidates = set.intersection(*finite)
        if not any(one.allows(v) and other.allows(v) for v in candidates):
            return True
    return False

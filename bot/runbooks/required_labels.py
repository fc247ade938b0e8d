"""Templates that use a label the runbook's `match` does not require: a warning.

`{{ labels.nodename }}` in a runbook whose match never asks for `nodename` fails at run
time (templates are strict: a missing label is an error, not an empty string) for every
alert that lacks it, and the match lets such alerts in. A label is required when one of
`match.labels` rejects an alert without it (`regex: ".+"`, `equals: x`, `in: [...]`
without "", `not_equals: ""`); `alertname` is always there. A use is safe when it has a
fallback (`labels.x | default('')`), asks first (`labels.get('x')`, `'x' in labels`,
`labels.x is defined`), or sits in the branch of an `if` that asked.

`runbook-bot validate` reports these as warnings (exit 0; 1 with `--strict`), each naming
the label, the template and the match, with the two fixes.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import TypeVar

import jinja2
from jinja2 import nodes

from bot.runbooks.loader import LoadedRunbook, Loc, Problem
from bot.runbooks.problems import strings_in
from bot.runbooks.schema import LabelMatcher, Match

__all__ = ["ALWAYS", "check", "required"]

ALWAYS = frozenset({"alertname"})
"""Labels every alert has."""
_FALLBACKS = frozenset({"default", "d"})
_MAPPING_METHODS = frozenset({"get", "items", "keys", "values"})
_N = TypeVar("_N", bound=nodes.Node)
_PARSER = jinja2.Environment(autoescape=False)
"""Only parses: the sandbox's own checks ran already (`templates.references`)."""


def required(match: Match) -> set[str]:
    """The labels every alert this match lets in has."""
    found = set(ALWAYS)
    for matcher in match.labels:
        if not _accepts_missing(matcher):
            found.add(matcher.label)
    return found


def _accepts_missing(matcher: LabelMatcher) -> bool:
    """Whether an alert without the label passes (the catalog reads it as "")."""
    if matcher.equals is not None:
        return matcher.equals == ""
    if matcher.not_equals is not None:
        return matcher.not_equals != ""
    if matcher.in_ is not None:
        return "" in matcher.in_
    assert matcher.regex is not None
    try:
        return re.fullmatch(matcher.regex, "") is not None
    except re.error:
        return True  # check_runbook reports the regex; say nothing more here


def check(loaded: LoadedRunbook) -> list[Problem]:
    """A warning for each template use of a label the match does not require."""
    runbook = loaded.runbook
    have = required(runbook.match)
    problems = []
    for loc, source, expression in _templates(loaded):
        for label in sorted(_unguarded(source, expression) - have):
            problems.append(loaded.problem(loc, _warning(label, runbook.match)))
    return problems


def _templates(loaded: LoadedRunbook) -> Iterator[tuple[Loc, str, bool]]:
    """Every template of the runbook that sees `labels`: (where, text, is an expression)."""
    runbook = loaded.runbook
    for name, template in runbook.facts.items():
        yield ("facts", name), template, False
    for i, step in enumerate(runbook.steps):
        if step.when is not None:
            yield ("steps", i, "when"), step.when, True
        expect = getattr(step, "expect", None)
        if expect is not None:
            yield ("steps", i, "expect", "that"), expect.that, True
        yield from strings_in(step.with_, ("steps", i, "with"))


def _warning(label: str, match: Match) -> str:
    asked = [f"alerts [{', '.join(match.alerts)}]"] if match.alerts else []
    asked += [f"labels [{', '.join(m.label for m in match.labels)}]"] if match.labels else []
    said = "; ".join(asked) if asked else "fallback: any alert"
    return (
        f"warning: labels.{label}: the match ({said}) does not require label {label!r}, so "
        "an alert without it fails this template at run time; require it in match.labels "
        f"({{label: {label}, regex: \".+\"}}) or give a fallback: labels.{label} | default('')"
    )


def _unguarded(source: str, expression: bool) -> set[str]:
    """The labels `source` looks up with no fallback and without asking first."""
    try:
        tree = _PARSER.parse("{{ (" + source + ") }}" if expression else source)
    except jinja2.TemplateSyntaxError:
        return set()  # reported by the template checks
    found: set[str] = set()
    _walk(tree, None, frozenset(), found)
    return found


def _walk(
    node: nodes.Node, parent: nodes.Node | None, asked: frozenset[str], found: set[str]
) -> None:
    label = _lookup(node)
    if label is not None and not _guarded(node, parent):
        if label not in asked:
            found.add(label)
        return
    if isinstance(node, nodes.If):
        _walk(node.test, node, asked, found)
        for child in node.body:
            _walk(child, node, asked | _asked(node.test), found)
        for child in [*node.elif_, *node.else_]:
            _walk(child, node, asked, found)
        return
    if isinstance(node, nodes.CondExpr):
        _walk(node.test, node, asked, found)
        _walk(node.expr1, node, asked | _asked(node.test), found)
        if node.expr2 is not None:
            _walk(node.expr2, node, asked, found)
        return
    for child in node.iter_child_nodes():
        _walk(child, node, asked, found)


def _lookup(node: nodes.Node) -> str | None:
    """`x` when `node` is `labels.x` or `labels['x']`."""
    if isinstance(node, nodes.Getattr) and _is_labels(node.node):
        return None if node.attr in _MAPPING_METHODS else str(node.attr)
    if (
        isinstance(node, nodes.Getitem)
        and _is_labels(node.node)
        and isinstance(node.arg, nodes.Const)
        and isinstance(node.arg.value, str)
    ):
        return node.arg.value
    return None


def _is_labels(node: nodes.Node) -> bool:
    return isinstance(node, nodes.Name) and node.name == "labels"


def _guarded(node: nodes.Node, parent: nodes.Node | None) -> bool:
    """A lookup with a fallback (`| default(...)`) or asked about (`is defined`)."""
    if isinstance(parent, nodes.Filter) and parent.node is node:
        return parent.name in _FALLBACKS
    tests = ("defined", "undefined")
    return isinstance(parent, nodes.Test) and parent.node is node and parent.name in tests


def _asked(test: nodes.Node) -> frozenset[str]:
    """The labels a condition asks about: `'x' in labels`, `labels.x is defined`,
    `labels.get('x')`."""
    asked: set[str] = set()
    for compare in _self_and_below(test, nodes.Compare):
        for operand in compare.ops:
            if (
                operand.op == "in"
                and _is_labels(operand.expr)
                and isinstance(compare.expr, nodes.Const)
                and isinstance(compare.expr.value, str)
            ):
                asked.add(compare.expr.value)
    for check in _self_and_below(test, nodes.Test):
        label = _lookup(check.node)
        if label is not None and check.name == "defined":
            asked.add(label)
    for call in _self_and_below(test, nodes.Call):
        if (
            isinstance(call.node, nodes.Getattr)
            and _is_labels(call.node.node)
            and call.node.attr == "get"
            and call.args
            and isinstance(call.args[0], nodes.Const)
        ):
            asked.add(str(call.args[0].value))
    return frozenset(asked)


def _self_and_below(node: nodes.Node, kind: type[_N]) -> Iterator[_N]:
    if isinstance(node, kind):
        yield node
    yield from node.find_all(kind)

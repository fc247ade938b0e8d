"""Runbook templates: facts, `with` parameters and `when` conditions, in Jinja2's sandbox.

Templates are reviewed code, but what they render is not: label values come from whoever
can fire an alert (DESIGN invariant 4). So templates run in `ImmutableSandboxedEnvironment`
with `StrictUndefined` (a typo is an error, never an empty string) and a smaller language
than Jinja's:

- `{{ expressions }}` and `{% if %}` only: no loops, `set` or macros, so every template
  finishes in time bounded by its length;
- the filters in `FILTERS`, none of which can grow output faster than its input; `int`
  and `float` refuse text that is not a number, where Jinja's return 0 (a GPU index must
  never silently become 0);
- only plain string, mapping and list methods; `str.format`, `%` on strings and
  attributes starting with `_` are refused;
- `*` and `**` refuse results past `MAX_OUTPUT` characters or `MAX_INT_BITS` bits,
  `range` past the sandbox's MAX_RANGE, and no template renders more than `MAX_OUTPUT`.

Every failure, syntax or render, is a `TemplateError` naming the template.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from typing import Any

import jinja2
from jinja2 import StrictUndefined, nodes
from jinja2.exceptions import SecurityError
from jinja2.filters import FILTERS as JINJA_FILTERS
from jinja2.parser import Parser
from jinja2.runtime import Context, Undefined
from jinja2.sandbox import ImmutableSandboxedEnvironment, safe_range

from bot.errors import BotError

MAX_OUTPUT = 64 * 1024
"""Characters one template may render (and one string `*` may build)."""
MAX_INT_BITS = 4096
"""Bits an integer built by `*` or `**` may have."""

NAMES = frozenset({"labels", "annotations", "facts", "steps", "incident"})
"""Top-level names step templates (`with`, `when`) see."""
FACT_NAMES = frozenset({"labels", "annotations", "facts"})
"""Top-level names fact templates see: facts come from the alert, before any step runs."""
GLOBALS = frozenset({"range"})

_STR_METHODS = frozenset(
    {
        "startswith",
        "endswith",
        "lower",
        "upper",
        "strip",
        "lstrip",
        "rstrip",
        "split",
        "rsplit",
        "partition",
        "rpartition",
        "removeprefix",
        "removesuffix",
        "isdigit",
        "isalpha",
        "isalnum",
        "count",
        "find",
    }
)
_MAPPING_METHODS = frozenset({"get", "items", "keys", "values"})
_SEQUENCE_METHODS = frozenset({"count", "index"})
_ALLOWED_STATEMENTS = (nodes.Output, nodes.If)


class TemplateError(BotError):
    """A runbook template does not parse, refers to something undefined, or was refused."""


def _number(convert: type[int] | type[float]) -> Any:
    missing = object()

    def number(value: Any, default: Any = missing) -> Any:
        try:
            if isinstance(value, bool):
                raise ValueError(value)
            return convert(str(value).strip()) if isinstance(value, str) else convert(value)
        except (TypeError, ValueError, OverflowError):
            if default is not missing:
                return default
            raise SecurityError(
                f"{value!r} is not a{'n integer' if convert is int else ' number'}; "
                f"give a fallback like `| {convert.__name__}(-1)` if that can happen"
            ) from None

    return number


def _join(value: Iterable[Any], separator: str = "") -> str:
    parts: list[str] = []
    size = 0
    for item in value:
        text = str(item)
        size += len(text) + (len(separator) if parts else 0)
        if size > MAX_OUTPUT:
            raise SecurityError(f"join would build more than {MAX_OUTPUT} characters")
        parts.append(text)
    return separator.join(parts)


FILTERS: dict[str, Any] = {
    **{
        name: JINJA_FILTERS[name]
        for name in (
            "default",
            "d",
            "lower",
            "upper",
            "trim",
            "string",
            "length",
            "count",
            "first",
            "last",
            "abs",
            "round",
            "capitalize",
            "title",
            # Over lists: linear, and their attribute lookups go through the sandbox.
            "list",
            "select",
            "reject",
            "selectattr",
            "rejectattr",
            "map",
            "unique",
            "sort",
            "min",
            "max",
        )
    },
    "int": _number(int),
    "float": _number(float),
    "join": _join,
}
"""The filters templates may use; anything else is a syntax error at validate time."""


class _Sandbox(ImmutableSandboxedEnvironment):
    intercepted_binops = frozenset({"*", "**", "%"})

    def call_binop(self, context: Context, operator_: str, left: Any, right: Any) -> Any:
        if operator_ == "%" and isinstance(left, str):
            raise SecurityError("% formatting of text is not available; join text with ~")
        if operator_ == "*":
            _check_repeat(left, right)
            _check_repeat(right, left)
            if _is_int(left) and _is_int(right):
                _check_bits(abs(left).bit_length() + abs(right).bit_length())
        if operator_ == "**" and _is_int(left) and _is_int(right) and right > 0:
            _check_bits(abs(left).bit_length() * right)
        return super().call_binop(context, operator_, left, right)

    def is_safe_attribute(self, obj: Any, attr: str, value: Any) -> bool:
        if not super().is_safe_attribute(obj, attr, value):
            return False
        if isinstance(obj, str):
            return attr in _STR_METHODS
        if isinstance(obj, Mapping):
            return attr in _MAPPING_METHODS
        if isinstance(obj, list | tuple):
            return attr in _SEQUENCE_METHODS
        return not callable(value)

    def getattr(self, obj: Any, attribute: str) -> Any:
        if isinstance(obj, Undefined):
            # `cycler.__init__` where cycler is undefined: say so, not "__init__ is unsafe".
            obj._fail_with_undefined_error()
        return super().getattr(obj, attribute)

    def getitem(self, obj: Any, argument: Any) -> Any:
        if isinstance(obj, Undefined):
            obj._fail_with_undefined_error()
        return super().getitem(obj, argument)

    def unsafe_undefined(self, obj: Any, attribute: str) -> Undefined:
        # Jinja returns an undefined that fails only when used; refuse at once instead, so
        # `''.__class__ is defined` is an error too and the first refusal is the one named.
        raise SecurityError(
            f"access to attribute {attribute!r} of {type(obj).__name__!r} object is unsafe"
        )

    def wrap_str_format(self, value: Any) -> Any:
        if super().wrap_str_format(value) is None:
            return None

        def refused(*_args: Any, **_kwargs: Any) -> str:
            raise SecurityError("str.format is not available; join text with ~")

        return refused


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_repeat(sequence: Any, times: Any) -> None:
    repeats = isinstance(sequence, str | list | tuple) and _is_int(times)
    if repeats and len(sequence) * times > MAX_OUTPUT:
        raise SecurityError(f"* would build more than {MAX_OUTPUT} items")


def _check_bits(bits: int) -> None:
    if bits > MAX_INT_BITS:
        raise SecurityError(f"the number would be larger than {MAX_INT_BITS} bits")


def _environment() -> _Sandbox:
    env = _Sandbox(undefined=StrictUndefined, autoescape=False, keep_trailing_newline=True)
    env.filters = dict(FILTERS)
    env.globals = {"range": safe_range}
    return env


_ENV = _environment()


def _short(source: str) -> str:
    text = source if len(source) <= 80 else source[:77] + "..."
    return repr(text)


def _syntax_error(source: str, exc: jinja2.TemplateSyntaxError) -> TemplateError:
    where = f" (line {exc.lineno} of the template)" if "\n" in source.strip() else ""
    return TemplateError(f"template {_short(source)} does not parse: {exc.message}{where}")


@functools.lru_cache(maxsize=1024)
def _parsed(source: str, expression: bool) -> nodes.Node:
    """The checked AST; raises TemplateError for bad syntax, statements, unknown filters."""
    try:
        if expression:
            parser = Parser(_ENV, source, state="variable")
            tree: nodes.Node = parser.parse_expression()
            if not parser.stream.eos:
                raise jinja2.TemplateSyntaxError(
                    f"unexpected {parser.stream.current.value!r} after the expression",
                    parser.stream.current.lineno,
                )
        else:
            tree = _ENV.parse(source)
            for statement in tree.find_all(nodes.Stmt):
                if not isinstance(statement, _ALLOWED_STATEMENTS):
                    raise TemplateError(
                        f"template {_short(source)}: `{{% "
                        f"{type(statement).__name__.lower()} %}}` is not available; runbook "
                        "templates use {{ expressions }} and {% if %} only"
                    )
        # Compiling checks that every filter and test exists.
        _compiled(source, expression)
    except jinja2.TemplateSyntaxError as exc:
        raise _syntax_error(source, exc) from None
    return tree


@functools.lru_cache(maxsize=1024)
def _compiled(source: str, expression: bool) -> Any:
    if expression:
        return _ENV.compile_expression(source, undefined_to_none=False)
    return _ENV.from_string(source)


def _failed(source: str, exc: Exception) -> TemplateError:
    if isinstance(exc, SecurityError):
        return TemplateError(f"template {_short(source)} refused by the sandbox: {exc}")
    if isinstance(exc, jinja2.UndefinedError):
        return TemplateError(f"template {_short(source)}: {exc}")
    return TemplateError(f"template {_short(source)} failed: {type(exc).__name__}: {exc}")


def check(source: str, *, expression: bool = False) -> None:
    """Raise TemplateError unless `source` parses and compiles (`expression` for `when`)."""
    _parsed(source, expression)


def render(template: str, context: Mapping[str, Any]) -> str:
    """Render one template; at most MAX_OUTPUT characters."""
    _parsed(template, False)
    compiled = _compiled(template, False)
    chunks: list[str] = []
    size = 0
    try:
        for chunk in compiled.generate(dict(context)):
            size += len(chunk)
            if size > MAX_OUTPUT:
                raise TemplateError(
                    f"template {_short(template)} renders more than {MAX_OUTPUT} characters"
                )
            chunks.append(chunk)
    except TemplateError:
        raise
    except Exception as exc:  # anything a template does wrong is the template's error
        raise _failed(template, exc) from exc
    return "".join(chunks)


def render_params(with_: Mapping[str, Any], context: Mapping[str, Any]) -> dict[str, Any]:
    """Render every string in `with_`, however deep; other values stay as they are.

    The caller validates the result with the action's parameter model.
    """
    return {key: _render_value(value, context) for key, value in with_.items()}


def _render_value(value: Any, context: Mapping[str, Any]) -> Any:
    if isinstance(value, str):
        return render(value, context)
    if isinstance(value, Mapping):
        return {key: _render_value(item, context) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_render_value(item, context) for item in value]
    return value


def evaluate(expression: str, context: Mapping[str, Any]) -> bool:
    """The truth of a `when` expression."""
    _parsed(expression, True)
    compiled = _compiled(expression, True)
    try:
        return bool(compiled(dict(context)))
    except Exception as exc:  # anything a template does wrong is the template's error
        raise _failed(expression, exc) from exc


def render_facts(
    facts: Mapping[str, str], labels: Mapping[str, str], annotations: Mapping[str, str]
) -> dict[str, str]:
    """Render the facts in order: each sees labels, annotations and the facts before it.

    Values are stripped of surrounding whitespace (a YAML block scalar's newline is never
    part of a node name).
    """
    done: dict[str, str] = {}
    for name, template in facts.items():
        context = {"labels": labels, "annotations": annotations, "facts": dict(done)}
        try:
            done[name] = render(template, context).strip()
        except TemplateError as exc:
            raise TemplateError(f"fact {name!r}: {exc}") from exc
    return done


def references(source: str, *, expression: bool = False) -> set[str]:
    """The names a template uses: top-level names (`labels`, `facts`, ...) and, for `facts`
    and `steps`, `facts.X` / `steps.X` for each name it looks up literally.

    `{{ facts.node ~ steps.drain.result.ok }}` -> {"facts", "facts.node", "steps",
    "steps.drain"}. Raises TemplateError when the template does not parse.
    """
    tree = _parsed(source, expression)
    found: set[str] = set()
    for bare in tree.find_all(nodes.Name):
        if bare.ctx == "load":
            found.add(bare.name)
    for name in ("facts", "steps"):
        found |= _lookups(tree, name)
    return found


def attributes(source: str, name: str, *, expression: bool = True) -> set[str]:
    """`name.X` for each X the template looks up literally on the bare name `name`
    (`result.power`, `result["power"]`). Raises TemplateError when it does not parse."""
    return _lookups(_parsed(source, expression), name)


def _lookups(tree: nodes.Node, name: str) -> set[str]:
    found: set[str] = set()
    for attr in tree.find_all(nodes.Getattr):
        if _is_name(attr.node, name):
            found.add(f"{name}.{attr.attr}")
    for item in tree.find_all(nodes.Getitem):
        if _is_name(item.node, name) and isinstance(item.arg, nodes.Const):
            found.add(f"{name}.{item.arg.value}")
    return found


def _is_name(node: nodes.Node, name: str) -> bool:
    return isinstance(node, nodes.Name) and node.name == name

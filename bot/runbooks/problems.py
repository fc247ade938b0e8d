"""Problems with runbook files, and where they are: the positions every message carries.

`SourceMap` remembers the YAML node behind each value of a file; `schema_problems` turns
a pydantic `ValidationError` into `Problem`s placed at those nodes. Pydantic's error
locations are read against the schema's types, because a location mixes data keys with
the names of union members (`("title", "function-after[_some_text(), LocalizedText]",
"en")`), and a union reports one error per member where an author meant one of them.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from types import NoneType, UnionType
from typing import Annotated, Any, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError
from yaml.nodes import MappingNode, Node, ScalarNode

from bot.errors import BotError
from bot.runbooks.schema import Runbook

Loc = tuple[str | int, ...]
"""Where a value is in a runbook: `("steps", 2, "action")`."""
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def strings_in(value: object, loc: Loc) -> Iterator[tuple[Loc, str, bool]]:
    """Every text in `value` (a step's `with`, however deep), where it is, and False: it
    is a template, not an expression (the flag `when` and `expect.that` carry as True)."""
    if isinstance(value, str):
        yield loc, value, False
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from strings_in(item, (*loc, key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from strings_in(item, (*loc, i))


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a runbook, where it is (1-based), and what to do about it."""

    file: str
    line: int
    column: int
    where: str
    message: str

    @property
    def is_warning(self) -> bool:
        return self.message.startswith("warning:")

    def __str__(self) -> str:
        where = f" {self.where}:" if self.where else ""
        return f"{self.file}:{self.line}:{self.column}{where} {self.message}"


class RunbookInvalid(BotError):
    """One or more runbook files are not valid; `problems` lists every problem found."""

    def __init__(self, problems: Sequence[Problem]) -> None:
        self.problems = list(problems)
        files = len({p.file for p in self.problems})
        head = f"{len(self.problems)} problem{'s' * (len(self.problems) != 1)} in {files} "
        head += "file" if files == 1 else "files"
        super().__init__("\n".join([head + ":", *(str(p) for p in self.problems)]))


def where(loc: Loc) -> str:
    """`("steps", 2, "action")` -> `steps[2].action`."""
    text = ""
    for part in loc:
        if isinstance(part, int):
            text += f"[{part}]"
        elif _IDENTIFIER.fullmatch(part):
            text += f".{part}" if text else part
        else:
            text += f"[{part!r}]"
    return text


class SourceMap:
    """Where each value of one file was written: a location -> its YAML node."""

    def __init__(self, file: str, values: dict[Loc, Node], keys: dict[Loc, Node]) -> None:
        self.file = file
        self._values = values
        self._keys = keys

    def node(self, loc: Loc) -> Node | None:
        """The value node at `loc`, or None when nothing was written there."""
        return self._values.get(tuple(loc))

    def position(self, loc: Loc, *, key: bool = False) -> tuple[int, int]:
        """(line, column), 1-based, of the value at `loc` (its key with `key`), or of the
        nearest enclosing value when `loc` was not written."""
        loc = tuple(loc)
        if key and loc in self._keys:
            mark = self._keys[loc].start_mark
            return mark.line + 1, mark.column + 1
        while loc not in self._values and loc:
            loc = loc[:-1]
        node = self._values.get(loc)
        if node is None:
            return 1, 1
        return node.start_mark.line + 1, node.start_mark.column + 1

    def problem(self, loc: Loc, message: str, *, key: bool = False) -> Problem:
        line, column = self.position(loc, key=key)
        return Problem(self.file, line, column, where(loc), message)


def schema_problems(
    exc: ValidationError, source: SourceMap, *, dropping_root: bool
) -> list[Problem]:
    """Each error of `exc` as a Problem at its node; with `dropping_root`, leave out the
    runbook-wide model validator's error (the caller has placed those problems)."""
    errors = [(error, _Location.of(error["loc"])) for error in exc.errors()]
    # A union (text: a string or {en, zh}) reports one error per member; keep the member
    # the author evidently meant: the model if they wrote a mapping, the other if not.
    meant = [_meant(location, source) for _, location in errors]
    unions: dict[Loc, list[int]] = {}
    for i, (_, location) in enumerate(errors):
        if location.unions:
            unions.setdefault(location.unions[0].prefix, []).append(i)
    problems = []
    for i, (error, location) in enumerate(errors):
        other_member_meant = location.unions and any(
            meant[j] for j in unions[location.unions[0].prefix]
        )
        if other_member_meant and not meant[i]:
            continue
        if dropping_root and not location.path and error["type"] == "value_error":
            continue  # the loader placed the runbook-wide check itself
        key = error["type"] == "extra_forbidden" or location.is_key
        message = _message(error, location, source)
        problems.append(source.problem(location.path, message, key=key))
    return problems


def _meant(location: _Location, source: SourceMap) -> bool:
    return all(
        _is_model(union.chosen) == isinstance(source.node(union.prefix), MappingNode)
        for union in location.unions
    )


def _is_model(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, BaseModel)


@dataclass(frozen=True)
class _Union:
    prefix: Loc
    chosen: Any
    members: tuple[Any, ...]


@dataclass(frozen=True)
class _Location:
    """A pydantic error location read against the schema's types: the data path, the
    model that owns its last key, and the unions (and member) it went through."""

    path: Loc
    owner: type[BaseModel] | None
    unions: tuple[_Union, ...]
    is_key: bool

    @staticmethod
    def of(loc: Sequence[str | int]) -> _Location:
        tp: Any = Runbook
        path: list[str | int] = []
        owner: type[BaseModel] | None = None
        unions: list[_Union] = []
        is_key = False
        for part in loc:
            tp = _unwrap(tp)
            members = _union_members(tp)
            if len(members) > 1 and isinstance(part, str):
                tp = _member(members, part)
                unions.append(_Union(tuple(path), tp, tuple(members)))
                continue
            if part == "[key]":
                is_key = True
                continue
            path.append(part)
            owner = tp if _is_model(tp) else None
            if owner is not None:
                field = _field(owner, str(part))
                tp = field if field is not None else Any
            elif get_origin(tp) is list and isinstance(part, int):
                tp = get_args(tp)[0]
            elif get_origin(tp) is dict:
                tp = get_args(tp)[1]
            else:
                tp = Any
        return _Location(tuple(path), owner, tuple(unions), is_key)


def _unwrap(tp: Any) -> Any:
    while True:
        if get_origin(tp) is Annotated:
            tp = get_args(tp)[0]
            continue
        members = _union_members(tp)
        if len(members) == 1 and members[0] is not tp:
            tp = members[0]
            continue
        return tp


def _union_members(tp: Any) -> list[Any]:
    if get_origin(tp) in (Union, UnionType):
        return [arg for arg in get_args(tp) if arg is not NoneType]
    return [tp]


def _member(members: list[Any], tag: str) -> Any:
    # pydantic tags a member error with its type: `str`, or for a model with a validator
    # `function-after[_some_text(), LocalizedText]`.
    name = tag.rstrip("]").split(", ")[-1].split("[")[-1]
    for member in members:
        if getattr(member, "__name__", None) == name:
            return member
    return Any


def _field(model: type[BaseModel], key: str) -> Any:
    for name, field in model.model_fields.items():
        if key in (name, field.alias):
            return field.annotation
    return None


def _field_names(model: type[BaseModel]) -> list[str]:
    return [field.alias or name for name, field in model.model_fields.items()]


def _message(error: Any, location: _Location, source: SourceMap) -> str:
    kind = error["type"]
    given = error.get("input")
    key = location.path[-1] if location.path else ""
    if kind == "missing":
        return "required key is missing"
    if kind == "extra_forbidden":
        message = f"unknown key {key!r}"
        if location.owner is not None:
            names = _field_names(location.owner)
            close = difflib.get_close_matches(str(key), names, n=1)
            if close:
                return f"{message}; did you mean {close[0]!r}?"
            return f"{message}; expected one of {', '.join(names)}"
        return message
    message = str(error["msg"]).removeprefix("Value error, ").removeprefix("Assertion failed, ")
    if kind.endswith("_type") and location.unions and not _is_model(location.unions[-1].chosen):
        models = [m for m in location.unions[-1].members if _is_model(m)]
        if models:
            message += f", or a mapping of {', '.join(_field_names(models[0]))}"
    node = source.node(location.path)
    if kind in ("value_error", "assertion_error") or isinstance(given, dict | list):
        return message
    if given is None and isinstance(node, ScalarNode) and node.value in ("", "~", "null"):
        return f"{message}; the value is empty"
    plain = isinstance(node, ScalarNode) and node.style is None
    if kind == "string_type" and plain and isinstance(node, ScalarNode):
        return f"{message}; YAML reads {node.value} as {type(given).__name__}: quote it"
    shown = repr(given)
    return f"{message}, not {shown if len(shown) <= 60 else shown[:57] + '...'}"

"""The action registry: every action a runbook can run, declared once.

An action has a dotted name an operator would say (`k8s.cordon`), a parameter model, a
result model, a risk level that decides how many people must approve it, a one-line
description, and whether it supports dry run. Executors register with `@action(...)`;
runbooks, the CLI and chat look actions up here by name.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from enum import StrEnum
from types import UnionType
from typing import Annotated, Any, Literal, TypeVar, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError

from bot.actions.context import ActionContext
from bot.actions.types import Params, Result
from bot.errors import ActionUnknown, ParamsInvalid


class Risk(StrEnum):
    READ = "read"
    CHANGE = "change"
    DISRUPTIVE = "disruptive"

    @property
    def approvals(self) -> int:
        """People who must approve by default: read runs alone, change needs one, disruptive
        two distinct people."""
        return {Risk.READ: 0, Risk.CHANGE: 1, Risk.DISRUPTIVE: 2}[self]


P = TypeVar("P", bound=Params)
R = TypeVar("R", bound=Result)
Executor = Callable[[ActionContext, Any], Result]


@dataclass(frozen=True)
class Action:
    name: str
    params: type[Params]
    result: type[Result]
    risk: Risk
    description: str
    dry_run: bool
    run: Executor

    def parse(self, raw: dict[str, Any]) -> Params:
        """Validate raw (untrusted) parameters; `ParamsInvalid` names each bad field."""
        try:
            return self.params.model_validate(raw)
        except ValidationError as exc:
            raise ParamsInvalid(describe_errors(self.name, exc)) from exc

    def parameters(self) -> list[tuple[str, str, bool, str]]:
        """(name, type, required, description) of each parameter, for `runbook-bot actions`."""
        return [
            (name, _type_name(field.annotation), field.is_required(), field.description or "")
            for name, field in self.params.model_fields.items()
        ]


def _type_name(annotation: Any) -> str:
    """`str`, `int`, `list[str]`, `str?` for optional: what an operator types, not typing's repr."""
    args = [a for a in get_args(annotation) if a is not type(None)]
    if get_origin(annotation) in (Union, UnionType) and len(args) == 1:
        return _type_name(args[0]) + "?"
    if get_origin(annotation) is Annotated:
        return _type_name(args[0])
    if get_origin(annotation) is Literal:
        return "|".join(str(a) for a in args)
    if get_origin(annotation) in (list, dict):
        return f"{get_origin(annotation).__name__}[{', '.join(_type_name(a) for a in args)}]"
    if annotation is timedelta:
        return "duration"
    return getattr(annotation, "__name__", str(annotation))


_REGISTRY: dict[str, Action] = {}


def action(
    name: str,
    *,
    params: type[P],
    result: type[R],
    risk: Risk,
    description: str,
    dry_run: bool,
) -> Callable[[Callable[[ActionContext, P], R]], Callable[[ActionContext, P], R]]:
    """Register the decorated executor under `name`."""

    def register(run: Callable[[ActionContext, P], R]) -> Callable[[ActionContext, P], R]:
        if name in _REGISTRY:
            raise ValueError(f"action {name} is registered twice")
        _REGISTRY[name] = Action(name, params, result, risk, description, dry_run, run)
        return run

    return register


def get(name: str) -> Action:
    _load()
    try:
        return _REGISTRY[name]
    except KeyError:
        close = difflib.get_close_matches(name, _REGISTRY, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else "; `runbook-bot actions` lists them"
        raise ActionUnknown(f"unknown action {name!r}{hint}") from None


def all_actions() -> list[Action]:
    _load()
    return sorted(_REGISTRY.values(), key=lambda a: a.name)


def _load() -> None:
    # Executors register on import; import them here so a lookup always sees all of them.
    from bot.actions import executors  # noqa: F401


def describe_errors(name: str, exc: ValidationError) -> str:
    parts = []
    for error in exc.errors():
        field = ".".join(str(p) for p in error["loc"]) or "(parameters)"
        given = error.get("input")
        shown = repr(given)[:60] + ("..." if len(repr(given)) > 60 else "")
        message = error["msg"].removeprefix("Value error, ")
        if error["type"] == "string_pattern_mismatch":
            message = "not a valid Kubernetes name (lowercase letters, digits, '-', '.')"
        elif error["type"] == "extra_forbidden":
            message = "unknown parameter"
        parts.append(f"{field}={shown}: {message}")
    return f"{name}: invalid parameters: " + "; ".join(parts)


def model_summary(model: type[BaseModel]) -> str:
    return ", ".join(model.model_fields)

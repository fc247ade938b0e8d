"""Read runbook YAML into `Runbook` models, remembering where every value was written.

A file is read as UTF-8 text, composed into PyYAML nodes (which carry line and column),
turned into plain data by walking those nodes, then validated by the schema. Every
failure on the way is a `Problem` at a file:line:column an author can jump to: YAML
syntax (in plain words, with the fix: `bot.yaml_errors`), duplicate keys (which PyYAML
would silently let the last one win), anchors and aliases (refused: they make "what does
this step say" a puzzle, and expand into alias bombs), tags, more than one document, and
each pydantic error, placed at the node its location names (the key itself for an
unknown key; the nearest enclosing node for a missing one; see `problems`). Whatever the
input, the only exception that leaves is `RunbookInvalid`.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError
from yaml.composer import ComposerError
from yaml.error import Mark
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from bot import yaml_errors
from bot.runbooks.problems import Loc, Problem, RunbookInvalid, SourceMap, schema_problems, where
from bot.runbooks.schema import FACT_PATTERN, Runbook

__all__ = [
    "MAX_BYTES",
    "MAX_DEPTH",
    "LoadedRunbook",
    "Loc",
    "Problem",
    "RunbookInvalid",
    "SourceMap",
    "load_file",
    "load_paths",
    "parse",
    "runbook_files",
]

MAX_BYTES = 1024 * 1024
"""Largest runbook file read; the shipped ones are a few KiB."""
MAX_DEPTH = 40
"""Deepest nesting of mappings and lists; a runbook needs about eight."""

_MAP_TAG = "tag:yaml.org,2002:map"
_SEQ_TAG = "tag:yaml.org,2002:seq"


@dataclass(frozen=True)
class LoadedRunbook:
    """A valid runbook with its file, its text and where each value was written."""

    runbook: Runbook
    path: Path
    text: str
    source: SourceMap

    def problem(self, loc: Loc, message: str, *, key: bool = False) -> Problem:
        return self.source.problem(loc, message, key=key)

    @cached_property
    def document(self) -> dict[str, Any]:
        """The runbook as stored with incidents: every field, by its YAML name."""
        return self.runbook.model_dump(by_alias=True, mode="json")

    @cached_property
    def digest(self) -> str:
        """SHA-256 of the document's canonical JSON (sorted keys, no spaces, UTF-8): the
        content an incident follows, whatever its `version` says."""
        text = json.dumps(self.document, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        return hashlib.sha256(text.encode()).hexdigest()


class _Refused(Exception):
    """Stops reading one file; carries its problem."""

    def __init__(self, problem: Problem) -> None:
        super().__init__(str(problem))
        self.problem = problem


def runbook_files(paths: Iterable[Path]) -> list[Path]:
    """Each path as given if a file; a directory's `*.yaml` and `*.yml` (not recursive,
    no hidden files), sorted by name. Missing paths stay in, to be reported."""
    files: list[Path] = []
    for path in paths:
        if path.is_dir():
            found = [
                child
                for child in path.iterdir()
                if child.suffix in (".yaml", ".yml")
                and not child.name.startswith(".")
                and child.is_file()
            ]
            files.extend(sorted(found, key=lambda child: child.name))
        else:
            files.append(path)
    return files


def load_file(path: Path | str) -> LoadedRunbook:
    """Load one runbook file; RunbookInvalid lists everything wrong with it."""
    path = Path(path)
    loaded, problems = _load(path)
    if loaded is None:
        raise RunbookInvalid(problems)
    return loaded


def load_paths(paths: Iterable[Path | str]) -> list[LoadedRunbook]:
    """Load every runbook file in `paths` (files or directories); RunbookInvalid lists the
    problems of all files at once."""
    loaded: list[LoadedRunbook] = []
    problems: list[Problem] = []
    for file in runbook_files(Path(p) for p in paths):
        runbook, found = _load(file)
        problems.extend(found)
        if runbook is not None:
            loaded.append(runbook)
    if problems:
        raise RunbookInvalid(problems)
    return loaded


def parse(text: str, *, file: str = "<string>") -> LoadedRunbook:
    """Load a runbook from text (the snapshot frozen onto an incident, a test)."""
    loaded, problems = _parse(text, file, Path(file))
    if loaded is None:
        raise RunbookInvalid(problems)
    return loaded


def _load(path: Path) -> tuple[LoadedRunbook | None, list[Problem]]:
    file = str(path)
    try:
        text = _read(path, file)
    except _Refused as refused:
        return None, [refused.problem]
    return _parse(text, file, path)


def _read(path: Path, file: str) -> str:
    try:
        with path.open("rb") as handle:
            data = handle.read(MAX_BYTES + 1)
    except FileNotFoundError:
        raise _Refused(Problem(file, 1, 1, "", "no such file")) from None
    except IsADirectoryError:
        raise _Refused(Problem(file, 1, 1, "", "is a directory")) from None
    except OSError as exc:
        raise _Refused(Problem(file, 1, 1, "", f"cannot read: {exc.strerror}")) from None
    if len(data) > MAX_BYTES:
        message = f"larger than {MAX_BYTES // 1024} KiB; is this a runbook?"
        raise _Refused(Problem(file, 1, 1, "", message))
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        before = data[: exc.start]
        line = before.count(b"\n") + 1
        column = len(before.rsplit(b"\n", 1)[-1].decode("utf-8", "replace")) + 1
        message = f"not UTF-8 text (byte 0x{data[exc.start]:02x}); save the file as UTF-8"
        raise _Refused(Problem(file, line, column, "", message)) from None


def _parse(text: str, file: str, path: Path) -> tuple[LoadedRunbook | None, list[Problem]]:
    try:
        root = _compose(text, file)
    except _Refused as refused:
        return None, [refused.problem]
    if root is None:
        message = "empty file; a runbook is a mapping with id, title, version, match and steps"
        return None, [Problem(file, 1, 1, "", message)]
    if not isinstance(root, MappingNode):
        mark = root.start_mark
        kind = "a list" if isinstance(root, SequenceNode) else "a single value"
        message = f"a runbook is a mapping (id: ..., steps: ...), not {kind}"
        return None, [Problem(file, mark.line + 1, mark.column + 1, "", message)]
    builder = _Builder(file)
    data = builder.build(root, ())
    source = SourceMap(file, builder.values, builder.keys)
    if builder.problems:
        # The data is incomplete where those problems are; schema errors there would mislead.
        return None, sorted(builder.problems, key=_order)
    problems = _structure_problems(data, source)
    try:
        runbook = Runbook.model_validate(data)
    except ValidationError as exc:
        problems += schema_problems(exc, source, dropping_root=bool(problems))
    except Exception as exc:  # a validator that raised something pydantic does not wrap
        problems.append(Problem(file, 1, 1, "", f"cannot validate: {exc}"))
    if problems:
        return None, sorted(problems, key=_order)
    return LoadedRunbook(runbook, path, text, source), []


def _order(problem: Problem) -> tuple[int, int]:
    return problem.line, problem.column


class _Composer(yaml.SafeLoader):
    """PyYAML's safe loader, composing nodes only, refusing anchors, aliases and depth."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self.depth = 0

    def compose_node(self, parent: Node | None, index: Any) -> Node | None:
        event = self.peek_event()  # type: ignore[no-untyped-call]
        mark: Mark = event.start_mark
        if isinstance(event, yaml.AliasEvent):
            raise ComposerError(
                None,
                None,
                f"alias *{event.anchor} is not allowed in runbooks; write the value out",
                mark,
            )
        anchor = getattr(event, "anchor", None)
        if anchor is not None:
            raise ComposerError(
                None,
                None,
                f"anchor &{anchor} is not allowed in runbooks; write each value out",
                mark,
            )
        self.depth += 1
        try:
            if self.depth > MAX_DEPTH:
                raise ComposerError(None, None, f"nested deeper than {MAX_DEPTH} levels", mark)
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1


def _compose(text: str, file: str) -> Node | None:
    loader: _Composer | None = None
    try:
        loader = _Composer(text)
        node: Node | None = loader.get_single_node()
        return node
    except (yaml.scanner.ScannerError, yaml.parser.ParserError) as exc:
        said = yaml_errors.explain(exc, text)
        problem = Problem(file, said.line, said.column, "", f"YAML: {said.message}")
        raise _Refused(problem) from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line, column = (mark.line + 1, mark.column + 1) if mark else (1, 1)
        message = exc.problem or "YAML error"
        if (exc.context or "").startswith("expected a single document"):
            message = "more than one YAML document (---); a file holds one runbook"
        elif exc.context and exc.context_mark is not None and exc.context_mark is not mark:
            cm = exc.context_mark
            message += f" ({exc.context} at line {cm.line + 1}, column {cm.column + 1})"
        elif exc.context:
            message += f" ({exc.context})"
        raise _Refused(Problem(file, line, column, "", f"YAML: {message}")) from None
    except yaml.reader.ReaderError as exc:
        before = text[: exc.position]
        line = before.count("\n") + 1
        column = exc.position - (before.rfind("\n") + 1) + 1
        message = f"YAML: character U+{exc.character:04X} is not allowed in YAML text"
        raise _Refused(Problem(file, line, column, "", message)) from None
    except (yaml.YAMLError, RecursionError, ValueError) as exc:
        raise _Refused(Problem(file, 1, 1, "", f"YAML: {exc}")) from None
    finally:
        if loader is not None:
            loader.dispose()


class _Builder:
    """Nodes -> plain data, recording each value's and key's node by location.

    Keys are taken as written (`on:` is the key "on", not True); scalar values get YAML's
    usual types (1 is an int, true a bool, 15m a string)."""

    def __init__(self, file: str) -> None:
        self.file = file
        self.values: dict[Loc, Node] = {}
        self.keys: dict[Loc, Node] = {}
        self.problems: list[Problem] = []
        self._scalars = yaml.SafeLoader("")

    def _problem(self, node: Node, loc: Loc, message: str) -> None:
        line, column = node.start_mark.line + 1, node.start_mark.column + 1
        self.problems.append(Problem(self.file, line, column, where(loc), message))

    def build(self, node: Node, loc: Loc) -> Any:
        self.values[loc] = node
        if isinstance(node, MappingNode):
            if node.tag != _MAP_TAG:
                self._problem(node, loc, f"YAML tag {node.tag!r} is not supported here")
            return self._mapping(node, loc)
        if isinstance(node, SequenceNode):
            if node.tag != _SEQ_TAG:
                self._problem(node, loc, f"YAML tag {node.tag!r} is not supported here")
            return [self.build(item, (*loc, i)) for i, item in enumerate(node.value)]
        try:
            return self._scalars.construct_object(node, deep=True)
        except yaml.MarkedYAMLError as exc:
            self._problem(node, loc, f"YAML: {exc.problem}")
        except Exception as exc:  # e.g. int() of 5000 digits, a date like 2024-13-45
            self._problem(node, loc, f"cannot read this value: {exc}")
        return None

    def _mapping(self, node: MappingNode, loc: Loc) -> dict[str, Any]:
        result: dict[str, Any] = {}
        first: dict[str, Node] = {}
        for key_node, value_node in node.value:
            if not isinstance(key_node, ScalarNode):
                self._problem(key_node, loc, "a key must be plain text, not a list or mapping")
                continue
            key = key_node.value
            if key in first:
                line = first[key].start_mark.line + 1
                self._problem(
                    key_node, (*loc, key), f"duplicate key {key!r} (first at line {line})"
                )
                continue
            first[key] = key_node
            self.keys[(*loc, key)] = key_node
            result[key] = self.build(value_node, (*loc, key))
        return result


def _structure_problems(data: dict[str, Any], source: SourceMap) -> list[Problem]:
    """The schema's runbook-wide checks, placed at the offending node rather than at the
    top of the file where pydantic puts a model validator's error."""
    problems = []
    steps = data.get("steps")
    seen: dict[str, int] = {}
    for i, step in enumerate(steps if isinstance(steps, list) else []):
        if not isinstance(step, dict):
            continue
        step_id = step.get("id")
        if isinstance(step_id, str) and step_id in seen:
            line = source.position(("steps", seen[step_id], "id"))[0]
            message = f"step id {step_id!r} is used twice (first at line {line})"
            problems.append(source.problem(("steps", i, "id"), message))
        elif isinstance(step_id, str):
            seen[step_id] = i
    facts = data.get("facts")
    for name in facts if isinstance(facts, dict) else []:
        if not re.fullmatch(FACT_PATTERN, name):
            message = f"fact name {name!r}: use lowercase letters, digits and _"
            problems.append(source.problem(("facts", name), message, key=True))
    return problems

"""PyYAML's syntax errors in plain words, with the line to change and how.

PyYAML says where it gave up in parser terms ("expected <block end>, but found '?'"); an
author needs what is wrong with their text ("this line is indented differently from the
keys above it") and the fix ("move `manual:` to column 5, like `title:` on line 8").
`explain` reads the text around the error to say that, for the mistakes people make: a
key indented more or less than its neighbours, a tab, a colon inside a plain value, an
unclosed quote or bracket, a value starting with a character YAML reserves. Anything else
keeps PyYAML's words. Runbooks (`bot.runbooks.loader`) and the settings file
(`bot.config`) both use it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import yaml

__all__ = ["Explained", "explain"]

_KEY = re.compile(r"^(?:- +)*([^\s#'\"\[\]{},:][^:#]*?):(?:\s|$)")
"""A block mapping key at the start of a line's text (after any `- `)."""


@dataclass(frozen=True)
class Explained:
    """Where the mistake is (1-based) and what to do about it."""

    line: int
    column: int
    message: str


@dataclass(frozen=True)
class _Level:
    """An open indentation level above the error: a key or a list item."""

    column: int  # 0-based
    line: int  # 0-based
    text: str

    @property
    def item(self) -> bool:
        return self.text.startswith("-")

    @property
    def key(self) -> str:
        found = _KEY.match(self.text)
        return f"{found.group(1)}:" if found else self.text.split()[0]


def explain(exc: yaml.YAMLError, text: str) -> Explained:
    """What `exc`, raised reading `text`, means for the author of `text`."""
    if not isinstance(exc, yaml.MarkedYAMLError) or exc.problem_mark is None:
        return Explained(1, 1, str(exc))
    mark, problem = exc.problem_mark, exc.problem or "YAML error"
    lines = text.splitlines()
    context = exc.context or ""
    row = lines[mark.line] if mark.line < len(lines) else ""
    if "'\\t'" in problem or (mark.column < len(row) and row[mark.column] == "\t"):
        return Explained(
            mark.line + 1,
            mark.column + 1,
            "a tab character; YAML indents with spaces only: replace the tab with spaces",
        )
    quote = _open_quote(lines, mark.line)
    if quote is not None:
        line, column = quote
        return Explained(
            line + 1,
            column + 1,
            f"this quoted value is not closed on its line, so YAML reads on past it to "
            f"line {mark.line + 1} and fails there: add the closing quote where the "
            "value ends",
        )
    if problem.startswith(("expected <block end>", "did not find expected")):
        return _indentation(lines, mark.line, mark.column)
    if problem == "mapping values are not allowed here":
        return _colon(lines, mark.line, mark.column)
    if "could not find expected ':'" in problem and exc.context_mark is not None:
        start = exc.context_mark
        return Explained(
            start.line + 1,
            start.column + 1,
            "this line is not `key: value`, nor the continuation of a value: put ': ' "
            "after the key, or indent a value that goes on over several lines further "
            "than its key",
        )
    if "found unexpected end of stream" in problem and "quoted scalar" in context:
        start = exc.context_mark or mark
        return Explained(
            start.line + 1,
            start.column + 1,
            "this quoted value is never closed: add the closing quote where the value ends",
        )
    flow = re.match(r"expected ',' or '([\]}])'", problem)
    if flow and exc.context_mark is not None:
        start, closing = exc.context_mark, flow.group(1)
        kind = "list [" if closing == "]" else "mapping {"
        return Explained(
            start.line + 1,
            start.column + 1,
            f"the {kind}...{closing} opened here is not closed before line {mark.line + 1}, "
            f"column {mark.column + 1}: add the closing {closing!r} where it ends (and a "
            "comma between its items)",
        )
    if "'<stream end>'" in problem:
        return Explained(
            mark.line + 1,
            mark.column + 1,
            "the file ends in the middle of a value: close the [list], {mapping} or quote "
            "left open above",
        )
    reserved = re.match(r"found character '(.)' that cannot start any token", problem)
    if reserved:
        return Explained(
            mark.line + 1,
            mark.column + 1,
            f"a plain value cannot start with {reserved.group(1)!r}: put the value in quotes",
        )
    words = problem + (f" ({context})" if context else "")
    return Explained(mark.line + 1, mark.column + 1, words)


def _open_quote(lines: list[str], before: int) -> tuple[int, int] | None:
    """Where a quote is opened that is still open at line `before` (0-based): a value
    whose closing quote was forgotten swallows the lines after it."""
    opened: tuple[int, int] | None = None
    quote = ""
    for number in range(min(before, len(lines))):
        text = lines[number]
        column = 0
        while column < len(text):
            char = text[column]
            if quote == '"' and char == "\\":
                column += 2
                continue
            if quote == "'" and text.startswith("''", column):
                column += 2
                continue
            if quote and char == quote:
                quote, opened = "", None
            elif not quote and char == "#" and (column == 0 or text[column - 1] == " "):
                break
            elif not quote and char in "\"'" and _starts_value(text, column):
                quote, opened = char, (number, column)
            column += 1
    return opened if quote else None


def _starts_value(text: str, column: int) -> bool:
    """Whether a quote at `column` opens a quoted value (not an apostrophe in plain text)."""
    before = text[:column].rstrip(" ")
    return not before or before.endswith((":", "-", "[", "{", ","))


def _levels(lines: list[str], before: int) -> list[_Level]:
    """The keys and list items still open at line `before` (0-based), outermost first."""
    stack: list[_Level] = []
    for number in range(min(before, len(lines))):
        raw = lines[number]
        content = raw.lstrip(" ")
        if not content or content.startswith("#"):
            continue
        column = len(raw) - len(content)
        while stack and stack[-1].column >= column:
            stack.pop()
        stack.append(_Level(column, number, content))
        rest = content
        while rest.startswith("- "):  # `- id: x`: the item's keys sit further in
            inner = rest[2:].lstrip(" ")
            column += len(rest) - len(inner)
            if inner:
                stack.append(_Level(column, number, inner))
            rest = inner
    return stack


def _indentation(lines: list[str], line: int, column: int) -> Explained:
    row = lines[line] if line < len(lines) else ""
    content = row.lstrip(" ")
    indent = len(row) - len(content)
    if not content:
        message = "this line is indented differently from the lines above it: line it up "
        return Explained(line + 1, column + 1, message + "with the key it belongs with")
    here = _Level(indent, line, content)
    levels = _levels(lines, line)
    if here.item:
        lists = [level for level in reversed(levels) if level.item and level.column != indent]
        if lists:
            columns = " or ".join(
                f"column {level.column + 1} (line {level.line + 1})" for level in lists[:2]
            )
            message = (
                f"this list item starts at column {indent + 1}, the items of the lists above "
                f"it at {columns}: line it up with the items of its list (spaces only)"
            )
            return Explained(line + 1, indent + 1, message)
    keys = [level for level in reversed(levels) if not level.item and level.column != indent]
    items = [level for level in levels if level.item and level.column == indent]
    if items and not here.item:
        item = items[-1]
        inside = [k for k in keys if k.column > indent]
        like = (
            f" to go on with that item (like `{inside[0].key}`, line {inside[0].line + 1})"
            if inside
            else " to go on with that item"
        )
        target = inside[0].column + 1 if inside else indent + 3
        message = (
            f"`{here.key}` starts at column {indent + 1}, where the items of the list on "
            f"line {item.line + 1} start (`{item.text.strip()}`), but it is not a list item: "
            f"indent it to column {target}{like}, or write '- ' before it to start a new item"
        )
        return Explained(line + 1, indent + 1, message)
    around = _nearest(keys, indent)
    if not around:
        message = (
            f"`{here.key}` is indented differently from the lines above it (column "
            f"{indent + 1}): line it up with the key it belongs with, using spaces"
        )
        return Explained(line + 1, indent + 1, message)
    columns = " or ".join(
        f"column {level.column + 1} (`{level.key}`, line {level.line + 1})" for level in around
    )
    message = (
        f"this line is indented differently from the keys above it: `{here.key}` starts at "
        f"column {indent + 1}, the keys around it at {columns}; move it to the column of the "
        "key it belongs with (spaces only)"
    )
    return Explained(line + 1, indent + 1, message)


def _nearest(keys: list[_Level], indent: int) -> list[_Level]:
    """The open keys just inside and just outside `indent`: where the line could go."""
    deeper = [k for k in keys if k.column > indent]
    shallower = [k for k in keys if k.column < indent]
    chosen = deeper[:1] + shallower[:1]
    return sorted(chosen, key=lambda level: -level.column)


def _colon(lines: list[str], line: int, column: int) -> Explained:
    row = lines[line] if line < len(lines) else ""
    content = row.lstrip(" ")
    indent = len(row) - len(content)
    found = _KEY.match(content)
    above = _previous(lines, line)
    if found and above is not None:
        above_text = lines[above]
        above_content = above_text.lstrip(" ")
        above_indent = len(above_text) - len(above_content)
        above_key = _KEY.match(above_content)
        above_column = above_indent + above_key.start(1) if above_key else indent
        if above_key and above_column < indent and above_content[above_key.end() :].strip():
            key, parent = f"{found.group(1)}:", f"{above_key.group(1)}:"
            key_column = above_column + 1
            message = (
                f"`{key}` is indented more than `{parent}` on line {above + 1}, so YAML reads "
                f"it as more of the value of `{parent}`, where ': ' is not allowed: move it "
                f"to column {key_column}, like `{parent}`, or quote the value if the colon "
                "belongs to it"
            )
            return Explained(line + 1, indent + 1, message)
    owner = f"the value of `{found.group(1)}:`" if found else "a plain value here"
    message = (
        f"{owner} contains ': ' (a colon and a space), which YAML reads as the start of a "
        'key: put the whole value in quotes (key: "a: b")'
    )
    return Explained(line + 1, column + 1, message)


def _previous(lines: list[str], line: int) -> int | None:
    for number in range(line - 1, -1, -1):
        content = lines[number].strip()
        if content and not content.startswith("#"):
            return number
    return None

"""What a command prints fits where it goes: a terminal gets colour and tables that fit its
width, a pipe gets the plain lines scripts read.

`use` makes the command's two consoles (rich) on its stdout and stderr, once per command
(`bot.cli.main`); `out()` and `err()` give them. Colour only on a terminal, as rich decides
it: `FORCE_COLOR` forces it on, `NO_COLOR` (or `--no-color`) off.

Tables (`table`, `show`) are as wide as the output: `COLUMNS` when set, else the terminal's
width; on a pipe with no `COLUMNS`, as wide as their rows, one row a line, as they always
were. Columns wrap at spaces, the last one most; when even that leaves the last column too
narrow to read (a phone's terminal, 40 columns), each row becomes a block of `header value`
lines instead, so no word is cut.

`ActionProgress` draws what a long action reports (`bot.actions.Reading`): a bar of pods
left for a drain, the BMC's power states one after the other for a power cycle, on a
terminal; one line per change on a pipe.

Cell text is `rich.text.Text`, never markup: alert text and node names print as they are
(rich drops control characters, so a label cannot move the cursor)."""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import IO, TYPE_CHECKING, Any, Final

from rich.cells import cell_len
from rich.console import Console, Group, RenderableType
from rich.padding import Padding
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    SpinnerColumn,
    TaskID,
    TextColumn,
)
from rich.table import Table
from rich.text import Text

if TYPE_CHECKING:
    from bot.actions import Reading

__all__ = [
    "ActionProgress",
    "Cell",
    "STATE_STYLES",
    "err",
    "out",
    "render",
    "show",
    "styled",
    "table",
    "use",
    "width_of",
]

Cell = str | Text
GAP: Final = 3
"""Spaces between columns, as the plain tables always had."""
READABLE: Final = 24
"""The last column (a summary, a title) is given at least this much (or a third of the
width), when the others can wrap to make room; below `NARROWEST` the rows become blocks."""
NARROWEST: Final = 16

STATE_STYLES: Final = {
    "succeeded": "green",
    "done": "green",
    "resolved": "green",
    "running": "cyan",
    "approved": "cyan",
    "awaiting_approval": "bold yellow",
    "proposed": "yellow",
    "interrupted": "red",
    "open": "bold yellow",
    "acknowledged": "yellow",
    "failed": "bold red",
    "timed_out": "bold red",
    "expired": "red",
    "cancelled": "magenta",
    "skipped": "dim",
    "not_reached": "dim",
    "critical": "bold red",
    "warning": "yellow",
    "info": "dim",
}
"""Styles of the words states and severities are written with (colour on a terminal only)."""

_consoles: dict[str, Console] = {}
_no_color: list[bool] = [False]


def use(*, no_color: bool = False) -> None:
    """Start a command: its consoles are made on first use, on the stdout and stderr it
    has then; `no_color` (`--no-color`) turns colour off as NO_COLOR does."""
    _consoles.clear()
    _no_color[0] = no_color


def out() -> Console:
    """The command's console on stdout."""
    return _on("out", sys.stdout)


def err() -> Console:
    """The command's console on stderr (progress, warnings)."""
    return _on("err", sys.stderr)


def _on(name: str, file: IO[str]) -> Console:
    console = _consoles.get(name)
    if console is None or console.file is not file:  # a test swapped sys.stdout meanwhile
        console = _consoles[name] = _console(file, _no_color[0])
    return console


def _console(file: IO[str], no_color: bool) -> Console:
    console = Console(
        file=file,
        no_color=True if no_color else None,
        highlight=False,
        markup=False,
        emoji=False,
        soft_wrap=False,
    )
    width = width_of(console)
    console.width = width or 100_000  # a pipe: lines as long as they are
    return console


def width_of(console: Console) -> int | None:
    """The width output on `console` must fit: COLUMNS, else the terminal's; None for a
    pipe (or a file) with no COLUMNS, where lines are as long as they are."""
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) > 0:
        return int(columns)
    isatty = getattr(console.file, "isatty", None)
    try:
        if isatty is not None and isatty():
            return os.get_terminal_size(console.file.fileno()).columns
    except (OSError, ValueError):
        pass
    return 80 if console.is_terminal else None  # FORCE_COLOR into a pipe: a terminal's 80


def _bounded(console: Console) -> bool:
    return console.width < 100_000


def styled(word: str, style: str | None = None) -> Text:
    """`word` in `style`, or in the style of the state or severity it names."""
    return Text(word, style=style or STATE_STYLES.get(word, ""))


def table(rows: Sequence[Sequence[Cell]], *, console: Console | None = None) -> RenderableType:
    """A table of `rows` (the first is the header) that fits `console`'s width."""
    console = console or out()
    header, *body = [[c if isinstance(c, Text) else Text(c) for c in row] for row in rows]
    width = console.width if _bounded(console) else None
    widths = _widths([header, *body], width)
    if widths is None:
        return _blocks(header, body)
    grid = Table(
        box=None,
        padding=(0, GAP, 0, 0),
        pad_edge=False,
        show_edge=False,
        expand=False,
        header_style="bold",
        collapse_padding=True,
    )
    for index, (title, size) in enumerate(zip(header, widths, strict=True)):
        grid.add_column(
            title,
            width=size,
            no_wrap=width is None,
            overflow="fold",
            style="bold" if index == 0 else None,
        )
    for row in body:
        grid.add_row(*row)
    return grid


def show(rows: Sequence[Sequence[Cell]], *, title: str | None = None) -> int:
    """Print a table of `rows` (and a line above it) on the command's stdout: 0."""
    console = out()
    parts: list[RenderableType] = [Text(title)] if title else []
    parts.append(table(rows, console=console))
    _print(console, Group(*parts))
    return 0


def render(renderable: RenderableType, console: Console | None = None) -> str:
    """What `renderable` prints on `console` (stdout's), without its last newline: with
    colour codes on a terminal; without trailing spaces otherwise."""
    console = console or out()
    with console.capture() as captured:
        console.print(renderable)
    text = captured.get()
    if console.is_terminal and not console.no_color:
        return text.removesuffix("\n")
    return "\n".join(line.rstrip() for line in text.splitlines())


def _print(console: Console, renderable: RenderableType) -> None:
    console.file.write(render(renderable, console) + "\n")
    console.file.flush()


def _widths(rows: list[list[Text]], width: int | None) -> list[int] | None:
    """Each column's width: as wide as its widest cell; to fit `width`, the others
    narrow (wrapping at spaces, never below their longest word) until the last has
    READABLE. None: even then the last column would have less than NARROWEST."""
    columns = list(zip(*rows, strict=True))
    natural: list[int] = [max(int(cell.cell_len) for cell in column) for column in columns]
    if width is None:
        return natural
    words = [max(_longest_word(cell.plain) for cell in column) for column in columns]
    sizes = natural[:-1]
    room = width - GAP * (len(columns) - 1)

    def left() -> int:
        return room - sum(sizes)

    want = min(natural[-1], max(READABLE, width // 3))
    while sizes and left() < want:
        widest = max(range(len(sizes)), key=lambda i: sizes[i] - words[i])
        if sizes[widest] <= words[widest]:
            break
        sizes[widest] -= 1
    if left() < min(natural[-1], NARROWEST):
        return None
    return [*sizes, min(natural[-1], left())]


def _longest_word(text: str) -> int:
    """In cells: a CJK character is two; a title in Chinese has no spaces to wrap at."""
    return max((cell_len(word) for word in re.split(r"\s+", text)), default=0)


def _blocks(header: list[Text], body: list[list[Text]]) -> RenderableType:
    """Each row as lines: its first cell, then `header  value` for the others."""
    parts: list[RenderableType] = []
    names = [Text(cell.plain.lower(), style="dim") for cell in header[1:]]
    label = max((name.cell_len for name in names), default=0)  # one width in every block
    for row in body:
        fields = Table.grid(padding=(0, 2, 0, 0))
        fields.add_column(no_wrap=True, min_width=label)
        fields.add_column(overflow="fold")
        for name, cell in zip(names, row[1:], strict=True):
            if cell.plain not in ("", "-"):
                fields.add_row(name, cell)
        first = row[0].copy()
        first.stylize("bold")
        parts.append(Group(first, Padding(fields, (0, 0, 0, 2))))
    return Group(*parts)


class ActionProgress:
    """Draws what a long action reports while it runs: `line` gets its plain lines,
    `reading` its readings (`bot.actions.Reading`). On a terminal, a live bar of pods left
    under the lines of what it waits on, and the BMC's power states so far; off one, a
    line per change. All on stderr: stdout keeps the result alone."""

    def __init__(self, title: str, console: Console | None = None) -> None:
        self.title = title
        self.console = console or err()
        self.live = self.console.is_terminal and not self.console.is_dumb_terminal
        self.states: list[str] = []
        self._bar: Progress | None = None
        self._task: TaskID | None = None
        self._waiting = ""

    @contextmanager
    def running(self) -> Iterator[ActionProgress]:
        try:
            yield self
        finally:
            if self._bar is not None:
                assert self._task is not None
                if self._bar.tasks[0].total is None:  # a status line: its spinner stops
                    self._bar.update(self._task, total=1, completed=1)
                self._bar.stop()

    def line(self, message: str) -> None:
        self._say(Text(f"... {message}"))

    def reading(self, reading: Reading) -> None:
        if reading.state is not None:
            self._state(reading)
        elif reading.total is not None and reading.done is not None:
            self._count(reading)
        else:
            self.line(reading.text)

    def _state(self, reading: Reading) -> None:
        assert reading.state is not None
        self.states.append(reading.state)
        states = " → ".join(self.states)
        if not self.live:
            self._say(Text(f"... {reading.text} ({states})"))
            return
        if self._bar is None:  # a status line: spinner, what, the states so far
            self._start(TextColumn("{task.fields[shown]}", style="cyan"), total=None, shown="")
        self._update(shown=f"BMC: {states}")

    def _count(self, reading: Reading) -> None:
        assert reading.total is not None and reading.done is not None
        left = f"{reading.left} {reading.unit} left" if reading.unit else f"{reading.left} left"
        if not self.live:
            self._say(Text(f"... {left}: {reading.text}"))
            return
        if self._bar is None:
            self._start(
                BarColumn(bar_width=24),
                MofNCompleteColumn(),
                TextColumn("{task.fields[shown]}", style="bold"),
                total=reading.total,
                shown="",
            )
        self._update(completed=reading.done, total=reading.total, shown=left)
        waiting = reading.text.partition(", ")[2]  # "waiting on ml/shard-0: PDB ..."
        if waiting and waiting != self._waiting:
            self._say(Text(f"... {waiting}", style="dim"))
        self._waiting = waiting

    def _start(self, *columns: ProgressColumn, total: float | None, shown: str) -> None:
        self._bar = Progress(
            SpinnerColumn(),
            TextColumn("{task.description}"),
            *columns,
            console=self.console,
            transient=False,
        )
        self._task = self._bar.add_task(self.title, total=total, shown=shown)
        self._bar.start()

    def _update(self, **fields: Any) -> None:
        assert self._bar is not None and self._task is not None
        self._bar.update(self._task, **fields)

    def _say(self, text: Text) -> None:
        if self._bar is not None:
            self._bar.console.print(text)
        else:
            _print(self.console, text)

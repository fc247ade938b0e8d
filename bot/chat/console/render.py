"""Jinja2 for the console: templates and static files inside the package, autoescaped;
the postmortem's Markdown rendered with raw HTML off, so alert text stays text."""

from __future__ import annotations

from datetime import UTC, datetime
from importlib import resources
from typing import Any

from jinja2 import Environment, PackageLoader, select_autoescape
from markdown_it import MarkdownIt
from markupsafe import Markup

from bot.chat import wording
from bot.chat.wording import elapsed, scope_line

STATIC = {"console.js": "text/javascript", "console.css": "text/css"}
"""The static files served at `/static/NAME`, with their media types."""

_env = Environment(
    loader=PackageLoader("bot.chat.console", "templates"),
    autoescape=select_autoescape(default=True, default_for_string=True),
    trim_blocks=True,
    lstrip_blocks=True,
)
_markdown = MarkdownIt("commonmark", {"html": False}).enable("table")


def clock_time(at: datetime | None) -> str:
    """`22:05:30` (UTC), as the timeline shows a log line's time."""
    return "" if at is None else at.astimezone(UTC).strftime("%H:%M:%S")


def _stamp(at: datetime | None) -> str:
    return "" if at is None else at.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")


def _ago(at: datetime | None, now: datetime) -> str:
    return "" if at is None else elapsed(now - at)


_env.filters["time"] = clock_time
_env.filters["stamp"] = _stamp
_env.globals["ago"] = _ago
_env.globals["scope_line"] = scope_line
_env.globals["status_line"] = wording.status_line
_env.globals["step_state"] = wording.step_state
_env.globals["waiting_for_second"] = wording.waiting_for_second
_env.globals["folded_line"] = wording.folded_line
_env.globals["grid"] = wording.grid


def page(name: str, **context: Any) -> str:
    return _env.get_template(name).render(**context)


def markdown(text: str) -> Markup:
    """Markdown to HTML; raw HTML in the text is escaped, not passed through."""
    return Markup(_markdown.render(text))  # noqa: S704 - markdown-it escapes (html off)


def static(name: str) -> bytes | None:
    """A static file's bytes; None when it is not one of STATIC."""
    if name not in STATIC:
        return None
    return (resources.files("bot.chat.console") / "static" / name).read_bytes()

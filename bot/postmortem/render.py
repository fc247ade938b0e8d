"""Word a `Draft` in Markdown with the Jinja2 templates `5why.<lang>.md.j2`.

Templates come from the directory in `postmortem_templates` when it holds the file, else
from the ones shipped with the bot (`postmortem/` in the repository, `bot/_postmortem` in
the wheel). They render in Jinja2's sandbox: a template is configuration, not code.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

from jinja2 import FileSystemLoader, StrictUndefined, TemplateNotFound
from jinja2.sandbox import SandboxedEnvironment

from bot.clock import as_utc
from bot.errors import ConfigInvalid
from bot.postmortem import phrases
from bot.postmortem.draft import Draft
from bot.postmortem.phrases import FAULTS, Lang
from bot.postmortem.timeline import Moment

__all__ = ["FAULTS", "LANGS", "Lang", "render", "shipped"]

LANGS: tuple[Lang, ...] = ("zh", "en")
NBSP = "\u00a0"
"""Joins a row's date to its time, so a narrow table column never wraps between them."""


def shipped() -> Path:
    here = Path(__file__).resolve().parent.parent
    for candidate in (here / "_postmortem", here.parent / "postmortem"):
        if (candidate / "5why.en.md.j2").is_file():
            return candidate
    raise FileNotFoundError("postmortem templates not found next to the bot package")


def render(draft: Draft, lang: Lang, templates: Path | None = None) -> str:
    """The draft in `lang`; `templates` overrides the shipped ones file by file."""
    if lang not in LANGS:
        raise ConfigInvalid(f"no postmortem language {lang!r}; use zh or en")
    search = [str(templates)] if templates is not None else []
    env = SandboxedEnvironment(
        loader=FileSystemLoader([*search, str(shipped())]),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        autoescape=False,
    )
    env.filters["hm"] = _hm
    env.filters["hms"] = _hms
    env.filters["ymd"] = lambda at: as_utc(at).strftime("%Y-%m-%d") if at else "-"
    env.filters["ymdhm"] = _ymdhm
    env.filters["ymdhms"] = _ymdhms
    env.filters["stamp"] = _stamp
    env.filters["md"] = _md
    env.filters["cell"] = _cell
    env.filters["what"] = lambda moment: phrases.row(moment, lang)
    env.filters["history"] = lambda item: _history(item, lang)
    env.globals["skipped"] = phrases.skipped(draft.skipped, lang)
    name = f"5why.{lang}.md.j2"
    try:
        template = env.get_template(name)
    except TemplateNotFound:
        raise ConfigInvalid(f"postmortem template {name} not found in {templates}") from None
    return template.render(d=draft, fault=FAULTS[lang], lang=lang)


def _hm(at: datetime | None) -> str:
    return as_utc(at).strftime("%H:%M") if at is not None else "-"


def _hms(at: datetime | None) -> str:
    return as_utc(at).strftime("%H:%M:%S") if at is not None else "-"


def _ymdhm(at: datetime | None) -> str:
    return as_utc(at).strftime("%Y-%m-%d %H:%M") if at is not None else "-"


def _ymdhms(at: datetime | None) -> str:
    return as_utc(at).strftime("%Y-%m-%d %H:%M:%S") if at is not None else "-"


def _stamp(moment: Moment) -> str:
    """A timeline row's time: HH:MM:SS, with the date in front when the day changed."""
    at = as_utc(moment.at)
    return f"{at:%Y-%m-%d}{NBSP}{at:%H:%M:%S}" if moment.new_day else f"{at:%H:%M:%S}"


def _history(item: dict[str, Any], lang: Lang) -> str:
    return phrases.history(item.get("result") or {}, lang, str(item.get("window") or ""))


def _cell(text: object) -> str:
    """One Markdown table cell: one line, no HTML, `|` escaped."""
    return _md(text).replace("|", "\\|")


def _md(text: object) -> str:
    """One line of text safe inside a Markdown list item: no line breaks, no HTML. Only `<`
    opens a tag, so only it is escaped: `ECC growth > 10 a week` stays readable."""
    return " ".join(str(text).split()).replace("<", "&lt;")

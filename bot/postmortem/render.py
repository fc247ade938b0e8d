"""Word a `Draft` in Markdown with the Jinja2 templates `5why.<lang>.md.j2`.

Templates come from the directory in `postmortem_templates` when it holds the file, else
from the ones shipped with the bot (`postmortem/` in the repository, `bot/_postmortem` in
the wheel). They render in Jinja2's sandbox: a template is configuration, not code.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Literal

from jinja2 import FileSystemLoader, StrictUndefined, TemplateNotFound
from jinja2.sandbox import SandboxedEnvironment

from bot.clock import as_utc
from bot.errors import ConfigInvalid
from bot.postmortem.draft import Draft

Lang = Literal["zh", "en"]
LANGS: tuple[Lang, ...] = ("zh", "en")
FAULTS = {
    "zh": {
        "fallen_off_bus": "GPU 掉出总线",
        "drain_and_reset": "硬件故障，需迁移任务并重置 GPU",
        "reset_gpu": "需重置 GPU",
        "nvlink": "NVLink 故障",
        "fabric_manager": "Fabric Manager 故障",
        "application": "应用层错误",
        "informational": "提示性事件",
        "unknown": "未知 XID",
    },
    "en": {
        "fallen_off_bus": "fell off the bus",
        "drain_and_reset": "a hardware fault: drain and reset the GPU",
        "reset_gpu": "needs a GPU reset",
        "nvlink": "an NVLink fault",
        "fabric_manager": "a Fabric Manager fault",
        "application": "an application error",
        "informational": "informational",
        "unknown": "an unknown XID",
    },
}


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
    env.filters["ymdhm"] = _ymdhm
    env.filters["md"] = _md
    name = f"5why.{lang}.md.j2"
    try:
        template = env.get_template(name)
    except TemplateNotFound:
        raise ConfigInvalid(f"postmortem template {name} not found in {templates}") from None
    return template.render(d=draft, fault=FAULTS[lang], lang=lang)


def _hm(at: datetime | None) -> str:
    return as_utc(at).strftime("%H:%M") if at is not None else "-"


def _ymdhm(at: datetime | None) -> str:
    return as_utc(at).strftime("%Y-%m-%d %H:%M") if at is not None else "-"


def _md(text: object) -> str:
    """One line of text safe inside a Markdown list item: no line breaks, no HTML. Only `<`
    opens a tag, so only it is escaped: `ECC growth > 10 a week` stays readable."""
    return " ".join(str(text).split()).replace("<", "&lt;")

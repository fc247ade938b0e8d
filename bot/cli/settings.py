"""`runbook-bot config`: the settings in effect, each with where it came from (the default,
the file and line, the environment variable), secrets masked; `--reference` prints every
setting with its variable, key, default and meaning (docs/configuration.md)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from bot.cli import common
from bot.config import Settings, Sources, reference_markdown
from bot.config_sources import Loc, masked

VALUE_WIDTH = 30
"""Most values fit (durations, names, paths); the column is no wider, so lines stay short."""


def add_commands(commands: Any) -> None:
    config = commands.add_parser(
        "config",
        help="the effective settings and where each came from; --reference: every setting",
        description="Print each setting in effect: its value and where it came from "
        "(default; file FILE:LINE; env VARIABLE). Tokens, passwords, keys, signing secrets "
        "and password hashes show as ********, URLs without their password and query. "
        "--reference prints every setting with its environment variable, YAML key, default "
        "and meaning, as docs/configuration.md holds it.",
    )
    shown = config.add_mutually_exclusive_group()
    shown.add_argument("-o", "--output", choices=["table", "json"], default="table")
    shown.add_argument(
        "--reference",
        action="store_true",
        help="every setting's variable, key, default and meaning (Markdown)",
    )
    config.set_defaults(handler=show_settings)


def show_settings(args: argparse.Namespace, settings: Settings) -> int:
    if args.reference:
        return common.say(reference_markdown())
    sources = Sources.read(Settings, args.config)
    rows = [
        {"setting": _dotted(loc), "value": value, **_origin(sources, loc)}
        for loc, value in effective(settings)
    ]
    if args.output == "json":
        return common.say(json.dumps(rows, indent=2, ensure_ascii=False))
    table = [("SETTING", "VALUE", "SOURCE")]
    for row in rows:
        source = row["source"] if row["where"] is None else f"{row['source']} {row['where']}"
        table.append((row["setting"], _text(row["value"]), source))
    return common.say("\n".join(_aligned(table)))


def _aligned(table: list[tuple[str, str, str]]) -> list[str]:
    """Columns lined up, the value column at most VALUE_WIDTH wide: a longer value (a
    URL) pushes only its own line's source further right."""
    names = max(len(name) for name, _, _ in table)
    values = min(VALUE_WIDTH, max(len(value) for _, value, _ in table))
    return [f"{name:<{names}}   {value:<{values}}   {source}" for name, value, source in table]


def effective(settings: Settings) -> list[tuple[Loc, Any]]:
    """Every setting's value as JSON data, secrets masked: one entry per scalar, per list
    of scalars, and per empty mapping, by location (`("console", "session_ttl")`)."""
    found: list[tuple[Loc, Any]] = []
    _leaves(settings.model_dump(mode="json"), (), found)
    return found


def _leaves(value: Any, loc: Loc, found: list[tuple[Loc, Any]]) -> None:
    if isinstance(value, dict) and value:
        for key, item in value.items():
            _leaves(item, (*loc, key), found)
    elif isinstance(value, list) and any(isinstance(item, dict | list) for item in value):
        for index, item in enumerate(value):
            _leaves(item, (*loc, index), found)
    else:
        found.append((loc, masked(loc, value)))


def _origin(sources: Sources, loc: Loc) -> dict[str, Any]:
    origin = sources.origin(loc)
    return {"source": origin.kind, "where": origin.where}


def _dotted(loc: Loc) -> str:
    return ".".join(str(part) for part in loc)


def _text(value: Any) -> str:
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return "[" + ", ".join(_text(item) for item in value) + "]"
    if isinstance(value, dict):
        return "{}"
    return str(value)

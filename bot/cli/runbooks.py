"""Commands on runbook files: `validate` them (in CI too) and print the `schema` editors use."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from bot.cli import common
from bot.config import Settings
from bot.runbooks import schema, validate


def validate_runbooks(args: argparse.Namespace, settings: Settings) -> int:
    paths = [Path(p) for p in args.paths] or [settings.runbooks_dir]
    missing = [path for path in paths if not path.exists()]
    if missing:
        for path in missing:
            print(f"runbook-bot: no such file or directory: {path}", file=sys.stderr)
        return 2
    checked = validate.check_paths(paths)
    for problem in checked.problems:
        print(problem)
    errors, warnings = checked.errors, checked.warnings
    if errors:
        files = len({p.file for p in errors})
        return _fail(f"{_count(len(errors), 'problem')} in {_count(files, 'file')}")
    summary = f"{_count(len(checked.runbooks), 'runbook')} valid"
    if warnings:
        summary += f" ({_count(len(warnings), 'warning')})"
    return common.say(summary)


def _fail(summary: str) -> int:
    print(summary)
    return 1


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}{'' if number == 1 else 's'}"


def print_schema(_args: argparse.Namespace, _settings: Settings) -> int:
    return common.say(json.dumps(schema.json_schema(), indent=2, ensure_ascii=False))

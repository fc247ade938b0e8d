"""Commands on runbook files: `validate` them (in CI too) and print the `schema` editors use."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from bot.cli import common
from bot.config import Settings
from bot.runbooks import schema, validate


def add_commands(commands: Any) -> None:
    """Register `validate` and `schema` on the top-level subparsers."""
    check = commands.add_parser(
        "validate",
        help="check runbook files",
        description="Check runbook YAML files and directories (default: the runbooks_dir "
        "setting): YAML syntax (with the line to fix), the schema, actions and their "
        "parameters, approvals against risk, templates and what they refer to (a label the "
        "runbook's match does not require is a warning), and ids and matches across files. "
        "Prints each problem as FILE:LINE:COLUMN WHERE: MESSAGE. Exits 0 when valid "
        "(warnings allowed unless --strict), 1 on any error (or warning with --strict), 2 "
        "when a path does not exist.",
    )
    check.add_argument("paths", metavar="PATH", nargs="*", help="runbook file or directory")
    check.add_argument(
        "--strict", action="store_true", help="warnings fail too (exit 1), e.g. in CI"
    )
    check.set_defaults(handler=validate_runbooks)

    printing = commands.add_parser(
        "schema",
        help="print the runbook JSON Schema",
        description="Print the JSON Schema of a runbook file, for editors "
        "(yaml-language-server) and CI; docs/runbook.schema.json is this output.",
    )
    printing.set_defaults(handler=print_schema)


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
    if warnings and args.strict:
        return _fail(f"{_count(len(warnings), 'warning')} (--strict: warnings fail)")
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

"""The `runbook-bot` command: serve, migrate, look at and move incidents, see the failure
domains and their incidents, verify logs, validate runbooks, decide on and run their
steps, silence paging, see and take on-call, check the workers; run the demo, rehearse
with drills, hash console passwords, show the settings.

Each command is defined by the module `COMMANDS` names, and only the module of the
command being run is imported: `runbook-bot --help` loads no database, cluster, chat or
web library, and `runbook-bot config` no Kubernetes client. The other commands appear in
the parser as names with their one-line help.

Exit codes: 0 done; 1 the operation failed or was refused (the message says why);
2 bad usage or invalid settings.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from bot import __version__
from bot.errors import BotError, ConfigInvalid, PersonUnknown

if TYPE_CHECKING:
    from bot.config import Settings

    Handler = Callable[[argparse.Namespace, Settings], int]

__all__ = ["COMMANDS", "Command", "main", "parser"]


class Command(NamedTuple):
    """Where a top-level command is defined (`module:function` adding it to the
    subparsers) and its line in `runbook-bot --help`."""

    defined_by: str
    summary: str


_SERVING = "bot.cli.serving:add_commands"
_INCIDENTS = "bot.cli.incidents:add_commands"
_ACTIONS = "bot.cli.actions:add_commands"
_RUNBOOKS = "bot.cli.runbooks:add_commands"
_STEPS = "bot.cli.steps:add_commands"
_ESCALATION = "bot.cli.escalation:add_commands"
_POSTMORTEM = "bot.cli.postmortem:add_commands"

COMMANDS: dict[str, Command] = {
    "serve": Command(_SERVING, "run the webhook receiver and API"),
    "db": Command(_SERVING, "database schema"),
    "sim": Command(_SERVING, "run the simulated GPU cluster (a Kubernetes API on loopback)"),
    "incidents": Command(_INCIDENTS, "list, show, acknowledge, silence and resolve incidents"),
    "log": Command(_INCIDENTS, "the incident log"),
    "actions": Command(_ACTIONS, "list the actions runbooks can run"),
    "action": Command(_ACTIONS, "run one action directly, like kubectl"),
    "validate": Command(_RUNBOOKS, "check runbook files"),
    "schema": Command(_RUNBOOKS, "print the runbook JSON Schema"),
    "topology": Command(
        "bot.cli.topology:add_commands",
        "the failure-domain tree: node counts and incidents per domain",
    ),
    "steps": Command(_STEPS, "an incident's runbook steps and their approvals"),
    "approve": Command(_STEPS, "approve a step (you need a role in the roles setting)"),
    "skip": Command(_STEPS, "skip a step that waits for a person"),
    "done": Command(_STEPS, "mark a manual step done"),
    "cancel": Command(_STEPS, "cancel a step that has not started, stopping the runbook"),
    "stop": Command(_STEPS, "stop the rest of a running step over many nodes"),
    "repropose": Command(
        _STEPS, "propose again a skipped, failed, timed-out, expired or cancelled step"
    ),
    "worker": Command(_STEPS, "run approved steps (a separate worker process)"),
    "oncall": Command(_ESCALATION, "who is on call now and next; `oncall set` takes the pager"),
    "workers": Command(_ESCALATION, "worker heartbeats and how late the escalation timers are"),
    "followup": Command(_POSTMORTEM, "the improvements a postmortem commits to (owner, deadline)"),
    "postmortem": Command(_POSTMORTEM, "the postmortem: draft, final, versions, export"),
    "demo": Command(
        "bot.cli.demo:add_command",
        "run the bot against a simulated GPU cluster, with a console and scenarios",
    ),
    "drill": Command(
        "bot.cli.drill:add_command",
        "rehearse an emergency against a running bot, in dry-run mode",
    ),
    "console": Command("bot.cli.passwords:add_commands", "the web console's users"),
    "tokens": Command("bot.cli.tokens:add_commands", "personal API tokens: create, list, revoke"),
    "config": Command(
        "bot.cli.settings:add_commands",
        "the effective settings and where each came from; --reference: every setting",
    ),
}
"""Every top-level command, in the order `--help` lists them. A module defining several
adds them all, in this order, where its first one stands."""


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    top = parser(_command_in(argv))
    args = top.parse_args(argv)
    if not hasattr(args, "handler"):
        top.print_help()
        return 2
    try:
        from bot.cli import common
        from bot.config import load_settings

        settings = load_settings(args.config)
        common.configure_logging(settings)
        handler: Handler = args.handler
        return handler(args, settings)
    except (ConfigInvalid, PersonUnknown) as exc:
        print(f"runbook-bot: {exc}", file=sys.stderr)
        return 2
    except BotError as exc:
        print(f"runbook-bot: {exc}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        # `runbook-bot steps INC-1 | head`: the reader left; say nothing, like kubectl.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0


def parser(command: str | None = None) -> argparse.ArgumentParser:
    """The `runbook-bot` parser with `command` (and the others of its module) defined in
    full; every other command is its name and summary only."""
    top = argparse.ArgumentParser(
        prog="runbook-bot",
        description="Incident-response runbooks for GPU Kubernetes clusters, driven from chat.",
    )
    top.add_argument("--version", action="version", version=f"runbook-bot {__version__}")
    top.add_argument(
        "--config",
        metavar="FILE",
        help="YAML settings file (default: $RUNBOOK_BOT_CONFIG); environment variables "
        "RUNBOOK_BOT_* override it",
    )
    commands = top.add_subparsers(title="commands", metavar="COMMAND")
    chosen = COMMANDS[command].defined_by if command in COMMANDS else None
    for name, (definer, summary) in COMMANDS.items():
        if definer != chosen:
            commands.add_parser(name, help=summary, add_help=False)
        elif name == _first_of(definer):
            _load(definer)(commands)
    return top


def _first_of(definer: str) -> str:
    return next(name for name, command in COMMANDS.items() if command.defined_by == definer)


def _load(definer: str) -> Callable[[Any], None]:
    module, _, function = definer.partition(":")
    add: Callable[[Any], None] = getattr(importlib.import_module(module), function)
    return add


def _command_in(argv: Sequence[str]) -> str | None:
    """The command `argv` runs: its first word that is not an option or `--config`'s value
    (which argparse lets one abbreviate: `--conf FILE`)."""
    words = iter(argv)
    for word in words:
        if word == "--":
            return next(words, None)
        if len(word) > 2 and "--config".startswith(word):
            next(words, None)
        elif not word.startswith("-"):
            return word
    return None

"""The `runbook-bot` command: serve, migrate, look at and move incidents, verify logs,
validate runbooks, decide on and run their steps, silence paging, see and take on-call,
check the workers; run the demo, rehearse with drills, hash console passwords.

Exit codes: 0 done; 1 the operation failed or was refused (the message says why);
2 bad usage or invalid settings.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence

from bot import __version__
from bot.cli import actions as action_commands
from bot.cli import common
from bot.cli import demo as demo_commands
from bot.cli import drill as drill_commands
from bot.cli import escalation as escalation_commands
from bot.cli import incidents as incident_commands
from bot.cli import passwords as password_commands
from bot.cli import postmortem as postmortem_commands
from bot.cli import runbooks as runbook_commands
from bot.cli import server as server_commands
from bot.cli import steps as step_commands
from bot.config import Settings, load_settings, reference_markdown
from bot.errors import BotError, ConfigInvalid

Handler = Callable[[argparse.Namespace, Settings], int]


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if not hasattr(args, "handler"):
        parser.print_help()
        return 2
    try:
        settings = load_settings(args.config)
        common.configure_logging(settings)
        code: int = args.handler(args, settings)
        return code
    except ConfigInvalid as exc:
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


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="runbook-bot",
        description="Incident-response runbooks for GPU Kubernetes clusters, driven from chat.",
    )
    parser.add_argument("--version", action="version", version=f"runbook-bot {__version__}")
    parser.add_argument(
        "--config",
        metavar="FILE",
        help="YAML settings file (default: $RUNBOOK_BOT_CONFIG); environment variables "
        "RUNBOOK_BOT_* override it",
    )
    commands = parser.add_subparsers(title="commands", metavar="COMMAND")

    serve = commands.add_parser(
        "serve",
        help="run the webhook receiver and API",
        description="Serve POST /webhooks/alertmanager, the read API, /healthz, /readyz and "
        "/metrics. On SQLite the schema is upgraded first; on PostgreSQL serve refuses to "
        "start with pending migrations (run `runbook-bot db upgrade`).",
    )
    serve.add_argument("--host", help="bind address (default: listen_host setting)")
    serve.add_argument("--port", type=int, help="port (default: listen_port setting)")
    serve.set_defaults(handler=server_commands.serve)

    db = commands.add_parser("db", help="database schema", description="Database schema.")
    db_commands = db.add_subparsers(title="commands", metavar="COMMAND", required=True)
    upgrade = db_commands.add_parser(
        "upgrade", help="apply pending migrations", description="Apply pending migrations."
    )
    upgrade.set_defaults(handler=server_commands.db_upgrade)
    current = db_commands.add_parser(
        "current",
        help="show the schema revision",
        description="Show the database's schema revision and the one this version needs.",
    )
    current.set_defaults(handler=server_commands.db_current)

    incidents = commands.add_parser(
        "incidents",
        help="list, show, acknowledge, silence and resolve incidents",
        description="List, show, acknowledge, silence, resolve, reopen and close incidents.",
    )
    inc = incidents.add_subparsers(title="commands", metavar="COMMAND", required=True)
    lst = inc.add_parser(
        "list", help="list incidents, newest first", description="List incidents, newest first."
    )
    lst.add_argument(
        "--status",
        action="append",
        default=[],
        help="open, acknowledged, resolved, closed (repeatable or comma list)",
    )
    lst.add_argument(
        "--severity",
        action="append",
        default=[],
        help="critical, warning, info (repeatable or comma list)",
    )
    lst.add_argument("--limit", type=int, default=50)
    lst.add_argument("-o", "--output", choices=["table", "json"], default="table")
    lst.set_defaults(handler=incident_commands.list_incidents)

    show = inc.add_parser(
        "show",
        help="one incident with its alerts and log",
        description="Show one incident with its alerts and log.",
    )
    show.add_argument("incident", metavar="INC-N")
    show.add_argument("-o", "--output", choices=["text", "json"], default="text")
    show.set_defaults(handler=incident_commands.show)

    for name, helptext, handler in (
        (
            "ack",
            "acknowledge: you are on it (you become owner if there is none)",
            incident_commands.ack,
        ),
        (
            "resolve",
            "resolve with a disposition (required for critical incidents)",
            incident_commands.resolve,
        ),
        ("reopen", "reopen a resolved incident", incident_commands.reopen),
        ("close", "close a resolved incident (after its postmortem)", incident_commands.close),
    ):
        cmd = inc.add_parser(name, help=helptext, description=helptext[0].upper() + helptext[1:])
        cmd.add_argument("incident", metavar="INC-N")
        cmd.add_argument(
            "--as",
            dest="actor",
            required=True,
            metavar="USER",
            help="who is doing this (recorded in the incident log)",
        )
        cmd.add_argument("--note", help="what was done / why (the disposition for resolve)")
        if name == "resolve":
            cmd.add_argument("--owner", help="owner of the incident (default: you)")
        cmd.set_defaults(handler=handler)
    escalation_commands.add_silence(inc)

    log_cmd = commands.add_parser(
        "log", help="the incident log", description="The append-only incident log."
    )
    log_commands = log_cmd.add_subparsers(title="commands", metavar="COMMAND", required=True)
    verify = log_commands.add_parser(
        "verify",
        help="check the hash chain of one or every incident",
        description="Recompute every entry's hash and its link to the previous one. Exits 1 "
        "and names the first entry that does not verify.",
    )
    verify.add_argument("incident", metavar="INC-N", nargs="?")
    verify.set_defaults(handler=incident_commands.log_verify)

    actions = commands.add_parser(
        "actions",
        help="list the actions runbooks can run",
        description="List every registered action with its risk; with NAME, its parameters.",
    )
    actions.add_argument("name", metavar="NAME", nargs="?")
    actions.set_defaults(handler=action_commands.list_actions)

    run_action = commands.add_parser(
        "action",
        help="run one action directly, like kubectl",
        description="Run one action with your own credentials (KUBECONFIG, settings). "
        "Parameters are key=value; a value starting with [ or { is JSON. With --incident "
        "the run is recorded in that incident's log.",
    )
    run_action.add_argument("name", metavar="NAME")
    run_action.add_argument("params", metavar="KEY=VALUE", nargs="*")
    run_action.add_argument("--dry-run", action="store_true", help="server-side dry run")
    run_action.add_argument("--json", action="store_true", help="print the result as JSON")
    run_action.add_argument("--incident", metavar="INC-N", help="record the run in this log")
    run_action.add_argument(
        "--as", dest="actor", metavar="USER", help="who runs it (default: your login name)"
    )
    run_action.add_argument(
        "--override-breaker",
        action="store_true",
        help="admin override of the circuit breaker (recorded in the log)",
    )
    run_action.set_defaults(handler=action_commands.run_action)

    validate = commands.add_parser(
        "validate",
        help="check runbook files",
        description="Check runbook YAML files and directories (default: the runbooks_dir "
        "setting): the schema, actions and their parameters, approvals against risk, "
        "templates and what they refer to, and ids and matches across files. Prints each "
        "problem as FILE:LINE:COLUMN WHERE: MESSAGE. Exits 0 when valid (warnings allowed), "
        "1 on any error, 2 when a path does not exist.",
    )
    validate.add_argument("paths", metavar="PATH", nargs="*", help="runbook file or directory")
    validate.set_defaults(handler=runbook_commands.validate_runbooks)

    schema = commands.add_parser(
        "schema",
        help="print the runbook JSON Schema",
        description="Print the JSON Schema of a runbook file, for editors "
        "(yaml-language-server) and CI; docs/runbook.schema.json is this output.",
    )
    schema.set_defaults(handler=runbook_commands.print_schema)

    step_commands.add_commands(commands)
    escalation_commands.add_commands(commands)
    postmortem_commands.add_commands(commands)

    demo_commands.add_command(commands)
    drill_commands.add_command(commands)
    password_commands.add_commands(commands)

    sim = commands.add_parser(
        "sim",
        help="run the simulated GPU cluster (a Kubernetes API on loopback)",
        description="Serve a simulated Kubernetes API seeded from a scenario: GPU nodes, "
        "training jobs under PodDisruptionBudgets, DaemonSets, a static and a bare pod. "
        "kubectl and the bot's actions work against it. Each node's BMC answers Redfish on "
        "a second port. Writes a kubeconfig, and a settings file for `runbook-bot --config`.",
    )
    sim.add_argument(
        "--scenario",
        metavar="FILE",
        help="scenario YAML (default: the packaged gpu-cluster scenario)",
    )
    sim.add_argument("--port", type=int, default=6443, help="port on 127.0.0.1 (default 6443)")
    sim.add_argument(
        "--kubeconfig",
        default="runbook-bot-sim.kubeconfig",
        metavar="PATH",
        help="where to write the kubeconfig (default ./runbook-bot-sim.kubeconfig)",
    )
    sim.add_argument(
        "--bmc-port",
        type=int,
        default=6624,
        help="port of the simulated Redfish BMCs on 127.0.0.1 (default 6624)",
    )
    sim.add_argument("--no-bmcs", action="store_true", help="serve no BMCs")
    sim.add_argument(
        "--settings",
        metavar="PATH",
        help="where to write the settings file (default: next to the kubeconfig, *.settings.yaml)",
    )
    sim.add_argument(
        "--time-scale",
        type=float,
        default=1.0,
        help="multiply grace periods and start-up delays (0.1 = ten times faster)",
    )
    sim.set_defaults(handler=server_commands.sim)

    config = commands.add_parser(
        "config",
        help="print the settings reference",
        description="Print every setting with its environment variable, YAML key and default.",
    )
    config.set_defaults(handler=lambda _a, _s: common.say(reference_markdown()))
    return parser

"""The arguments of the commands that run or set up the service: `serve`, `db upgrade`,
`db current` and `sim`. `bot.cli.server` runs them."""

from __future__ import annotations

import argparse
from typing import Any

from bot.cli import server


def add_commands(commands: Any) -> None:
    """Register `serve`, `db` and `sim` on the top-level subparsers."""
    serve = commands.add_parser(
        "serve",
        help="run the webhook receiver and API",
        description="Serve POST /webhooks/alertmanager, the read API, /healthz, /readyz and "
        "/metrics. On SQLite the schema is upgraded first; on PostgreSQL serve refuses to "
        "start with pending migrations (run `runbook-bot db upgrade`).",
    )
    serve.add_argument("--host", help="bind address (default: listen_host setting)")
    serve.add_argument("--port", type=int, help="port (default: listen_port setting)")
    serve.set_defaults(handler=server.serve)

    db = commands.add_parser("db", help="database schema", description="Database schema.")
    db_commands = db.add_subparsers(title="commands", metavar="COMMAND", required=True)
    upgrade = db_commands.add_parser(
        "upgrade", help="apply pending migrations", description="Apply pending migrations."
    )
    upgrade.set_defaults(handler=server.db_upgrade)
    current = db_commands.add_parser(
        "current",
        help="show the schema revision",
        description="Show the database's schema revision and the one this version needs.",
    )
    current.set_defaults(handler=server.db_current)

    sim = commands.add_parser(
        "sim",
        help="run the simulated GPU cluster (a Kubernetes API on loopback)",
        description="Serve a simulated Kubernetes API seeded from a scenario: GPU nodes, "
        "training jobs under PodDisruptionBudgets, DaemonSets, a static and a bare pod. "
        "kubectl and the bot's actions work against it. Each node's BMC answers Redfish on "
        "a second port. Writes a kubeconfig, and a settings file for `runbook-bot --config`.",
    )
    source = sim.add_mutually_exclusive_group()
    source.add_argument(
        "--scenario",
        metavar="FILE",
        help="scenario YAML (default: the packaged gpu-cluster scenario)",
    )
    source.add_argument(
        "--fleet",
        type=_fleet_size,
        metavar="NODES",
        help="a fleet of NODES GPU nodes in rows, racks, leaf switches and power feeds, "
        "with NFS servers (docs/topology.md); its settings file sets `topology`",
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
    sim.set_defaults(handler=server.sim)


def _fleet_size(text: str) -> int:
    if not (text.isascii() and text.isdigit()) or not 1 <= int(text) <= 5000:
        raise argparse.ArgumentTypeError(f"{text!r} is not a fleet size; give 1 to 5000 nodes")
    return int(text)

"""The `runbook-bot` command: serve, migrate, look at and move incidents, verify logs.

Exit codes: 0 done; 1 the operation failed or was refused (the message says why);
2 bad usage or invalid settings.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import Any

from bot import __version__, migrations
from bot.clock import SystemClock
from bot.config import Settings, load_settings, reference_markdown
from bot.db import Database
from bot.errors import BotError, ConfigInvalid
from bot.incidents import log, service, views
from bot.incidents.models import Incident

Handler = Callable[[argparse.Namespace, Settings], int]


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if not hasattr(args, "handler"):
        parser.print_help()
        return 2
    try:
        settings = load_settings(args.config)
        logging.basicConfig(
            level=settings.log_level.upper(),
            format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        )
        logging.getLogger("alembic").setLevel(logging.WARNING)
        code: int = args.handler(args, settings)
        return code
    except ConfigInvalid as exc:
        print(f"runbook-bot: {exc}", file=sys.stderr)
        return 2
    except BotError as exc:
        print(f"runbook-bot: {exc}", file=sys.stderr)
        return 1


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
    serve.set_defaults(handler=_serve)

    db = commands.add_parser("db", help="database schema", description="Database schema.")
    db_commands = db.add_subparsers(title="commands", metavar="COMMAND", required=True)
    upgrade = db_commands.add_parser(
        "upgrade", help="apply pending migrations", description="Apply pending migrations."
    )
    upgrade.set_defaults(handler=_db_upgrade)
    current = db_commands.add_parser(
        "current",
        help="show the schema revision",
        description="Show the database's schema revision and the one this version needs.",
    )
    current.set_defaults(handler=_db_current)

    incidents = commands.add_parser(
        "incidents",
        help="list, show, acknowledge and resolve incidents",
        description="List, show, acknowledge, resolve, reopen and close incidents.",
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
    lst.set_defaults(handler=_incidents_list)

    show = inc.add_parser(
        "show",
        help="one incident with its alerts and log",
        description="Show one incident with its alerts and log.",
    )
    show.add_argument("incident", metavar="INC-N")
    show.add_argument("-o", "--output", choices=["text", "json"], default="text")
    show.set_defaults(handler=_incidents_show)

    for name, helptext, handler in (
        ("ack", "acknowledge: you are on it (you become owner if there is none)", _ack),
        ("resolve", "resolve with a disposition (required for critical incidents)", _resolve),
        ("reopen", "reopen a resolved incident", _reopen),
        ("close", "close a resolved incident (after its postmortem)", _close),
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
    verify.set_defaults(handler=_log_verify)

    actions = commands.add_parser(
        "actions",
        help="list the actions runbooks can run",
        description="List every registered action with its risk; with NAME, its parameters.",
    )
    actions.add_argument("name", metavar="NAME", nargs="?")
    actions.set_defaults(handler=_actions)

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
    run_action.set_defaults(handler=_action)

    sim = commands.add_parser(
        "sim",
        help="run the simulated GPU cluster (a Kubernetes API on loopback)",
        description="Serve a simulated Kubernetes API seeded from a scenario: GPU nodes, "
        "training jobs under PodDisruptionBudgets, DaemonSets, a static and a bare pod. "
        "kubectl and the bot's actions work against it. Writes a kubeconfig for it.",
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
        "--time-scale",
        type=float,
        default=1.0,
        help="multiply grace periods and start-up delays (0.1 = ten times faster)",
    )
    sim.set_defaults(handler=_sim)

    config = commands.add_parser(
        "config",
        help="print the settings reference",
        description="Print every setting with its environment variable, YAML key and default.",
    )
    config.set_defaults(handler=lambda _a, _s: _print(reference_markdown()))
    return parser


def _print(text: str) -> int:
    print(text, end="" if text.endswith("\n") else "\n")
    return 0


@contextmanager
def _database(settings: Settings, *, migrated: bool = True) -> Iterator[Database]:
    """The database; with `migrated`, refuse one whose schema is behind (say what to run)."""
    db = Database(settings.database_url, connect_timeout=settings.database_connect_timeout)
    try:
        if migrated:
            migrations.check(db)
        yield db
    finally:
        db.dispose()


def _serve(args: argparse.Namespace, settings: Settings) -> int:
    import uvicorn

    from bot.web import build_app

    with _database(settings, migrated=False) as db:
        if settings.is_sqlite:
            migrations.upgrade(db)
        else:
            migrations.check(db)
        app = build_app(settings, db, SystemClock())
        host, port = args.host or settings.listen_host, args.port or settings.listen_port
        logging.getLogger(__name__).info(
            "listening on http://%s:%s (database %s)", host, port, db.describe()
        )
        uvicorn.run(app, host=host, port=port, log_level=settings.log_level, access_log=False)
    return 0


def _db_upgrade(_: argparse.Namespace, settings: Settings) -> int:
    with _database(settings, migrated=False) as db:
        before = migrations.current(db)
        migrations.upgrade(db)
        after = migrations.current(db)
    if before == after:
        return _print(f"database {db.describe()} is already at revision {after}")
    return _print(f"database {db.describe()} upgraded from {before or 'empty'} to {after}")


def _db_current(_: argparse.Namespace, settings: Settings) -> int:
    with _database(settings, migrated=False) as db:
        have, want = migrations.current(db), migrations.head()
    state = "up to date" if have == want else "behind: run `runbook-bot db upgrade`"
    return _print(f"database {db.describe()}: revision {have or 'none'}, needs {want} ({state})")


def _age(since: datetime) -> str:
    seconds = int((SystemClock().now() - since).total_seconds())
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{max(seconds, 0)}s"


def _table(rows: list[list[str]]) -> str:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    lines = []
    for row in rows:
        cells = [cell.ljust(width) for cell, width in zip(row, widths, strict=False)]
        lines.append("   ".join([*cells, row[-1]]))
    return "\n".join(lines)


def _incidents_list(args: argparse.Namespace, settings: Settings) -> int:
    with _database(settings) as db, db.session() as session:
        rows = service.list_incidents(
            session,
            status=_split(args.status),
            severity=_split(args.severity),
            limit=args.limit,
        )
        if args.output == "json":
            return _print(json.dumps([views.incident(r) for r in rows], indent=2))
    if not rows:
        return _print("No incidents found.")
    table = [["INCIDENT", "SEVERITY", "STATUS", "AGE", "OWNER", "TITLE"]]
    table += [
        [r.ref, r.severity, r.status, _age(r.opened_at), r.owner or "-", r.title] for r in rows
    ]
    return _print(_table(table))


def _incidents_show(args: argparse.Namespace, settings: Settings) -> int:
    number = service.parse_ref(args.incident)
    with _database(settings) as db, db.session() as session:
        incident = service.get(session, number)
        alerts = service.alerts_of(session, number)
        entries = log.entries(session, number)
        if args.output == "json":
            body: dict[str, Any] = views.incident(incident)
            body["alerts"] = [views.alert(a) for a in alerts]
            body["log"] = [views.log_entry(e) for e in entries]
            return _print(json.dumps(body, indent=2, ensure_ascii=False))
        lines = [
            f"{incident.ref}  {incident.title}",
            f"Severity:  {incident.severity}",
            f"Status:    {incident.status}",
            f"Owner:     {incident.owner or '-'}",
            f"Opened:    {incident.opened_at:%Y-%m-%d %H:%M:%S} UTC "
            f"({_age(incident.opened_at)} ago)",
            f"Group:     {incident.group_key}",
        ]
        if incident.disposition:
            lines.append(f"Disposition: {incident.disposition}")
        if incident.truncated_alerts:
            lines.append(f"Truncated: {incident.truncated_alerts} alerts left out by Alertmanager")
        lines += ["", "Alerts:"]
        lines += [
            f"  {a.status:<9}{a.alertname}  {a.fingerprint}  since {a.starts_at:%Y-%m-%d %H:%M:%S}"
            for a in alerts
        ]
        lines += ["", "Log:"]
        lines += [f"  {e.at:%Y-%m-%d %H:%M:%S}  {e.actor_name:<24} {e.summary}" for e in entries]
        return _print("\n".join(lines))


def _transition(
    args: argparse.Namespace, settings: Settings, apply: Callable[..., Incident], **extra: Any
) -> int:
    number = service.parse_ref(args.incident)
    actor = log.Actor.human(args.actor)
    with _database(settings) as db, db.transaction() as session:
        incident = apply(session, number, actor=actor, at=SystemClock().now(), **extra)
        return _print(f"{incident.ref} {incident.status} (owner: {incident.owner or '-'})")


def _ack(args: argparse.Namespace, settings: Settings) -> int:
    return _transition(args, settings, service.acknowledge, note=args.note)


def _resolve(args: argparse.Namespace, settings: Settings) -> int:
    return _transition(args, settings, service.resolve, disposition=args.note, owner=args.owner)


def _reopen(args: argparse.Namespace, settings: Settings) -> int:
    reason = args.note or f"reopened by {args.actor}"
    return _transition(args, settings, service.reopen, reason=reason)


def _close(args: argparse.Namespace, settings: Settings) -> int:
    return _transition(args, settings, service.close)


def _log_verify(args: argparse.Namespace, settings: Settings) -> int:
    with _database(settings) as db, db.session() as session:
        if args.incident:
            targets = [service.get(session, service.parse_ref(args.incident))]
        else:
            targets = service.list_incidents(session, limit=10**9)
        for incident in sorted(targets, key=lambda i: i.number):
            broken = log.verify(incident, log.entries(session, incident.number))
            if broken is not None:
                print(f"runbook-bot: log verification FAILED: {broken}", file=sys.stderr)
                return 1
        return _print(f"log verified: {len(targets)} incident(s), every entry intact")


def _actions(args: argparse.Namespace, _: Settings) -> int:
    from bot.actions import registry

    if args.name:
        chosen = registry.get(args.name)
        lines = [f"{chosen.name} ({chosen.risk.value}): {chosen.description}", "Parameters:"]
        for name, kind, required, text in chosen.parameters():
            flag = "required" if required else "optional"
            lines.append(f"  {name:<16} {kind:<38} {flag:<9} {text}")
        lines.append(f"Dry run: {'yes' if chosen.dry_run else 'no'}")
        return _print("\n".join(lines))
    table = [["ACTION", "RISK", "DRY-RUN", "DESCRIPTION"]]
    table += [
        [a.name, a.risk.value, "yes" if a.dry_run else "no", a.description]
        for a in registry.all_actions()
    ]
    return _print(_table(table))


def _action(args: argparse.Namespace, settings: Settings) -> int:
    import getpass

    from bot.actions import ActionContext, execute, registry

    chosen = registry.get(args.name)
    raw = _key_values(args.params)
    actor = args.actor or getpass.getuser()
    clock = SystemClock()
    with contextlib.ExitStack() as stack:
        record = None
        if args.incident:
            if not args.actor:
                raise BotError("--incident needs --as USER: the log names who acted")
            db = stack.enter_context(_database(settings))
            record = _recorder(db, service.parse_ref(args.incident), args.actor, clock)
        ctx = ActionContext(
            actor=actor,
            settings=settings,
            clock=clock,
            incident=args.incident,
            dry_run=args.dry_run,
            admin_override=args.override_breaker,
            progress=lambda message: print(f"... {message}", file=sys.stderr, flush=True),
        )
        if record is not None:
            ctx.record = record
        outcome = execute(chosen, raw, ctx)
    result = outcome.result
    if args.json:
        _print(json.dumps(result.model_dump(mode="json"), indent=2, ensure_ascii=False))
    else:
        _print(result.summary)
    return 0 if result.ok else 1


def _recorder(
    db: Database, number: int, user: str, clock: SystemClock
) -> Callable[[str, str, dict[str, Any]], None]:
    with db.session() as session:
        service.get(session, number)  # fail now, before the action runs

    def record(kind: str, summary: str, data: dict[str, Any]) -> None:
        with db.transaction() as session:
            incident = service.get(session, number, lock=True)
            log.append(
                session,
                incident,
                at=clock.now(),
                actor=log.Actor.human(user),
                type=kind,
                summary=summary,
                data=data,
            )

    return record


def _key_values(items: list[str]) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise BotError(f"parameter {item!r} is not KEY=VALUE (e.g. node=gpu-node-02)")
        if value[:1] in ("[", "{"):
            try:
                values[key] = json.loads(value)
            except ValueError as exc:
                raise BotError(f"parameter {key}: value is not valid JSON ({exc})") from exc
        else:
            values[key] = value
    return values


def _sim(args: argparse.Namespace, _: Settings) -> int:
    from pathlib import Path

    from bot import sim

    scenario = args.scenario or Path(sim.__file__).parent / "scenarios" / "gpu-cluster.yaml"
    sim.run(scenario, port=args.port, kubeconfig_path=args.kubeconfig, time_scale=args.time_scale)
    return 0


def _split(values: list[str]) -> list[str]:
    return [part.strip() for value in values for part in value.split(",") if part.strip()]


if __name__ == "__main__":
    raise SystemExit(main())

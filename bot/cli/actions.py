"""Commands on actions: list them, run one like kubectl (optionally into an incident's log)."""

from __future__ import annotations

import argparse
import contextlib
import json
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import Any

from bot.cli import common
from bot.clock import SystemClock
from bot.config import Settings
from bot.db import Database
from bot.errors import BotError
from bot.incidents import history, log, service


def add_commands(commands: Any) -> None:
    """Register `actions` and `action` on the top-level subparsers."""
    actions = commands.add_parser(
        "actions",
        help="list the actions runbooks can run",
        description="List every registered action with its risk; with NAME, its parameters.",
    )
    actions.add_argument("name", metavar="NAME", nargs="?")
    actions.set_defaults(handler=list_actions)

    run = commands.add_parser(
        "action",
        help="run one action directly, like kubectl",
        description="Run one action with your own credentials (KUBECONFIG, settings). "
        "Parameters are key=value; a value starting with [ or { is JSON. With --incident "
        "the run is recorded in that incident's log.",
    )
    run.add_argument("name", metavar="NAME")
    run.add_argument("params", metavar="KEY=VALUE", nargs="*")
    run.add_argument("--dry-run", action="store_true", help="server-side dry run")
    run.add_argument("--json", action="store_true", help="print the result as JSON")
    run.add_argument("--incident", metavar="INC-N", help="record the run in this log")
    run.add_argument(
        "--as",
        dest="actor",
        metavar="PERSON",
        help="who runs it: a person id of the `people` setting (needed with --incident; "
        "default: your login name, which is not recorded anywhere)",
    )
    run.add_argument(
        "--override-breaker",
        action="store_true",
        help="admin override of the circuit breaker (recorded in the log)",
    )
    run.set_defaults(handler=run_action)


def list_actions(args: argparse.Namespace, _: Settings) -> int:
    from bot.actions import registry

    if args.name:
        chosen = registry.get(args.name)
        lines = [f"{chosen.name} ({chosen.risk.value}): {chosen.description}", "Parameters:"]
        for name, kind, required, text in chosen.parameters():
            flag = "required" if required else "optional"
            lines.append(f"  {name:<16} {kind:<38} {flag:<9} {text}")
        lines.append(f"Dry run: {'yes' if chosen.dry_run else 'no'}")
        return common.say("\n".join(lines))
    table = [["ACTION", "RISK", "DRY-RUN", "DESCRIPTION"]]
    table += [
        [a.name, a.risk.value, "yes" if a.dry_run else "no", a.description]
        for a in registry.all_actions()
    ]
    return common.say(common.table(table))


def run_action(args: argparse.Namespace, settings: Settings) -> int:
    import getpass

    from bot.actions import ActionContext, execute, registry
    from bot.cli import terminal

    chosen = registry.get(args.name)
    raw = _key_values(args.params)
    who = common.decider(settings, args.actor) if args.actor else None
    actor = who.id if who is not None else getpass.getuser()
    clock = SystemClock()
    shown = terminal.ActionProgress(_title(chosen.name, raw))
    with contextlib.ExitStack() as stack:
        stack.enter_context(shown.running())
        record = None
        if args.incident:
            if who is None:
                raise BotError("--incident needs --as PERSON: the log names who acted")
            db = stack.enter_context(common.database(settings))
            record = _recorder(db, service.parse_ref(args.incident), log.Actor.deciding(who), clock)
        ctx = ActionContext(
            actor=actor,
            settings=settings,
            clock=clock,
            incident=args.incident,
            dry_run=args.dry_run,
            admin_override=args.override_breaker,
            progress=shown.line,
            measure=shown.reading,
        )
        if record is not None:
            ctx.record = record
        # The same lock as the workers': a cordon from here and one from a worker cannot
        # both pass the breaker's limit.
        ctx.breaker_lock = _breaker_lock(settings, clock)
        ctx.alert_history = _alert_history(settings)
        outcome = execute(chosen, raw, ctx)
    result = outcome.result
    if args.json:
        common.say(json.dumps(result.model_dump(mode="json"), indent=2, ensure_ascii=False))
    else:
        common.say(result.summary)
    return 0 if result.ok else 1


def _title(name: str, raw: dict[str, Any]) -> str:
    """What the progress bar says it does: "k8s.drain gpu-node-02"."""
    node = raw.get("node")
    return f"{name} {node}" if isinstance(node, str) else name


def _recorder(
    db: Database, number: int, actor: log.Actor, clock: SystemClock
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
                actor=actor,
                type=kind,
                summary=summary,
                data=data,
            )

    return record


def _breaker_lock(
    settings: Settings, clock: SystemClock
) -> Callable[[], contextlib.AbstractContextManager[None]]:
    """The circuit breaker's lock on the bot's database, opened only when an action asks."""
    from bot.actions import breaker_lock

    @contextlib.contextmanager
    def held() -> Iterator[None]:
        wait = settings.database_lock_timeout.total_seconds()
        # No schema needed: the lock is PostgreSQL's advisory lock or a file beside SQLite's.
        with (
            common.database(settings, migrated=False) as db,
            breaker_lock.across(db, clock, wait=wait),
        ):
            yield

    return held


def _alert_history(settings: Settings) -> Callable[[str, datetime], list[dict[str, Any]]]:
    """Earlier alerts on a node, read from the database only when an action asks."""

    def alerts(node: str, since: datetime) -> list[dict[str, Any]]:
        with common.database(settings) as db:
            return history.alerts_on_node(db, node, since)

    return alerts


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

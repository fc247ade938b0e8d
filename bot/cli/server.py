"""Commands that run or set up the service: serve, db upgrade, db current, sim; and
`run_service`, the start-up `serve` and `demo` share."""

from __future__ import annotations

import argparse
import logging
import signal
import socket
import threading
import time
from collections.abc import Callable
from contextlib import ExitStack
from typing import TYPE_CHECKING, Any

from bot import migrations
from bot.cli import common
from bot.clock import Clock, SystemClock
from bot.config import Settings
from bot.db import Database

if TYPE_CHECKING:
    from bot.chat.slack.app import SlackApp
    from bot.runbooks.catalog import Catalog

GRACEFUL_SHUTDOWN = 3
"""Seconds uvicorn waits for open requests (an event stream never ends) when stopping."""


def serve(args: argparse.Namespace, settings: Settings) -> int:
    from bot.escalation import targets_from
    from bot.runbooks import catalog as catalogs

    runbooks = catalogs.load(settings)  # once per process; invalid runbooks stop the start
    targets_from(settings.escalation.targets)  # a target's missing secret stops it too
    host, port = args.host or settings.listen_host, args.port or settings.listen_port
    run_service(settings, runbooks, host=host, port=port)
    return 0


def run_service(
    settings: Settings,
    runbooks: Catalog,
    *,
    host: str,
    port: int,
    sock: socket.socket | None = None,
    started: Callable[[], None] | None = None,
    on_console_login: Callable[[str], None] | None = None,
) -> None:
    """What `serve` and `demo` run until SIGTERM or Ctrl-C: the schema upgraded (SQLite)
    or checked, the worker's child process, Slack when configured, and the app under
    uvicorn on `host`:`port` (or on `sock`, already bound). `started` is called, in a
    thread of its own, once the app answers."""
    import uvicorn

    from bot.cli.worker_process import WorkerProcess
    from bot.people.gaps import gaps
    from bot.web import build_app

    with common.database(settings, migrated=False) as db, ExitStack() as stack:
        if settings.is_sqlite:
            migrations.upgrade(db)
        else:
            migrations.check(db)
            if migrations.owns_log(db):
                logging.getLogger(__name__).warning(
                    "database role %s owns the tables: with its credentials the incident log "
                    "can be rewritten; run as a runtime role that owns nothing "
                    "(database_migration_url, docs/security.md)",
                    db.engine.url.username,
                )
        for gap in gaps(settings):
            logging.getLogger(__name__).warning("%s", gap)
        clock = SystemClock()
        worker = WorkerProcess(settings) if settings.serve_worker else None
        wake = worker.wake if worker is not None else None
        chat = worker is not None and settings.slack_enabled
        wake_chat = worker.wake_chat if chat and worker is not None else None
        slack = _slack(settings, db, clock, wake, wake_chat)
        topology = stack.enter_context(common.node_cache(settings))
        app = build_app(
            settings,
            db,
            clock,
            catalog=runbooks,
            wake=wake,
            wake_chat=wake_chat,
            slack=slack if settings.slack_mode == "http" else None,
            on_console_login=on_console_login,
            topology=topology,
        )
        logging.getLogger(__name__).info(
            "listening on http://%s:%s (database %s, %d runbooks, %s)",
            host,
            port,
            db.describe(),
            len(runbooks.runbooks) + (runbooks.fallback is not None),
            "worker in a child process" if worker else "no worker: run `runbook-bot worker`",
        )
        # uvicorn shuts down gracefully on SIGTERM, then raises the signal again for the
        # handler that was there before it: this one, so that the worker process is
        # stopped below and serve exits 0 instead of dying on the default handler.
        signal.signal(signal.SIGTERM, _exit)
        if worker is not None:
            worker.start()
        socket_mode = _socket_mode(settings, slack)
        config = uvicorn.Config(
            app,
            host=host,
            port=port,
            log_level=settings.log_level,
            access_log=False,
            # The peer is the socket's: an X-Forwarded-For never moves it (the console's
            # trusted proxies and login throttle go by the real peer).
            proxy_headers=False,
            # Open server-sent-event streams (the console) never hold the shutdown.
            timeout_graceful_shutdown=GRACEFUL_SHUTDOWN,
        )
        server = uvicorn.Server(config)
        if started is not None:
            threading.Thread(
                target=_when_started, args=(server, started), name="started", daemon=True
            ).start()
        try:
            server.run(sockets=[sock] if sock is not None else None)
            if not server.started:  # uvicorn logged why (the port is taken, ...)
                raise SystemExit(3)  # as `uvicorn.run` does
        finally:
            if socket_mode is not None:
                socket_mode.close()
            if worker is not None:
                worker.stop(timeout=settings.worker_lease.total_seconds())


def _when_started(server: Any, started: Callable[[], None]) -> None:
    while not server.started:
        if server.should_exit:
            return
        time.sleep(0.02)
    started()


def _slack(
    settings: Settings,
    db: Database,
    clock: Clock,
    wake: Callable[[], None] | None,
    wake_chat: Callable[[], None] | None,
) -> SlackApp | None:
    if not settings.slack_enabled:
        return None
    from bot.chat import slack
    from bot.chat.slack.app import SlackApp

    return SlackApp(settings, db, clock, slack.api(settings), wake=wake, wake_chat=wake_chat)


def _socket_mode(settings: Settings, slack: SlackApp | None) -> Any:
    """Connect to Slack over Socket Mode (its own threads); None in HTTP mode."""
    if slack is None or settings.slack_mode != "socket":
        return None
    from slack_bolt.adapter.socket_mode import SocketModeHandler

    handler = SocketModeHandler(slack.app, settings.slack_secret("app_token"))
    handler.connect()  # type: ignore[no-untyped-call]
    logging.getLogger(__name__).info("connected to Slack over Socket Mode")
    return handler


def _exit(*_: object) -> None:
    raise SystemExit(0)


def db_upgrade(_: argparse.Namespace, settings: Settings) -> int:
    """Migrate, connected as the owner role when `database_migration_url` names one, then
    grant the runtime role (the user of `database_url`) what it may do."""
    owner_url = settings.database_migration_url
    with common.database(settings, migrated=False, url=owner_url) as db:
        before = migrations.current(db)
        migrations.upgrade(db)
        after = migrations.current(db)
        granted = _grant_runtime(db, settings) if owner_url is not None else None
    if before == after:
        common.say(f"database {db.describe()} is already at revision {after}")
    else:
        common.say(f"database {db.describe()} upgraded from {before or 'empty'} to {after}")
    if granted is not None:
        common.say(
            f"runtime role {granted}: SELECT and INSERT on incident_log and runbook_versions, "
            "SELECT, INSERT, UPDATE, DELETE on the other tables; it owns none"
        )
    return 0


def _grant_runtime(db: Database, settings: Settings) -> str | None:
    """Grant the runtime role; its name (None on SQLite, which has no roles)."""
    from sqlalchemy.engine import make_url

    from bot.errors import ConfigInvalid

    if not db.is_postgres:
        return None
    role = make_url(settings.database_url).username
    owner = db.engine.url.username
    if not role:
        raise ConfigInvalid(
            "database_url names no user: it must be the runtime role that "
            "database_migration_url's owner grants (postgresql+psycopg://runbook_bot@HOST/DB)"
        )
    if role == owner:
        raise ConfigInvalid(
            f"database_migration_url and database_url are both role {role}: the migration "
            "URL is the owner role, database_url the runtime role (docs/security.md); unset "
            "database_migration_url to run with one role"
        )
    migrations.grant_runtime(db, role)
    return role


def db_current(_: argparse.Namespace, settings: Settings) -> int:
    with common.database(settings, migrated=False) as db:
        have, want = migrations.current(db), migrations.head()
    state = "up to date" if have == want else "behind: run `runbook-bot db upgrade`"
    return common.say(
        f"database {db.describe()}: revision {have or 'none'}, needs {want} ({state})"
    )


def sim(args: argparse.Namespace, _: Settings) -> int:
    from pathlib import Path

    from bot import sim

    scenario: Any = args.scenario or Path(sim.__file__).parent / "scenarios" / "gpu-cluster.yaml"
    extra: dict[str, Any] = {}
    if args.fleet is not None:
        from bot.sim.fleet import LEVELS

        scenario = sim.fleet(args.fleet).scenario
        extra["topology"] = {"levels": LEVELS}
    sim.run(
        scenario,
        settings_extra=extra,
        port=args.port,
        kubeconfig_path=args.kubeconfig,
        time_scale=args.time_scale,
        bmc_port=None if args.no_bmcs else args.bmc_port,
        settings_path=args.settings,
    )
    return 0

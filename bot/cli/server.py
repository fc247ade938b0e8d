"""Commands that run or set up the service: serve, db upgrade, db current, sim."""

from __future__ import annotations

import argparse
import logging
import signal

from bot import migrations
from bot.cli import common
from bot.clock import SystemClock
from bot.config import Settings


def serve(args: argparse.Namespace, settings: Settings) -> int:
    import uvicorn

    from bot.cli.worker_process import WorkerProcess
    from bot.runbooks import catalog as catalogs
    from bot.web import build_app

    runbooks = catalogs.load(settings)  # once per process; invalid runbooks stop the start
    with common.database(settings, migrated=False) as db:
        if settings.is_sqlite:
            migrations.upgrade(db)
        else:
            migrations.check(db)
        worker = WorkerProcess(settings) if settings.serve_worker else None
        wake = worker.wake if worker is not None else None
        app = build_app(settings, db, SystemClock(), catalog=runbooks, wake=wake)
        host, port = args.host or settings.listen_host, args.port or settings.listen_port
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
        try:
            uvicorn.run(app, host=host, port=port, log_level=settings.log_level, access_log=False)
        finally:
            if worker is not None:
                worker.stop(timeout=settings.worker_lease.total_seconds())
    return 0


def _exit(*_: object) -> None:
    raise SystemExit(0)


def db_upgrade(_: argparse.Namespace, settings: Settings) -> int:
    with common.database(settings, migrated=False) as db:
        before = migrations.current(db)
        migrations.upgrade(db)
        after = migrations.current(db)
    if before == after:
        return common.say(f"database {db.describe()} is already at revision {after}")
    return common.say(f"database {db.describe()} upgraded from {before or 'empty'} to {after}")


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

    scenario = args.scenario or Path(sim.__file__).parent / "scenarios" / "gpu-cluster.yaml"
    sim.run(
        scenario,
        port=args.port,
        kubeconfig_path=args.kubeconfig,
        time_scale=args.time_scale,
        bmc_port=None if args.no_bmcs else args.bmc_port,
        settings_path=args.settings,
    )
    return 0

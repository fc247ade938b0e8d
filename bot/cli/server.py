"""Commands that run or set up the service: serve, db upgrade, db current, sim."""

from __future__ import annotations

import argparse
import logging
import threading

from bot import migrations
from bot.cli import common
from bot.clock import SystemClock
from bot.config import Settings


def serve(args: argparse.Namespace, settings: Settings) -> int:
    import uvicorn

    from bot.runbooks import catalog as catalogs
    from bot.web import build_app
    from bot.worker import Worker

    runbooks = catalogs.load(settings)  # once per process; invalid runbooks stop the start
    with common.database(settings, migrated=False) as db:
        if settings.is_sqlite:
            migrations.upgrade(db)
        else:
            migrations.check(db)
        clock = SystemClock()
        worker = Worker(db, settings, clock) if settings.serve_worker else None
        stop = threading.Event()
        thread = (
            threading.Thread(target=worker.run_forever, args=(stop,), name="worker")
            if worker
            else None
        )
        app = build_app(settings, db, clock, catalog=runbooks, wake=worker.wake if worker else None)
        host, port = args.host or settings.listen_host, args.port or settings.listen_port
        logging.getLogger(__name__).info(
            "listening on http://%s:%s (database %s, %d runbooks)",
            host,
            port,
            db.describe(),
            len(runbooks.runbooks) + (runbooks.fallback is not None),
        )
        if thread is not None:
            thread.start()
        try:
            uvicorn.run(app, host=host, port=port, log_level=settings.log_level, access_log=False)
        finally:
            stop.set()
            if worker is not None and thread is not None:
                worker.wake()
                thread.join(timeout=settings.worker_lease.total_seconds())
    return 0


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

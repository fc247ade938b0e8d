"""`serve` and its worker each keep one node cache: they list the fleet's nodes once at
start, say how many nodes and domains they read, watch from then on, and stop on SIGTERM.
The app keeps the topology it was given for ingest."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import httpx
import yaml

from bot.clock import FrozenClock
from bot.config import Settings, load_settings
from bot.db import Database
from bot.sim import SimHandle
from bot.sim.fleet import LEVELS
from bot.topology import Domain, NodeCache
from bot.web import build_app
from tests.sim.waiting import eventually

WAIT = 30.0
READ = "topology: read 40 nodes in 15 domains (levels row, rack, leaf, power)"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def test_serve_and_its_worker_read_the_topology_at_start_and_watch_it(
    fleet_sim: SimHandle, tmp_path: Path
) -> None:
    port = _free_port()
    settings = {
        "database_url": f"sqlite:///{tmp_path / 'bot.db'}",
        "runbooks_dir": str(tmp_path / "runbooks"),
        "kubeconfig": str(fleet_sim.write_kubeconfig(tmp_path / "kubeconfig")),
        "topology": {"levels": LEVELS},
        "listen_port": port,
    }
    config = tmp_path / "settings.yaml"
    config.write_text(yaml.safe_dump(settings), encoding="utf-8")
    log = tmp_path / "serve.log"
    with log.open("w+b") as output:
        proc = subprocess.Popen(
            [sys.executable, "-m", "bot.cli", "--config", str(config), "serve"],
            cwd=tmp_path,
            env={**os.environ, "RUNBOOK_BOT_LOG_LEVEL": "info"},
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:

            def ready() -> bool:
                assert proc.poll() is None, log.read_text()
                try:
                    return httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=2).is_success
                except httpx.TransportError:
                    return False

            eventually(ready, timeout=WAIT, what="serve to become ready")
            eventually(
                lambda: log.read_text().count(READ) == 2,
                timeout=WAIT,
                what="serve and its worker process to read the topology",
            )
            eventually(
                lambda: len(watches(fleet_sim)) >= 2,
                timeout=WAIT,
                what="both to watch the nodes",
            )
            proc.send_signal(signal.SIGTERM)
            code = proc.wait(timeout=WAIT)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)

    assert code == 0, log.read_text()
    made = fleet_sim.cluster.requests_made("GET", "/api/v1/nodes")
    assert len(made) - len(watches(fleet_sim)) == 2  # one list each, then only watches
    assert "Traceback" not in log.read_text()


def watches(sim: SimHandle) -> list[object]:
    made = sim.cluster.requests_made("GET", "/api/v1/nodes")
    return [r for r in made if r.query.get("watch") == "true"]


def test_the_app_keeps_the_topology_it_was_given(
    db: Database, fleet_settings: Settings, clock: FrozenClock
) -> None:
    cache = NodeCache(fleet_settings, clock=clock)
    cache.start()
    try:
        app = build_app(load_settings(database_url=db.url), db, clock, topology=cache.current)
        kept = app.state.topology
        assert kept() is cache.current()
        assert kept().domain_of("gpu-node-0033", "row") == Domain("row", "b")
    finally:
        cache.stop()
    assert build_app(load_settings(database_url=db.url), db, clock).state.topology is None

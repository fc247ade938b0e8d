"""`runbook-bot serve` runs its worker in a child process it wakes, restarts and stops.

Everything goes through the real command against the simulated cluster: an alert posted to
the webhook, an approval over the API, `kill -9` of the child, SIGTERM and `kill -9` of
serve. `worker_poll` is a minute, so a step that moves within seconds was woken across the
process boundary, not found by polling.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import httpx
import pytest
import yaml

from bot.cli.worker_process import WorkerProcess
from bot.config import load_settings
from bot.sim import SimHandle, running, seed
from tests.runbooks.rig import TWO_STEPS
from tests.sim.waiting import TIME_SCALE, eventually
from tests.support import people
from tests.support.payloads import alert, notification

WAIT = 30.0


@pytest.fixture
def sim() -> Iterator[SimHandle]:
    with running(seed(grace_seconds=5, startup_seconds=2), time_scale=TIME_SCALE) as handle:
        yield handle


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _children(pid: int) -> list[int]:
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*/children"):
        try:
            found += [int(child) for child in task.read_text().split()]
        except OSError:
            continue
    return found


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def _alive(pid: int) -> bool:
    """Running (a zombie left for a non-reaping init counts as gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


@dataclass
class Served:
    proc: subprocess.Popen[bytes]
    url: str
    output: IO[bytes]
    db_url: str

    def decide_as(self, person: str) -> dict[str, str]:
        """A personal API token of `person` (a responder in these settings)."""
        return people.bearer_at(self.db_url, person, roles={person: ["responder"]})

    def worker(self) -> int | None:
        """The pid of serve's worker process (not multiprocessing's resource tracker)."""
        found = [c for c in _children(self.proc.pid) if "spawn_main" in _cmdline(c)]
        return found[0] if found else None

    def log(self) -> str:
        self.output.seek(0)
        return self.output.read().decode(errors="replace")

    def fire(self, client: httpx.Client, host: str) -> int:
        posted = client.post("/webhooks/alertmanager", json=notification([alert(host=host)]))
        assert posted.status_code == 200 and posted.json()["opened"] is True, posted.text
        return int(posted.json()["incident"].removeprefix("INC-"))

    def states(self, client: httpx.Client, number: int) -> dict[str, str]:
        answer = client.get(f"/api/incidents/{number}/steps")
        assert answer.status_code == 200, answer.text
        return {step["step"]: step["state"] for step in answer.json()["steps"]}


@pytest.fixture
def served(db_url: str, sim: SimHandle, tmp_path: Path) -> Iterator[Served]:
    runbooks = tmp_path / "runbooks"
    runbooks.mkdir()
    (runbooks / "gpu-xid.yaml").write_text(textwrap.dedent(TWO_STEPS), encoding="utf-8")
    settings: dict[str, Any] = {
        "database_url": db_url,
        "runbooks_dir": str(runbooks),
        "kubeconfig": str(sim.write_kubeconfig(tmp_path / "kubeconfig")),
        "roles": {"alice": ["responder"]},
        "worker_poll": "60s",
        "listen_port": _free_port(),
    }
    config = tmp_path / "settings.yaml"
    config.write_text(yaml.safe_dump(settings), encoding="utf-8")
    output = (tmp_path / "serve.log").open("w+b")
    proc = subprocess.Popen(
        [sys.executable, "-m", "bot.cli", "--config", str(config), "serve"],
        cwd=tmp_path,
        env={**os.environ, "RUNBOOK_BOT_LOG_LEVEL": "info"},
        stdout=output,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # its own process group, as under systemd
    )
    url = f"http://127.0.0.1:{settings['listen_port']}"
    handle = Served(proc, url, output, db_url)
    try:

        def ready() -> bool:
            assert proc.poll() is None, f"serve exited:\n{handle.log()}"
            try:
                return httpx.get(f"{url}/readyz", timeout=2).status_code == 200
            except httpx.TransportError:
                return False

        eventually(ready, timeout=WAIT, what="serve to become ready")
        eventually(handle.worker, timeout=WAIT, what="serve to start its worker process")
        yield handle
    finally:
        workers = _children(proc.pid)
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
        for pid in workers:  # never leave a worker behind, whatever the test did
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
        output.close()


def test_the_webhook_and_approvals_wake_the_worker_in_its_child_process(
    served: Served, sim: SimHandle
) -> None:
    with httpx.Client(base_url=served.url, timeout=10) as client:
        number = served.fire(client, "gpu-node-01")
        eventually(
            lambda: (
                served.states(client, number)
                == {"status": "succeeded", "cordon": "awaiting_approval"}
            ),
            timeout=WAIT,
            what="the woken worker to run the status step and propose the cordon",
        )
        approved = client.post(
            f"/api/incidents/{number}/steps/cordon/approve",
            json={},
            headers=served.decide_as("alice"),
        )
        assert approved.status_code == 200, approved.text
        eventually(
            lambda: served.states(client, number)["cordon"] == "succeeded",
            timeout=WAIT,
            what="the woken worker to run the approved cordon",
        )

    assert sim.cluster.snapshot().nodes["gpu-node-01"].unschedulable
    worker = served.worker()
    assert worker is not None and worker != served.proc.pid
    assert "worker process" in served.log() and "started" in served.log()


def test_a_killed_worker_process_is_started_again_and_serve_stops_it_on_sigterm(
    served: Served,
) -> None:
    first = served.worker()
    assert first is not None
    os.kill(first, signal.SIGKILL)
    second = eventually(
        lambda: (pid := served.worker()) is not None and pid != first and pid,
        timeout=WAIT,
        what="serve to start another worker process",
    )
    with httpx.Client(base_url=served.url, timeout=10) as client:
        number = served.fire(client, "gpu-node-02")
        eventually(
            lambda: served.states(client, number).get("status") == "succeeded",
            timeout=WAIT,
            what="the new worker process, woken by the webhook, to run the status step",
        )

    served.proc.send_signal(signal.SIGTERM)
    assert served.proc.wait(timeout=WAIT) == 0
    eventually(lambda: not _alive(second), timeout=WAIT, what="the worker process to stop")
    log = served.log()
    assert f"worker process {first} exited with code -9" in log
    assert "starting another in 1 s" in log
    assert "did not stop" not in log  # it stopped on SIGTERM; nothing was killed


def test_sigterm_to_the_whole_process_group_stops_quietly(served: Served) -> None:
    worker = served.worker()
    assert worker is not None

    os.killpg(served.proc.pid, signal.SIGTERM)  # systemd and `timeout` signal every process

    assert served.proc.wait(timeout=WAIT) == 0
    eventually(lambda: not _alive(worker), timeout=WAIT, what="the worker process to stop")
    log = served.log()
    assert "exited with code" not in log and "starting another" not in log


def test_a_worker_process_whose_serve_was_killed_stops_by_itself(served: Served) -> None:
    worker = served.worker()
    assert worker is not None

    served.proc.kill()
    served.proc.wait(timeout=10)

    eventually(lambda: not _alive(worker), timeout=WAIT, what="the orphaned worker to stop")
    assert "is gone; the worker process stops" in served.log()


def test_waking_never_blocks_even_when_no_worker_reads(tmp_path: Path) -> None:
    process = WorkerProcess(load_settings(database_url=f"sqlite:///{tmp_path / 'x.db'}"))
    waking = threading.Thread(
        target=lambda: [(process.wake(), process.wake_chat()) for _ in range(100_000)]
    )
    try:
        waking.start()  # far more wake-ups than a pipe holds (64 KiB on Linux)
        waking.join(timeout=WAIT)
        assert not waking.is_alive(), "wake() blocked on a full pipe"
        pending = os.read(process._reader.fileno(), 1 << 20)
    finally:
        process.stop(timeout=1)

    assert pending and set(pending) == {ord("s"), ord("c")}  # steps and chat wake-ups

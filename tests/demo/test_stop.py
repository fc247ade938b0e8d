"""SIGTERM stops `runbook-bot demo` while an approved action is blocked: the hot row's
`k8s.stop_low_priority` waits on the trainers' PodDisruptionBudget (the stopped trainer's
replacement has no room), as `kubectl drain` waits until Ctrl-C.

The worker cancels the action in hand instead of waiting out its 15 min, so the demo exits
0 within a few seconds (not after `worker_lease`, when serve would kill its worker), its
worker process is gone with it, and the step is left interrupted for people to decide
again, its next attempt proposed. Run as a subprocess from the repository root, driven
over HTTP; the database is kept in `--dir` to read afterwards.
"""

from __future__ import annotations

import os
import signal
import sqlite3
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.demo.running import demo
from tests.sim.waiting import eventually

pytestmark = pytest.mark.timeout(180)


def _steps(client: httpx.Client, ref: str) -> dict[str, dict[str, Any]]:
    response = client.get(f"/api/incidents/{ref}/steps")
    assert response.status_code == 200, response.text
    return {s["step"]: s for s in response.json()["steps"]}


def _state(client: httpx.Client, ref: str, step: str) -> str:
    return str(_steps(client, ref)[step]["state"])


def _post(client: httpx.Client, path: str, body: dict[str, Any], auth: dict[str, str]) -> None:
    response = client.post(path, json=body, headers=auth)
    assert response.status_code == 200, f"POST {path}: {response.text}"


def _children(pid: int) -> set[int]:
    """The live processes whose parent is `pid` (the worker, multiprocessing's tracker)."""
    found = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[1]) == pid and fields[0] != "Z":
            found.add(int(entry.name))
    return found


def _alive(pid: int) -> bool:
    try:
        state = (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _blocked(client: httpx.Client, ref: str) -> bool:
    step = _steps(client, ref)["stop_low_priority"]
    return step["state"] == "running" and "trainer-pdb" in repr(step.get("progress"))


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads processes in /proc")
def test_sigterm_while_an_eviction_waits_on_a_budget_stops_the_demo_and_interrupts_the_step(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "demo"
    with demo(
        tmp_path,
        "--scenario",
        "row-cooling",
        "--delay",
        "1s",
        "--after",
        "start",
        "--time-scale",
        "0.1",
        "--dir",
        str(folder),
    ) as running:
        with running.client() as client:
            (row,) = eventually(
                lambda: client.get("/api/incidents").json()["incidents"],
                timeout=30,
                what="the row's incident",
            )
            ref, oncall = row["id"], running.decide_as("oncall")
            steps = f"/api/incidents/{ref}/steps"
            eventually(
                lambda: _state(client, ref, "facility") == "awaiting_approval",
                timeout=30,
                what="the facility step asking",
            )
            _post(client, f"{steps}/facility/done", {"note": "facility on it"}, oncall)
            eventually(
                lambda: _state(client, ref, "row_cordon") == "awaiting_approval",
                timeout=30,
                what="the row's cordon asking",
            )
            _post(client, f"{steps}/row_cordon/approve", {"count": 2}, oncall)
            eventually(
                lambda: _state(client, ref, "stop_low_priority") == "awaiting_approval",
                timeout=60,
                what="shedding the row's load asking",
            )
            _post(client, f"{steps}/stop_low_priority/approve", {"count": 2}, oncall)
            # One trainer is evicted; the other's eviction is refused by trainer-pdb, which
            # never allows it (the first one's replacement has no room): blocked for good.
            eventually(
                lambda: _blocked(client, ref),
                timeout=60,
                what="an eviction waiting on ml/trainer-pdb",
            )
        children = _children(running.process.pid)
        assert children, "the demo runs its worker in a child process"

        try:
            assert running.stop() == 0  # fails the test if it takes 30 s or more
        finally:
            for pid in children:  # a worker left running would hold the demo's stdout
                if _alive(pid):
                    os.kill(pid, signal.SIGKILL)

    # Nothing it started runs on (the worker, multiprocessing's resource tracker).
    eventually(
        lambda: not any(_alive(pid) for pid in children),
        timeout=10,
        what=f"the demo's child processes {sorted(children)} to end",
    )
    stderr = running.stderr.read_text()
    assert "did not stop" not in stderr, stderr[-3000:]  # stopped, not killed after its lease
    with sqlite3.connect(folder / "runbook-bot.db") as db:
        runs = db.execute(
            "SELECT attempt, state, summary FROM step_runs WHERE step_id = 'stop_low_priority' "
            "ORDER BY attempt"
        ).fetchall()
        logged = [t for (t,) in db.execute("SELECT type FROM incident_log ORDER BY id")]
    assert [(attempt, state) for attempt, state, _ in runs] == [
        (1, "interrupted"),
        (2, "awaiting_approval"),  # people decide again
    ], runs
    assert "stopped while it ran" in runs[0][2]
    assert "step.interrupted" in logged
    assert os.listdir(folder)  # --dir is kept (a temporary directory would be removed)

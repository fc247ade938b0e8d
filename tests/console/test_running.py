"""A step over many nodes shows in #running as counts and a compact grid (one mark a
node: done, running, failed, left), never one line per node; the names wait in a details
element, and Stop the rest sits with it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import httpx

from bot.clock import FrozenClock
from bot.db import Database
from bot.sim import SimHandle
from bot.worker import Worker
from tests.console.rig import ConsoleRig, login
from tests.console.test_layout import block, text_of
from tests.sim.waiting import eventually
from tests.support.payloads import alert, notification

WAIT = 60.0
NODES = ["gpu-node-01", "gpu-node-02", "gpu-node-03", "gpu-node-04"]
OPEN = {"breaker_max_fraction": 1.0, "breaker_max_nodes": 64, "breaker_global_max_fraction": 1.0}
RUNBOOK = """\
    id: row-cordon
    title: Row fault
    version: 1
    match: {alerts: [GPUXIDError]}
    steps:
      - id: cordon
        title: Cordon the set
        action: k8s.cordon
        for_each: nodes
        max_parallel: 2
        with: {node: "{{ node }}"}
"""


def test_a_step_over_many_nodes_runs_in_view_as_counts_and_a_grid(
    db: Database, clock: FrozenClock, tmp_path: Path, sim: SimHandle
) -> None:
    rig = ConsoleRig(db, clock, tmp_path, **OPEN)
    rig.write(RUNBOOK)
    body = notification([alert(host=n) for n in NODES], group={"alertname": "GPUXIDError"})
    number = rig.ingest(body).incident
    Worker(rig.db, rig.settings, rig.clock).propose()
    rig.approve(number, "cordon", "alice", count=4)
    holds = [sim.cluster.hold_requests(f"/api/v1/nodes/{n}", method="GET") for n in NODES[:2]]
    worker = Worker(rig.db, rig.settings, rig.clock, kube_factory=sim.api_client)
    page: Callable[[], str]
    with rig.serving() as url, httpx.Client(base_url=url, timeout=10) as client:
        login(client, "bob")

        def page() -> str:
            return client.get(f"/incidents/{number}").text

        try:
            assert worker.run_once() is True
            assert all(hold.arrived.wait(WAIT) for hold in holds)
            eventually(
                lambda: "done 0 · running 2 · failed 0 · left 2" in page(),
                timeout=WAIT,
                what="the page to count two nodes running",
            )
            shown = page()
            running = block(shown, '<section id="running"')
        finally:
            for hold in holds:
                hold.release()
        assert worker.settle(WAIT) is True
        after = page()

    assert 'data-step="cordon"' in running
    assert '<div class="counted">done 0 · running 2 · failed 0 · left 2</div>' in running
    grid = block(running, '<pre class="grid"')
    assert text_of(grid) == "▶▶□□"
    assert 'data-action="stop"' in running  # Stop the rest goes with the progress
    names = block(running, '<details class="nodes"')
    assert all(node in names for node in NODES)
    outside = running.replace(names, "")
    assert not any(node in outside for node in NODES), outside  # counted, not listed
    assert shown.index('<section id="decision"') < shown.index('<section id="running"')
    assert "Nothing waits for a decision: Cordon the set is running." in text_of(shown)

    assert '<section id="running"' not in after  # done: it moved to the steps so far
    history = block(after, '<section id="history"')
    assert text_of(block(history, '<pre class="grid"')) == "■■■■"

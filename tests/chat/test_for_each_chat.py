"""A step over many nodes on the card, in Slack (the fake Slack, the real WebClient and
bolt) and the web console: its set and counts, an Approve that says what and how many and
carries the count, the failed nodes named, and Stop the rest while it runs."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from bot.chat import cards
from bot.clock import FrozenClock
from bot.db import Database
from bot.sim import SimHandle
from bot.sim.cluster import RequestHold
from bot.worker import Worker
from tests.chat.slack_rig import Chat
from tests.console.rig import ConsoleRig, click, login
from tests.runbooks.rig import Rig
from tests.sim.waiting import eventually
from tests.support import server
from tests.support.fake_slack import FakeSlack
from tests.support.payloads import alert, notification

WAIT = 60.0
NODES = ["gpu-node-01", "gpu-node-02", "gpu-node-02-gone", "gpu-node-03"]
"""Sorted; the third is no node of the cluster, so its cordon fails."""
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
        stop_on: never
        with: {node: "{{ node }}"}
"""


@pytest.fixture
def chat(
    db: Database, clock: FrozenClock, tmp_path: Path, slack: FakeSlack, sim: SimHandle
) -> Chat:
    return Chat(db, clock, tmp_path, slack, sim, **OPEN)


def _open(rig: Rig, nodes: list[str]) -> int:
    body = notification([alert(host=n) for n in nodes], group={"alertname": "GPUXIDError"})
    result = rig.ingest(body)
    Worker(rig.db, rig.settings, rig.clock).propose()
    return result.incident


def _elements(chat: Chat) -> dict[str, dict[str, Any]]:
    card = chat.cards()[-1]
    return {
        element["action_id"]: element
        for block in card.blocks
        for element in block.get("elements", [])
        if "action_id" in element
    }


def _text(chat: Chat) -> str:
    """The card's texts: header, sections and context lines."""
    card = chat.cards()[-1]
    texts = [str(block.get("text", {}).get("text", "")) for block in card.blocks]
    texts += [
        str(element.get("text", ""))
        for block in card.blocks
        if block["type"] == "context"
        for element in block["elements"]
    ]
    return "\n".join(texts)


def test_slacks_approve_names_the_set_and_the_card_counts_the_nodes_and_names_failures(
    chat: Chat, client: httpx.Client, sim: SimHandle
) -> None:
    chat.rig.write(RUNBOOK)
    number = _open(chat.rig, NODES)
    chat.send_all()

    approve = _elements(chat)["step.approve"]
    assert approve["text"]["text"] == "Cordon 4 nodes"
    assert "You approve it on 4 nodes." in approve["confirm"]["text"]["text"]
    assert "step.stop" not in _elements(chat)
    assert "gpu-node-02-gone" not in _text(chat)  # the set is counted, not listed

    answer = chat.click(client, "step.approve", int(approve["value"]), "UALICE")
    assert answer.status_code == 200
    run = chat.rig.runs(number)["cordon"]
    assert run.state == "approved" and run.approved_count == 4
    approved = [e for e in chat.rig.log(number) if e.type == "step.approved"][-1]
    assert approved.data["count"] == 4 and approved.data["by"]["channel"] == "slack"

    chat.work()
    chat.send_all()
    assert chat.rig.runs(number)["cordon"].state == "failed"
    text = _text(chat)
    assert "done 3 · running 0 · failed 1 · left 0 (failed: gpu-node-02-gone)" in text
    assert {n for n, s in sim.cluster.snapshot().nodes.items() if s.unschedulable} == {
        "gpu-node-01",
        "gpu-node-02",
        "gpu-node-03",
    }


def test_slacks_stop_the_rest_shows_while_running_and_stops_as_the_clicker(
    chat: Chat, client: httpx.Client, sim: SimHandle
) -> None:
    chat.rig.write(RUNBOOK)
    holds: list[RequestHold] = [
        sim.cluster.hold_requests(f"/api/v1/nodes/{n}", method="GET") for n in NODES[:2]
    ]
    number = _open(chat.rig, NODES)
    chat.send_all()
    approve = _elements(chat)["step.approve"]
    assert chat.click(client, "step.approve", int(approve["value"]), "UALICE").status_code == 200
    assert chat.rig.runs(number)["cordon"].state == "approved"
    worker = Worker(
        chat.rig.db, chat.settings, chat.rig.clock, kube_factory=sim.api_client, owner="w1"
    )
    try:
        assert worker.run_once() is True
        assert all(hold.arrived.wait(WAIT) for hold in holds)
        chat.send_all()
        stop = _elements(chat)["step.stop"]
        assert stop["text"]["text"] == "Stop the rest"
        assert "none of the" in stop["confirm"]["text"]["text"]
        answer = chat.click(client, "step.stop", int(stop["value"]), "UBOB")
        assert answer.status_code == 200
    finally:
        for hold in holds:
            hold.release()
    assert worker.settle(WAIT) is True

    run = chat.rig.runs(number)["cordon"]
    assert run.state == "cancelled" and run.stop_requested_by is not None
    requested = next(e for e in chat.rig.log(number) if e.type == "step.stop_requested")
    assert requested.data["by"]["channel"] == "slack"
    chat.send_all()
    assert "step.stop" not in _elements(chat)
    assert "done 2 · running 0 · failed 0 · left 2" in _text(chat)


@pytest.fixture
def console(db: Database, clock: FrozenClock, tmp_path: Path) -> ConsoleRig:
    return ConsoleRig(db, clock, tmp_path, **OPEN)


@pytest.fixture
def browsers(console: ConsoleRig) -> Iterator[Callable[[], httpx.Client]]:
    opened: list[httpx.Client] = []
    with server.running(
        console.settings, console.db, console.clock, catalog=console.catalog()
    ) as url:

        def open_one() -> httpx.Client:
            opened.append(httpx.Client(base_url=url, timeout=10))
            return opened[-1]

        yield open_one
        for client in opened:
            client.close()


def test_the_consoles_approve_carries_the_count_and_its_page_lists_names_on_demand(
    console: ConsoleRig, browsers: Callable[[], httpx.Client], sim: SimHandle
) -> None:
    console.write(RUNBOOK)
    number = _open(console, NODES)
    client = browsers()
    csrf = login(client, "alice")
    page = client.get(f"/incidents/{number}").text
    run = console.runs(number)["cordon"].id
    assert '<input type="hidden" name="count" value="4">' in page
    assert ">Cordon 4 nodes</button>" in page
    assert '<details class="nodes"><summary>the 4 nodes</summary>' in page

    wrong = click(client, f"/incidents/{number}/steps/{run}/approve", csrf, count="3")
    assert wrong.json()["ok"] is False and "you named 3 nodes" in wrong.json()["flash"]
    right = click(client, f"/incidents/{number}/steps/{run}/approve", csrf, count="4")
    assert right.json()["ok"] is True, right.text
    assert console.runs(number)["cordon"].approved_count == 4


def test_the_consoles_stop_the_rest_button_stops_a_running_step(
    console: ConsoleRig, browsers: Callable[[], httpx.Client], sim: SimHandle
) -> None:
    console.write(RUNBOOK)
    holds = [sim.cluster.hold_requests(f"/api/v1/nodes/{n}", method="GET") for n in NODES[:2]]
    number = _open(console, NODES)
    console.approve(number, "cordon", "alice", count=4)
    worker = Worker(console.db, console.settings, console.clock, kube_factory=sim.api_client)
    client = browsers()
    csrf = login(client, "bob")
    try:
        assert worker.run_once() is True
        assert all(hold.arrived.wait(WAIT) for hold in holds)
        run = console.runs(number)["cordon"].id
        eventually(
            lambda: (
                "done 0 · running 2 · failed 0 · left 2" in client.get(f"/incidents/{number}").text
            ),
            timeout=WAIT,
            what="the page to count two nodes running",
        )
        page = client.get(f"/incidents/{number}").text
        assert f'action="/incidents/{number}/steps/{run}/stop"' in page
        stopped = click(client, f"/incidents/{number}/steps/{run}/stop", csrf)
        assert stopped.json()["ok"] is True, stopped.text
    finally:
        for hold in holds:
            hold.release()
    assert worker.settle(WAIT) is True
    ended = console.runs(number)["cordon"]
    assert ended.state == "cancelled" and ended.stop_requested_by == "bob"
    page = client.get(f"/incidents/{number}").text
    assert "stopped by bob" in page and '/stop"' not in page
    view = _card(console, number)
    assert view.each is not None and not view.stoppable
    assert (view.each.succeeded, view.each.left, view.each.stopped_by) == (2, 2, "bob")


def _card(rig: Rig, number: int) -> Any:
    with rig.db.session() as session:
        view = cards.card(session, number, rig.clock.now())
    return next(step for step in view.steps if step.step == "cordon")

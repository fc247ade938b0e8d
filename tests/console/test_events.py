"""The live timeline: `GET /incidents/N/events` streams new log entries as server-sent
events whose `id:` is the log sequence number, and resumes after `Last-Event-ID`."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import httpx

from tests.console.rig import ConsoleRig, click, login
from tests.runbooks.rig import TWO_STEPS

Browsers = Callable[[], httpx.Client]


def events(lines: Iterator[str]) -> Iterator[dict[str, Any]]:
    """The `log` events of a stream, as {id, data}; comments and `retry:` are skipped."""
    event: dict[str, Any] = {}
    for line in lines:
        if line.startswith("id: "):
            event["id"] = int(line[4:])
        elif line.startswith("event: "):
            event["event"] = line[7:]
        elif line.startswith("data: "):
            event["data"] = json.loads(line[6:])
        elif line == "" and "id" in event:
            yield event
            event = {}


def test_new_log_lines_arrive_with_their_sequence_as_id(
    rig: ConsoleRig, browsers: Browsers
) -> None:
    rig.write(TWO_STEPS)
    number = rig.fire()
    last = rig.log(number)[-1].seq
    watcher, actor = browsers(), browsers()
    login(watcher, "mallory")  # anyone logged in may watch
    csrf = login(actor, "alice")

    path = f"/incidents/{number}/events?after={last}"
    with watcher.stream("GET", path) as stream:
        assert stream.status_code == 200
        assert stream.headers["content-type"].startswith("text/event-stream")
        assert stream.headers["cache-control"] == "no-store"
        assert click(actor, f"/incidents/{number}/ack", csrf).json()["ok"] is True
        got = next(events(stream.iter_lines()))
    entry = rig.log(number)[-1]
    assert entry.type == "incident.acknowledged"
    assert got["id"] == entry.seq == last + 1
    assert got["event"] == "log"
    assert got["data"]["seq"] == entry.seq
    assert got["data"]["actor"] == "alice"
    assert got["data"]["type"] == "incident.acknowledged"
    assert got["data"]["summary"] == entry.summary
    assert got["data"]["time"] == entry.at.strftime("%H:%M:%S")


def test_a_reconnect_resumes_after_last_event_id(rig: ConsoleRig, browsers: Browsers) -> None:
    rig.write(TWO_STEPS)
    number = rig.fire()
    seqs = [entry.seq for entry in rig.log(number)]
    assert len(seqs) >= 3
    client = browsers()
    login(client, "bob")
    resume = {"Last-Event-ID": str(seqs[1])}
    # The header wins over ?after= (the browser keeps the URL it first opened).
    with client.stream("GET", f"/incidents/{number}/events?after=0", headers=resume) as stream:
        stream_events = events(stream.iter_lines())
        got = [next(stream_events)["id"] for _ in seqs[2:]]
    assert got == seqs[2:]


def test_the_stream_needs_a_login_and_a_real_incident(rig: ConsoleRig, browsers: Browsers) -> None:
    client = browsers()
    assert client.get("/incidents/1/events").status_code == 401
    login(client, "alice")
    answer = client.get("/incidents/999/events")
    assert answer.status_code == 404 and "INC-999" in answer.text

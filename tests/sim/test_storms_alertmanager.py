"""A row's cooling alerts, pushed as Prometheus pushes them into the real Alertmanager
(Debian's binary) whose route groups by alertname and row, arrive at a loopback webhook
receiver as one notification per alert name and row, holding every node of the row."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from bot.sim import fleet, storms
from tests.support import alertmanager as am

TOKEN = "storm-token"


class Receiver:
    """A webhook receiver on 127.0.0.1: records each notification's body and bearer."""

    def __init__(self) -> None:
        self.deliveries: list[tuple[str, dict[str, Any]]] = []
        self.lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length))
                with outer.lock:
                    outer.deliveries.append((self.headers.get("Authorization", ""), body))
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *_: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/webhook"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def groups(self) -> dict[tuple[str, str], dict[str, Any]]:
        """The latest notification of each (alertname, row) group."""
        with self.lock:
            return {
                (body["groupLabels"]["alertname"], body["groupLabels"]["row"]): body
                for _, body in self.deliveries
            }


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    found = Receiver()
    found.thread.start()
    yield found
    found.server.shutdown()
    found.server.server_close()


def test_a_rows_alerts_reach_the_receiver_grouped_by_alertname_and_row(
    receiver: Receiver, tmp_path: Path
) -> None:
    layout = fleet(40)
    alerts = storms.row_cooling(layout, "a") + storms.row_cooling(layout, "b")
    wanted = {
        ("GPUTemperatureHigh", "a"): 32 * 8,
        ("BMCTemperatureHigh", "a"): 32,
        ("GPUTemperatureHigh", "b"): 8 * 8,
        ("BMCTemperatureHigh", "b"): 8,
    }

    with am.running(receiver.url, TOKEN, tmp_path / "am", group_by=["alertname", "row"]) as manager:
        storms.push(manager.url, alerts, timeout=5.0)

        def complete() -> dict[tuple[str, str], dict[str, Any]] | None:
            found = receiver.groups()
            counts = {key: len(body["alerts"]) for key, body in found.items()}
            return found if counts == wanted else None

        groups = manager.wait_for(
            complete, "one notification per alert name and row, with all of its alerts"
        )

    assert {auth for auth, _ in receiver.deliveries} == {f"Bearer {TOKEN}"}
    row_a = groups[("GPUTemperatureHigh", "a")]
    assert row_a["status"] == "firing" and row_a["groupLabels"] == {
        "alertname": "GPUTemperatureHigh",
        "row": "a",
    }
    assert {a["labels"]["Hostname"] for a in row_a["alerts"]} == set(layout.rows["a"])
    assert row_a["commonLabels"]["severity"] == "warning"
    assert {a["labels"]["Hostname"] for a in groups[("BMCTemperatureHigh", "b")]["alerts"]} == set(
        layout.rows["b"]
    )

"""The real Alertmanager (Debian's 0.25 binary) as a subprocess on loopback.

`running()` starts it with clustering off, its own storage and a config whose one receiver
is a webhook to our bot with a bearer token, waits until it is ready, and always stops it.
Every wait here is bounded and its failure message carries the tail of Alertmanager's log.
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from tests.support.ci import skip_or_fail
from tests.support.payloads import iso

BINARY = Path("/usr/bin/prometheus-alertmanager")
RECEIVER = "runbook-bot"
HTTP_TIMEOUT = 5.0
WAIT_SECONDS = 20.0
POLL_SECONDS = 0.1

T = TypeVar("T")


def require_binary() -> None:
    """Skip locally, fail in CI, when Alertmanager is not installed."""
    if os.access(BINARY, os.X_OK):
        return
    skip_or_fail(
        f"Alertmanager not found at {BINARY}", install="apt-get install prometheus-alertmanager"
    )


def config(webhook_url: str, token: str, group_by: list[str] | None = None) -> dict[str, Any]:
    """An alertmanager.yml routing everything to our bot, grouped (by default by alertname
    and Hostname) and timed for tests."""
    return {
        "route": {
            "receiver": RECEIVER,
            "group_by": group_by or ["alertname", "Hostname"],
            "group_wait": "0s",
            "group_interval": "1s",
            "repeat_interval": "1h",
        },
        "receivers": [
            {
                "name": RECEIVER,
                "webhook_configs": [
                    {
                        "url": webhook_url,
                        "send_resolved": True,
                        "http_config": {"authorization": {"credentials": token}},
                    }
                ],
            }
        ],
    }


@dataclass
class Alertmanager:
    """A running Alertmanager: its base URL, process and log file."""

    url: str
    process: subprocess.Popen[bytes]
    log_path: Path

    def log_tail(self, lines: int = 40) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError as exc:
            return f"(no Alertmanager log: {exc})"
        # At debug level every group flush is logged each second; they would crowd out
        # the lines that explain a failure (received alerts, notify attempts, errors).
        kept = [line for line in text.splitlines() if "msg=flushing" not in line]
        tail = "\n".join(kept[-lines:])
        exited = self.process.poll()
        state = f"exited with code {exited}" if exited is not None else "still running"
        return f"Alertmanager {state}; last log lines:\n{tail}"

    def post_alerts(self, alerts: list[dict[str, Any]]) -> None:
        """POST alerts to Alertmanager's API, as Prometheus does."""
        response = httpx.post(f"{self.url}/api/v2/alerts", json=alerts, timeout=HTTP_TIMEOUT)
        assert response.status_code == 200, (
            f"Alertmanager refused the alerts: {response.status_code} {response.text}\n"
            + self.log_tail()
        )

    def metric(self, name: str, **labels: str) -> float:
        """The current value of one sample on Alertmanager's /metrics (0 when absent)."""
        response = httpx.get(f"{self.url}/metrics", timeout=HTTP_TIMEOUT)
        response.raise_for_status()
        return sample(response.text, name, **labels)

    def wait_for(self, check: Callable[[], T | None], what: str) -> T:
        """Poll `check` until it returns a truthy value; fail with the log tail if it never does."""
        deadline = time.monotonic() + WAIT_SECONDS
        while True:
            value = check()
            if value:
                return value
            if time.monotonic() > deadline:
                pytest.fail(
                    f"gave up after {WAIT_SECONDS:.0f} s waiting for {what}\n{self.log_tail()}",
                    pytrace=False,
                )
            time.sleep(POLL_SECONDS)


def sample(text: str, name: str, **labels: str) -> float:
    """The value of sample `name` whose labels include `labels`, from Prometheus text format."""
    for family in text_string_to_metric_families(text):
        for found in family.samples:
            if found.name == name and labels.items() <= found.labels.items():
                return float(found.value)
    return 0.0


def api_alert(
    labels: dict[str, str],
    annotations: dict[str, str],
    *,
    starts_at: datetime,
    ends_at: datetime | None = None,
) -> dict[str, Any]:
    """One alert as POSTed to /api/v2/alerts; an `ends_at` in the past resolves it."""
    alert: dict[str, Any] = {
        "labels": labels,
        "annotations": annotations,
        "startsAt": iso(starts_at),
        "generatorURL": "http://127.0.0.1:9090/graph?g0.expr=DCGM_FI_DEV_XID_ERRORS",
    }
    if ends_at is not None:
        alert["endsAt"] = iso(ends_at)
    return alert


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextmanager
def running(
    webhook_url: str,
    token: str,
    workdir: Path,
    *,
    group_by: list[str] | None = None,
    document: dict[str, Any] | None = None,
) -> Iterator[Alertmanager]:
    """Run Alertmanager on 127.0.0.1 notifying `webhook_url` with bearer `token`, its
    route grouping by `group_by` (default alertname and Hostname); or with `document` as
    its whole configuration."""
    require_binary()
    workdir.mkdir(parents=True, exist_ok=True)
    config_file = workdir / "alertmanager.yml"
    if document is None:
        document = config(webhook_url, token, group_by)
    config_file.write_text(yaml.safe_dump(document, sort_keys=False))
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    command = [
        str(BINARY),
        f"--config.file={config_file}",
        f"--storage.path={workdir / 'data'}",
        f"--web.listen-address=127.0.0.1:{port}",
        f"--web.external-url={url}",
        "--cluster.listen-address=",
        "--log.level=debug",
    ]
    log_path = workdir / "alertmanager.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT
        )
        manager = Alertmanager(url, process, log_path)
        try:
            _wait_ready(manager)
            yield manager
        finally:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)


def _wait_ready(manager: Alertmanager) -> None:
    def ready() -> bool:
        if manager.process.poll() is not None:
            pytest.fail(f"Alertmanager did not start\n{manager.log_tail()}", pytrace=False)
        try:
            response = httpx.get(f"{manager.url}/-/ready", timeout=1.0)
        except httpx.TransportError:
            return False
        return response.status_code == 200

    manager.wait_for(ready, "Alertmanager to answer GET /-/ready")

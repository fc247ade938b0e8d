"""The demo's scenario player: break the simulator as the scenario says, then fire its
alert through the bot's real webhook, as Alertmanager would.

`inject` is the fault (a GPU falls off the bus, a machine loses power, an IB port goes
down, a GPU heats up); the alert itself comes from `alerts.firing`. `Player` runs one
scenario or all five, `every` apart, in a thread, until stopped.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

import httpx

from bot.sim import alerts
from bot.sim.server import SimHandle

logger = logging.getLogger(__name__)
TIMEOUT = 10.0
"""Seconds one webhook post may take; the bot answers after a commit, in milliseconds."""


def inject(sim: SimHandle, name: str) -> str:
    """Break the simulated cluster as scenario `name` says; what was done."""
    e = alerts.get(name)
    cluster = sim.cluster
    if name == "xid79":
        assert e.node is not None and e.gpu is not None
        cluster.lose_gpu(e.node, e.gpu)
    elif name == "node-down":
        assert e.node is not None
        cluster.power(e.node, "ForceOff")  # the machine goes off, its node NotReady
    elif name == "ib-partition":
        assert e.node is not None
        cluster.set_ib_port(e.node, alerts.HCA, False)
    elif name == "overheating":
        assert e.node is not None and e.gpu is not None
        cluster.heat_gpu(e.node, e.gpu, alerts.HOT)
    # storage: the simulator has no NFS server to break; the alert alone starts the plan.
    return e.what


def firing(sim: SimHandle, name: str, now: datetime) -> dict[str, Any]:
    """Scenario `name`'s notification, with the GPU UUID the simulated card has."""
    e = alerts.get(name)
    uuid = None
    if e.node is not None and e.gpu is not None:
        uuid = cluster_uuid(sim, e.node, e.gpu)
    return alerts.firing(name, now=now, uuid=uuid)


def cluster_uuid(sim: SimHandle, node: str, gpu: int) -> str:
    return sim.cluster.machine(node).gpus[gpu].uuid


def post(client: httpx.Client, body: dict[str, Any], *, token: str | None = None) -> dict[str, Any]:
    """POST one notification to /webhooks/alertmanager; the bot's answer."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        response = client.post("/webhooks/alertmanager", json=body, headers=headers)
    except httpx.HTTPError as exc:
        raise RuntimeError(
            f"the bot's webhook at {client.base_url} did not answer ({exc}); is it running?"
        ) from exc
    if response.status_code != 200:
        raise RuntimeError(
            f"the bot's webhook refused the alert: HTTP {response.status_code} "
            f"{response.text[:300]}"
        )
    answer: dict[str, Any] = response.json()
    return answer


def expand(scenario: str) -> list[str]:
    """The scenarios `scenario` plays: one, all five, or none."""
    if scenario == "none":
        return []
    if scenario == "all":
        return alerts.names()
    alerts.get(scenario)  # an unknown name says which ones exist
    return [scenario]


class Player:
    """Plays `scenarios` against the bot at `url`: `delay` seconds after it starts (with
    `after_login`: after the first login to the console, `logged_in`), then one every
    `every` seconds. `said` gets one line per scenario played."""

    def __init__(
        self,
        sim: SimHandle,
        url: str,
        scenarios: Sequence[str],
        *,
        delay: float,
        every: float,
        token: str | None = None,
        said: Callable[[str], None] = print,
        after_login: bool = False,
    ) -> None:
        self.sim, self.url, self.scenarios = sim, url, list(scenarios)
        self.delay, self.every, self.token, self.said = delay, every, token, said
        self.stop = threading.Event()
        self._login = threading.Event()
        if not after_login:
            self._login.set()
        self._thread = threading.Thread(target=self._run, name="scenario-player", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def logged_in(self, user: str) -> None:
        """Someone logged in to the console: the countdown may start."""
        if not self._login.is_set():
            self._login.set()
            self.said(f"{user} logged in: the first scenario fires in {self.delay:.0f}s")

    def close(self) -> None:
        self.stop.set()
        self._login.set()
        self._thread.join(timeout=TIMEOUT + 1)

    def _run(self) -> None:
        self._login.wait()
        with httpx.Client(base_url=self.url, timeout=TIMEOUT) as client:
            wait = self.delay
            for name in self.scenarios:
                if self.stop.wait(wait):
                    return
                wait = self.every
                try:
                    what = inject(self.sim, name)
                    answer = post(
                        client, firing(self.sim, name, datetime.now(UTC)), token=self.token
                    )
                except Exception as exc:  # the demo goes on; say what failed
                    logger.error("scenario %s: %s", name, exc)
                    continue
                self.said(f"scenario {name}: {what}; alert fired -> {answer.get('incident')}")

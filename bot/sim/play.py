"""The demo's scenario player: break the simulator as a scenario says, wait until the
fault shows where the bot will look, then fire its alert through the bot's real webhook,
as Alertmanager would.

A domain scenario (`alerts.DOMAIN_SCENARIOS`, `row-cooling`) breaks every node of a
failure domain of the demo's hall (`presets.demo_hall`, a `Fleet`) as `storms` does, and
posts its alerts as an Alertmanager route grouping by `alertname` sends them: one
notification per alert name, in the order their rules fire, each naming every node.

The faults, and how each shows from outside, are `faults`'; the alert comes from
`alerts.firing`. `Player` plays one scenario or all five, in `alerts`' order, in a thread,
until stopped. Each scenario is played to its post before the next one breaks anything:
break, seen, posted, wait `every`, the next. So every run fires the same alerts in the
same order, each on a condition the bot can already read (a machine that is off and a
node that is NotReady, not one still powering off).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

import httpx

from bot.clock import Clock, SystemClock
from bot.sim import alerts, faults, storms
from bot.sim.fleet import Fleet
from bot.sim.server import SimHandle

logger = logging.getLogger(__name__)
TIMEOUT = 10.0
"""Seconds one webhook post may take; the bot answers after a commit, in milliseconds."""
SHOWS_WITHIN = 60.0
"""Seconds a fault may take to show (a machine powers off in 3 at the seed's pace)."""
LOOK_EVERY = 0.05
"""Seconds between two looks at a fault that does not show yet."""


class FaultHidden(RuntimeError):
    """A scenario's fault did not show in time (`Player.shows_within`): its alert was not
    posted."""


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
    """The scenarios `scenario` plays: one (of the five or a domain's), all five, or none."""
    if scenario == "none":
        return []
    if scenario == "all":
        return alerts.names()
    alerts.scenario(scenario)  # an unknown name says which ones exist
    return [scenario]


def domain_firing(fleet: Fleet, name: str, now: datetime) -> list[dict[str, Any]]:
    """Domain scenario `name`'s notifications: its alerts grouped by `alertname`, the
    first rule to fire first."""
    e = alerts.DOMAIN_SCENARIOS[name]
    built = _domain_alerts(fleet, e, now=now)
    bodies = storms.notifications(built, ["alertname"])
    order = {alertname: i for i, alertname in enumerate(e.alertnames)}
    return sorted(bodies, key=lambda b: order.get(b["groupLabels"].get("alertname", ""), 99))


def _domain_alerts(
    fleet: Fleet, e: alerts.DomainEmergency, *, now: datetime, sim: SimHandle | None = None
) -> list[dict[str, Any]]:
    if e.name == "row-cooling":
        return storms.row_cooling(fleet, e.domain, sim=sim, now=now)
    raise ValueError(f"the player cannot play the domain scenario {e.name!r}")


class Player:
    """Plays `scenarios` against the bot at `url`: `delay` seconds after it starts (with
    `after_login`: after the first login to the console, `logged_in`), then one every
    `every` seconds, each alert once its fault shows (at most `shows_within` seconds on
    `clock` after the break). `said` gets one line per scenario played. A domain scenario
    needs the `fleet` laid out on `sim` (`presets.demo_hall`)."""

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
        clock: Clock | None = None,
        shows_within: float = SHOWS_WITHIN,
        fleet: Fleet | None = None,
    ) -> None:
        self.sim, self.url, self.scenarios = sim, url, list(scenarios)
        self.fleet = fleet
        self.delay, self.every, self.token, self.said = delay, every, token, said
        self.clock: Clock = clock or SystemClock()
        self.shows_within = shows_within
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
        probe = faults.Probe(self.sim)
        try:
            with httpx.Client(base_url=self.url, timeout=TIMEOUT) as client:
                wait = self.delay
                for name in self.scenarios:
                    if self.stop.wait(wait):
                        return
                    wait = self.every
                    try:
                        line = self.play(name, client, probe)
                    except Exception as exc:  # the demo goes on; say what failed
                        logger.error("scenario %s: %s", name, exc)
                        continue
                    if line is None:
                        return  # stopped while waiting for the fault to show
                    self.said(line)
        finally:
            probe.close()

    def play(self, name: str, client: httpx.Client, probe: faults.Probe) -> str | None:
        """Break, wait until it shows, post: what happened, for the demo's output (None:
        stopped before the alert went out)."""
        if name in alerts.DOMAIN_SCENARIOS:
            return self.play_domain(name, client, probe)
        what = faults.inject(self.sim, name)
        seen = self.until_shown(probe, name)
        if seen is None:
            return None
        answer = post(client, firing(self.sim, name, self.clock.now()), token=self.token)
        shown = "; ".join(seen.seen)
        return f"scenario {name}: {what}; {shown}; alert fired -> {answer.get('incident')}"

    def play_domain(self, name: str, client: httpx.Client, probe: faults.Probe) -> str | None:
        """A failure domain's scenario: break each of its nodes, wait until every one shows
        it, post one notification per alert name."""
        fleet = self.fleet
        if fleet is None:
            raise ValueError(f"the scenario {name} needs the demo's hall (fleet=) to play")
        e = alerts.DOMAIN_SCENARIOS[name]
        nodes = fleet.members(e.level, e.domain)
        _domain_alerts(fleet, e, now=self.clock.now(), sim=self.sim)
        seen = self.until_shown(
            probe, name, look=lambda: faults.domain_sighting(probe, nodes, fleet.gpus)
        )
        if seen is None:
            return None
        numbers = []
        for body in domain_firing(fleet, name, self.clock.now()):
            answer = post(client, body, token=self.token)
            numbers.append(str(answer.get("incident")))
        posted = ", ".join(dict.fromkeys(numbers))
        return (
            f"scenario {name}: {e.what}; {len(nodes)} nodes of {e.level} {e.domain} read hot; "
            f"alerts fired -> {posted}"
        )

    def until_shown(
        self,
        probe: faults.Probe,
        name: str,
        *,
        look: Callable[[], faults.Sighting] | None = None,
    ) -> faults.Sighting | None:
        """Look at the fault (`look`, else the scenario's own sighting) until all of it
        shows; None if stopped meanwhile."""
        deadline = self.clock.monotonic() + self.shows_within
        while True:
            seen = look() if look is not None else faults.sighting(probe, name)
            if seen.complete:
                return seen
            if self.clock.monotonic() >= deadline:
                raise FaultHidden(
                    f"after {self.shows_within:g}s the simulator still does not show: "
                    f"{'; '.join(seen.missing)}; the alert was not posted"
                )
            self.clock.sleep(LOOK_EVERY)
            if self.stop.is_set():
                return None

"""The scenario player posts each alert only once its fault shows where the bot will read
it, and always in the same order. A webhook on loopback stands in for the bot: the moment
an alert arrives it reads the simulator (the Kubernetes API with the real client, the
BMCs over Redfish) and records what anyone reading it then would have seen.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator, Sized
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol

import httpx
import pytest
from kubernetes import client as k8s

from bot.clock import FrozenClock
from bot.sim import RedfishOptions, SimHandle, alerts, faults, presets, running, seed
from bot.sim import play as player
from tests.sim.waiting import eventually

pytestmark = pytest.mark.timeout(60)
SLOW = 0.2
"""The simulator's pace: a forced power-off takes 0.6 s, long enough to be caught early."""


@dataclass
class Witness:
    """What the simulator showed at the moment each alert arrived, in arrival order."""

    sim: SimHandle
    seen: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    def look(self, body: dict[str, Any]) -> None:
        labels = body["alerts"][0]["labels"]
        name = next(n for n, e in alerts.SCENARIOS.items() if e.alertname == labels["alertname"])
        node = alerts.get(name).node
        assert node is not None
        login = self.sim.redfish.options if self.sim.redfish else None
        assert login is not None
        with httpx.Client(
            base_url=f"{self.sim.redfish_url}/redfish/v1",
            auth=(login.username, login.password),
            timeout=5,
        ) as bmc:
            system = bmc.get(f"/Systems/{node}").json()
            thermal = bmc.get(f"/Chassis/{node}/Thermal").json()
        sensors = {t["Name"]: t for t in thermal["Temperatures"]}
        api = k8s.CoreV1Api(self.sim.api_client())
        conditions = api.read_node(node).status.conditions
        self.seen.append(
            (
                name,
                {
                    "ready": next(c.status for c in conditions if c.type == "Ready"),
                    "power": system["PowerState"],
                    "gpu5": (sensors["GPU5 Temp"].get("Status") or {}).get("State"),
                    "gpu3": sensors["GPU3 Temp"].get("ReadingCelsius"),
                    "events": [e.reason for e in api.list_namespaced_event("ml").items],
                    "ib_up": [p.up for p in self.sim.cluster.machine(node).ib_ports],
                },
            )
        )


class Looker(Protocol):
    seen: Sized

    def look(self, body: dict[str, Any]) -> None: ...


@contextmanager
def webhook(witness: Looker) -> Iterator[str]:
    """An HTTP server on a free loopback port that answers each alert as the bot would,
    after the witness has looked; its base URL."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 (http.server's name)
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            witness.look(body)
            answer = json.dumps({"incident": f"INC-{len(witness.seen)}"}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, *_: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


@contextmanager
def simulator() -> Iterator[SimHandle]:
    with running(
        seed(grace_seconds=1, startup_seconds=0.1),
        time_scale=SLOW,
        redfish=RedfishOptions("admin", "demo-bmc-pw"),
    ) as sim:
        yield sim


def test_all_fires_the_five_alerts_in_order_each_once_its_fault_shows_to_the_bot() -> None:
    said: list[str] = []
    with simulator() as sim, webhook(witness := Witness(sim)) as url:
        play = player.Player(sim, url, player.expand("all"), delay=0, every=0, said=said.append)
        play.start()
        eventually(lambda: len(said) == 5, timeout=30, what="five alerts posted")
        play.close()

    assert [name for name, _ in witness.seen] == alerts.names()
    seen = dict(witness.seen)
    # The machine was off and the node NotReady when KubeNodeNotReady arrived, not on its
    # way off (what the node-down runbook read before: "Ready=True", "powering off").
    assert (seen["node-down"]["ready"], seen["node-down"]["power"]) == ("False", "Off")
    assert seen["xid79"]["gpu5"] == "Absent"
    assert seen["ib-partition"]["ib_up"] == [True, False, True, True]  # mlx5_1 is down
    assert faults.MOUNT_FAILED in seen["storage"]["events"]
    assert seen["overheating"]["gpu3"] == alerts.HOT
    assert [line.split(":")[0] for line in said] == [f"scenario {n}" for n in alerts.names()]
    assert said[1].endswith(
        "the API reads gpu-node-04 Ready=False; its BMC reads PowerState Off; alert fired -> INC-2"
    )


def test_a_fault_that_does_not_show_in_time_is_not_posted_and_says_what_is_missing() -> None:
    clock = FrozenClock()
    with simulator() as sim, webhook(witness := Witness(sim)) as url:
        play = player.Player(sim, url, ["node-down"], delay=0, every=0, clock=clock, shows_within=1)
        probe = faults.Probe(sim)
        try:  # the machine was never switched off: the node stays Ready, the BMC On
            with pytest.raises(player.FaultHidden) as hidden:
                play.until_shown(probe, "node-down")
        finally:
            probe.close()

    assert str(hidden.value) == (
        "after 1s the simulator still does not show: the API reads gpu-node-04 Ready=True; "
        "its BMC reads PowerState On; the alert was not posted"
    )
    assert set(clock.slept) == {player.LOOK_EVERY}  # it looked again and again, on the clock
    assert sum(clock.slept) >= 1
    assert witness.seen == []


@dataclass
class RowWitness:
    """What the row's BMCs read when each notification of a domain scenario arrived."""

    sim: SimHandle
    seen: list[tuple[str, list[str], dict[str, list[float]]]] = field(default_factory=list)

    def look(self, body: dict[str, Any]) -> None:
        nodes = sorted({a["labels"]["Hostname"] for a in body["alerts"]})
        login = self.sim.redfish.options if self.sim.redfish else None
        assert login is not None
        with httpx.Client(
            base_url=f"{self.sim.redfish_url}/redfish/v1",
            auth=(login.username, login.password),
            timeout=5,
        ) as bmc:
            readings = {
                node: [
                    t["ReadingCelsius"]
                    for t in bmc.get(f"/Chassis/{node}/Thermal").json()["Temperatures"]
                ]
                for node in ("gpu-node-01", "gpu-node-02", "gpu-node-03")
            }
        self.seen.append((body["groupLabels"]["alertname"], nodes, readings))


def test_a_hot_row_posts_one_notification_per_alert_name_naming_both_machines_once_hot() -> None:
    hall = presets.demo_hall(grace_seconds=1, startup_seconds=0.1)
    said: list[str] = []
    with (
        running(
            hall.scenario, time_scale=SLOW, redfish=RedfishOptions("admin", "demo-bmc-pw")
        ) as sim,
        webhook(witness := RowWitness(sim)) as url,
    ):
        play = player.Player(
            sim, url, player.expand("row-cooling"), delay=0, every=0, said=said.append, fleet=hall
        )
        play.start()
        eventually(lambda: len(said) == 1, timeout=30, what="the row's alerts posted")
        play.close()

    # The BMCs' alarm first (its rule holds 2m, DCGM's 5m), then the GPUs'; each names the row.
    assert [(name, nodes) for name, nodes, _ in witness.seen] == [
        ("BMCTemperatureHigh", ["gpu-node-01", "gpu-node-02"]),
        ("GPUTemperatureHigh", ["gpu-node-01", "gpu-node-02"]),
    ]
    _, _, readings = witness.seen[0]
    # Inlet and eight GPUs: hot in row a when the first alert arrived, not in row b.
    assert readings["gpu-node-01"] == readings["gpu-node-02"] == [41.0] + [93.0] * 8
    assert max(readings["gpu-node-03"]) < faults.HOT_FROM
    assert said == [
        f"scenario row-cooling: {alerts.DOMAIN_SCENARIOS['row-cooling'].what}; 2 nodes of "
        "row a read hot; alerts fired -> INC-1, INC-2"
    ]


def test_a_domain_scenario_without_the_demos_hall_says_what_it_needs() -> None:
    with simulator() as sim:
        play = player.Player(sim, "http://127.0.0.1:9", ["row-cooling"], delay=0, every=0)
        probe = faults.Probe(sim)
        try:
            with (
                httpx.Client(base_url="http://127.0.0.1:9") as client,
                pytest.raises(
                    ValueError, match=r"the scenario row-cooling needs the demo's hall \(fleet=\)"
                ),
            ):
                play.play("row-cooling", client, probe)
        finally:
            probe.close()

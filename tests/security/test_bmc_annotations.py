"""Node annotations cannot redirect BMC credentials (issue 19, item 7).

A kubelet may annotate its own Node. Here a node of the simulated cluster is annotated
with a BMC address that is a listener recording every datagram it gets (on 127.0.0.2, a
different loopback address than the real BMC), and `bmc.power_status` runs through the
action registry with the real ipmitool: the listener never hears from the bot, whatever
the setting that refuses it. Annotated at the real BMC (ipmi_sim), inside
`bmc.allowed_networks`, with a profile that allows annotations, the read works.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bot.actions import ActionContext, Outcome, execute, registry
from bot.config import load_settings
from bot.errors import ConfigInvalid
from bot.sim import SimHandle, running, seed
from tests.sim.waiting import TIME_SCALE
from tests.support import ipmi_sim

pytestmark = pytest.mark.timeout(90)

NODE = "gpu-node-03"
CANARY = "Canary-Pw-71c2e0aa"


class Trap:
    """A UDP listener on 127.0.0.2 that records every datagram sent to it."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.2", 0))
        self.sock.settimeout(0.1)
        self.port: int = self.sock.getsockname()[1]
        self.received: list[bytes] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._listen, daemon=True)
        self._thread.start()

    def _listen(self) -> None:
        while not self._stop.is_set():
            try:
                data, _ = self.sock.recvfrom(65535)
            except TimeoutError:
                continue
            self.received.append(data)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self.sock.close()


@pytest.fixture
def trap() -> Iterator[Trap]:
    listener = Trap()
    try:
        yield listener
    finally:
        listener.close()


@pytest.fixture(scope="module")
def bmc_sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ipmi_sim.SimBmc]:
    with ipmi_sim.running(tmp_path_factory.mktemp("ipmi"), password=CANARY) as bmc:
        yield bmc


@pytest.fixture(scope="module")
def cluster() -> Iterator[SimHandle]:
    with running(seed(), time_scale=TIME_SCALE) as handle:
        yield handle


def _annotate(cluster: SimHandle, address: str, port: int) -> None:
    from kubernetes import client

    notes = {"protocol": "ipmi", "address": address, "port": str(port), "credentials": "ops"}
    body = {"metadata": {"annotations": {f"runbook-bot/bmc-{k}": v for k, v in notes.items()}}}
    client.CoreV1Api(cluster.api_client()).patch_node(
        NODE, body, _content_type="application/merge-patch+json"
    )


def _power_status(cluster: SimHandle, tmp_path: Path, username: str, **bmc: Any) -> Outcome:
    password = tmp_path / "password"
    password.write_text(CANARY + "\n")
    profile = {"username": username, "password_file": str(password)}
    profile.update(bmc.pop("profile", {}))
    settings = load_settings(bmc={"credentials": {"ops": profile}, "timeout": "8s", **bmc})
    ctx = ActionContext(actor="alice", settings=settings, kube_factory=cluster.api_client)
    return execute(registry.get("bmc.power_status"), {"node": NODE}, ctx)


def _refusal(outcome: Outcome) -> str:
    assert not outcome.result.ok, outcome.result
    return outcome.result.summary


def test_an_annotated_bmc_outside_the_allowed_networks_never_receives_the_login(
    cluster: SimHandle, bmc_sim: ipmi_sim.SimBmc, trap: Trap, tmp_path: Path
) -> None:
    _annotate(cluster, "127.0.0.2", trap.port)
    allowing = {"annotations": True, "profile": {"allow_annotations": True}}

    # Off by default: the annotation is not even read.
    default = _refusal(_power_status(cluster, tmp_path, bmc_sim.username))
    assert "bmc.annotations: false" in default
    # On, the address outside the networks: refused, naming node, address and setting.
    outside = _refusal(
        _power_status(
            cluster, tmp_path, bmc_sim.username, allowed_networks=["127.0.0.1/32"], **allowing
        )
    )
    assert NODE in outside and "127.0.0.2" in outside and "bmc.allowed_networks" in outside
    # Inside the networks, but the profile does not allow annotated nodes: refused.
    not_allowed = _refusal(
        _power_status(
            cluster,
            tmp_path,
            bmc_sim.username,
            annotations=True,
            allowed_networks=["127.0.0.0/8"],
        )
    )
    assert NODE in not_allowed and "bmc.credentials.ops.allow_annotations" in not_allowed

    assert trap.received == [], "the bot sent packets to the annotated address"
    assert CANARY not in default + outside + not_allowed


def test_an_annotated_hostname_is_refused_not_resolved(
    cluster: SimHandle, bmc_sim: ipmi_sim.SimBmc, tmp_path: Path
) -> None:
    _annotate(cluster, "localhost", bmc_sim.port)
    refused = _refusal(
        _power_status(
            cluster,
            tmp_path,
            bmc_sim.username,
            annotations=True,
            allowed_networks=["127.0.0.0/8"],
            profile={"allow_annotations": True},
        )
    )
    assert "'localhost'" in refused and "hostnames are not resolved" in refused


def test_an_annotated_bmc_inside_the_networks_with_a_profile_that_allows_it_is_read(
    cluster: SimHandle, bmc_sim: ipmi_sim.SimBmc, tmp_path: Path
) -> None:
    bmc_sim.set_power(True)
    _annotate(cluster, bmc_sim.address, bmc_sim.port)
    outcome = _power_status(
        cluster,
        tmp_path,
        bmc_sim.username,
        annotations=True,
        allowed_networks=["127.0.0.1/32"],
        profile={"allow_annotations": True},
    )
    assert outcome.result.ok, outcome.result
    assert outcome.result.power == "on"  # type: ignore[attr-defined]


def test_annotations_without_allowed_networks_stop_at_start() -> None:
    with pytest.raises(ConfigInvalid, match="allowed_networks"):
        load_settings(bmc={"annotations": True})

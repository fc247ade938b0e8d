"""Fixtures for BMC action tests: the simulated cluster with Redfish BMCs over HTTPS (a
trustme CA), settings that point the inventory at them, and a runner for actions."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import trustme

from bot.actions import ActionContext, Outcome, execute, registry
from bot.clock import FrozenClock
from bot.config import Settings, load_settings
from bot.sim import SimHandle, running, seed
from bot.sim.redfish import RedfishOptions
from tests.sim.waiting import TIME_SCALE

CANARY = "Canary-Pw-4f1d2b9e"
"""The BMC password in these tests: recognisable, so a leak anywhere is found."""


@dataclass(frozen=True)
class Tls:
    ca_file: Path
    certfile: Path
    keyfile: Path


@pytest.fixture(scope="session")
def redfish_tls(tmp_path_factory: pytest.TempPathFactory) -> Tls:
    where = tmp_path_factory.mktemp("redfish-tls")
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1")
    cert.private_key_pem.write_to_path(str(where / "key.pem"))
    (where / "cert.pem").write_bytes(b"".join(pem.bytes() for pem in cert.cert_chain_pems))
    ca.cert_pem.write_to_path(str(where / "ca.pem"))
    return Tls(where / "ca.pem", where / "cert.pem", where / "key.pem")


@pytest.fixture
def redfish_sim(redfish_tls: Tls) -> Iterator[SimHandle]:
    options = RedfishOptions(
        "admin", CANARY, certfile=redfish_tls.certfile, keyfile=redfish_tls.keyfile
    )
    with running(seed(), time_scale=TIME_SCALE, redfish=options) as handle:
        yield handle


@pytest.fixture
def bmc_settings(redfish_sim: SimHandle, redfish_tls: Tls, tmp_path: Path) -> Settings:
    bmc = redfish_sim.bmc_settings(tmp_path / "bmc-password", ca_file=redfish_tls.ca_file)
    bmc.update(timeout="2s", power_timeout="10s", attempts=3)
    return load_settings(bmc=bmc)


@dataclass
class Seen:
    """What actions reported: progress lines and incident-log records."""

    progress: list[str] = field(default_factory=list)
    records: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)


RunBmcAction = Callable[..., Outcome]


@pytest.fixture
def seen() -> Seen:
    return Seen()


@pytest.fixture
def run_bmc(redfish_sim: SimHandle, bmc_settings: Settings, seen: Seen) -> RunBmcAction:
    """run_bmc("bmc.power_off", node=..., settings_=..., dry_run_=...) -> Outcome."""

    def run(
        name: str, *, settings_: Settings | None = None, dry_run_: bool = False, **raw: Any
    ) -> Outcome:
        ctx = ActionContext(
            actor="alice",
            settings=settings_ or bmc_settings,
            clock=FrozenClock(datetime(2026, 11, 30, 3, 10, tzinfo=UTC)),
            incident="INC-7",
            dry_run=dry_run_,
            kube_factory=redfish_sim.api_client,
            progress=seen.progress.append,
            record=lambda kind, summary, data: seen.records.append((kind, summary, data)),
        )
        return execute(registry.get(name), raw, ctx)

    return run


def cordon(sim: SimHandle, node: str) -> None:
    """Cordon `node` as a runbook does before powering it off (k8s.cordon's patch)."""
    from kubernetes import client

    client.CoreV1Api(sim.api_client()).patch_node(
        node, {"spec": {"unschedulable": True}}, _content_type="application/merge-patch+json"
    )

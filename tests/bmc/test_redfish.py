"""`RedfishBmc` against the simulated cluster's BMCs over HTTPS with a test CA: power
changes that move the Kubernetes nodes, the SEL, sensors, firmware, and one clear error
per failure (a 500, a slow BMC, an untrusted certificate, a wrong password)."""

from __future__ import annotations

import base64
import logging
import socket
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
import trustme
from pydantic import SecretStr

from bot.actions import ActionContext
from bot.actions.bmc import inventory
from bot.actions.bmc.protocol import BmcTarget, Credentials, PowerState
from bot.actions.bmc.redfish import RedfishBmc
from bot.config import load_settings
from bot.errors import CredentialsRefused, PermanentActionError, TemporaryActionError
from bot.sim import SimHandle, running, seed
from bot.sim.redfish import RedfishOptions
from tests.sim.waiting import TIME_SCALE, eventually

USER = "admin"
PASSWORD = "Rf-pa55-7c1e9d"  # recognisable, so that a leak anywhere is found
NODE = "gpu-node-01"


@dataclass(frozen=True)
class Pki:
    ca_file: Path
    certfile: Path
    keyfile: Path
    other_ca_file: Path


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    where = tmp_path_factory.mktemp("pki")
    ca, stranger = trustme.CA(), trustme.CA()
    cert = ca.issue_cert("127.0.0.1")
    cert.private_key_pem.write_to_path(str(where / "key.pem"))
    (where / "cert.pem").write_bytes(b"".join(pem.bytes() for pem in cert.cert_chain_pems))
    ca.cert_pem.write_to_path(str(where / "ca.pem"))
    stranger.cert_pem.write_to_path(str(where / "other-ca.pem"))
    return Pki(where / "ca.pem", where / "cert.pem", where / "key.pem", where / "other-ca.pem")


@pytest.fixture
def sim(pki: Pki) -> Iterator[SimHandle]:
    options = RedfishOptions(USER, PASSWORD, certfile=pki.certfile, keyfile=pki.keyfile)
    with running(seed(), time_scale=TIME_SCALE, redfish=options) as handle:
        yield handle


Connect = Callable[..., RedfishBmc]


@pytest.fixture
def connect(sim: SimHandle, pki: Pki) -> Iterator[Connect]:
    """connect(node, password=..., timeout=..., **BmcTarget fields) -> an open RedfishBmc."""
    opened: list[RedfishBmc] = []

    def open_bmc(
        node: str = NODE, *, password: str = PASSWORD, timeout: float = 5.0, **fields: Any
    ) -> RedfishBmc:
        values: dict[str, Any] = {
            "address": "127.0.0.1",
            "port": sim.redfish_port,
            "system": node,
            "ca_file": pki.ca_file,
            **fields,
        }
        target = BmcTarget(node=node, protocol="redfish", **values)
        bmc = RedfishBmc(target, Credentials(USER, SecretStr(password)), timeout=timeout)
        opened.append(bmc)
        return bmc

    yield open_bmc
    for bmc in opened:
        bmc.close()


def _ready(sim: SimHandle, node: str) -> bool:
    return sim.cluster.snapshot().nodes[node].ready


def _events(sim: SimHandle, node: str = NODE) -> list[str]:
    return [record.event for record in sim.cluster.machine(node).sel]


def _power_off(sim: SimHandle, node: str) -> None:
    sim.cluster.power(node, "ForceOff")
    eventually(lambda: sim.cluster.machine(node).power == "Off", what=f"{node} off")
    eventually(lambda: not _ready(sim, node), what=f"{node} NotReady")


# -- power --------------------------------------------------------------------------------


def test_power_state_is_what_the_bmc_reports(sim: SimHandle, connect: Connect) -> None:
    _power_off(sim, "gpu-node-02")

    assert connect(NODE).power_state() == PowerState.ON
    assert connect("gpu-node-02").power_state() == PowerState.OFF


def test_without_a_system_id_the_first_member_of_systems_is_used(
    sim: SimHandle, connect: Connect
) -> None:
    bmc = connect("gpu-node-01", system=None)

    assert bmc.info().details["system"] == "gpu-node-01"
    assert len(sim.bmc_requests("GET", "/redfish/v1/Systems")) == 1


def test_off_is_reported_after_the_delay_and_the_kubernetes_node_goes_not_ready(
    sim: SimHandle, connect: Connect
) -> None:
    bmc = connect()

    bmc.request_power("off")

    eventually(lambda: bmc.power_state() == PowerState.OFF, what="the BMC to report Off")
    eventually(lambda: not _ready(sim, NODE), what="the node to go NotReady")
    assert _events(sim)[-2:] == ["S5/G2: soft-off (ForceOff)", "Power off/down"]
    assert [r.status for r in sim.bmc_requests("POST")] == [204]
    assert _ready(sim, "gpu-node-02")


def test_on_powers_the_machine_up_and_the_node_is_ready_again_after_boot(
    sim: SimHandle, connect: Connect
) -> None:
    _power_off(sim, NODE)
    bmc = connect()

    bmc.request_power("on")

    eventually(lambda: bmc.power_state() == PowerState.ON, what="the BMC to report On")
    eventually(lambda: _ready(sim, NODE), what="the node Ready after boot")
    assert sim.cluster.machine(NODE).resets == 1
    assert _events(sim)[-2:] == ["S0/G0: working (power on requested)", "Power on"]


def test_soft_off_asks_for_a_graceful_shutdown(sim: SimHandle, connect: Connect) -> None:
    bmc = connect()

    bmc.request_power("soft_off")

    eventually(lambda: bmc.power_state() == PowerState.OFF, what="the BMC to report Off")
    assert "S5/G2: soft-off (GracefulShutdown)" in _events(sim)


def test_cycle_turns_the_machine_off_and_on_again(sim: SimHandle, connect: Connect) -> None:
    bmc = connect()

    bmc.request_power("cycle")

    eventually(lambda: sim.cluster.machine(NODE).resets == 1, what="the machine back on")
    assert bmc.power_state() == PowerState.ON
    assert _events(sim)[-3:] == ["PowerCycle requested", "Power off/down", "Power on"]


def test_cycle_falls_back_to_force_restart_when_the_bmc_lists_no_power_cycle(
    sim: SimHandle, connect: Connect
) -> None:
    assert sim.redfish is not None
    sim.redfish.limit_reset_types(NODE, ["On", "ForceOff", "GracefulShutdown", "ForceRestart"])

    connect().request_power("cycle")

    assert "ForceRestart requested" in _events(sim)
    eventually(lambda: sim.cluster.machine(NODE).resets == 1, what="the machine back on")


def test_cycle_is_refused_before_any_request_when_the_bmc_offers_no_restart(
    sim: SimHandle, connect: Connect
) -> None:
    assert sim.redfish is not None
    sim.redfish.limit_reset_types(NODE, ["On", "ForceOff"])

    with pytest.raises(PermanentActionError, match="allows On, ForceOff, not PowerCycle or Force"):
        connect().request_power("cycle")

    assert sim.bmc_requests("POST") == []
    assert sim.cluster.machine(NODE).power == "On"


def test_on_while_already_powering_on_is_accepted_but_cycling_an_off_machine_is_not(
    sim: SimHandle, connect: Connect
) -> None:
    _power_off(sim, NODE)
    sim.cluster.power(NODE, "On")
    bmc = connect()

    bmc.request_power("on")  # the BMC answers 409: already on, or on the way
    _power_off(sim, "gpu-node-02")
    with pytest.raises(PermanentActionError, match="refused ResetType PowerCycle .* is off"):
        connect("gpu-node-02").request_power("cycle")

    assert [r.status for r in sim.bmc_requests("POST")] == [409, 409]
    eventually(lambda: bmc.power_state() == PowerState.ON, what="the BMC to report On")


# -- reads --------------------------------------------------------------------------------


def test_sel_entries_are_parsed_oldest_first_and_show_the_power_events(
    sim: SimHandle, connect: Connect
) -> None:
    bmc = connect()
    bmc.request_power("off")
    eventually(lambda: bmc.power_state() == PowerState.OFF, what="the BMC to report Off")

    entries = bmc.sel(3)

    assert [e.id for e in entries] == ["1", "2", "3"]
    first, request, off = entries
    assert (first.sensor, first.event) == (
        "System Event #0x01",
        "System Event: Initialization completed",
    )
    assert (request.sensor, request.event) == (
        "System ACPI PowerState #0x03",
        "ACPI State: S5/G2: soft-off (ForceOff)",
    )
    assert (off.sensor, off.event, off.direction, off.severity) == (
        "PowerUnit #0x02",
        "Power Unit: Power off/down",
        "Asserted",
        "ok",
    )
    times = [datetime.fromisoformat(e.time) for e in entries]
    assert times == sorted(times)
    assert all(t.tzinfo is not None for t in times)
    assert bmc.sel(1) == [off]
    assert bmc.sel(0) == []


def test_sel_follows_the_pages_and_keeps_only_the_newest(sim: SimHandle, connect: Connect) -> None:
    for step in range(64):
        sim.cluster.heat_gpu(NODE, step % 8, 86.0 + step % 5)  # 64 more entries: 65 in all

    entries = connect().sel(5)

    assert [e.id for e in entries] == ["61", "62", "63", "64", "65"]
    assert {e.severity for e in entries} == {"critical"}
    assert entries[-1].sensor == "Temperature #0x37"
    pages = [r.query for r in sim.bmc_requests("GET", "*/SEL/Entries")]
    assert pages == ["", "$skip=50"]


def test_sel_is_found_under_the_system_when_the_manager_has_none(
    sim: SimHandle, connect: Connect
) -> None:
    assert sim.redfish is not None
    sim.redfish.move_sel_to_system(NODE)

    entries = connect().sel(10)

    assert [e.event for e in entries] == ["System Event: Initialization completed"]
    assert len(sim.bmc_requests("GET", f"/redfish/v1/Systems/{NODE}/LogServices/SEL/Entries")) == 1


def test_sensors_report_every_kind_and_a_hot_gpu_as_critical(
    sim: SimHandle, connect: Connect
) -> None:
    sim.cluster.heat_gpu(NODE, 3, 92.0)
    sim.cluster.lose_gpu(NODE, 5)

    readings = {r.name: r for r in connect().sensors()}

    assert {r.kind for r in readings.values()} == {"temperature", "fan", "power", "voltage"}
    hot = readings["GPU3 Temp"]
    assert (hot.kind, hot.value, hot.unit, hot.status) == (
        "temperature",
        92.0,
        "degrees C",
        "critical",
    )
    assert (readings["GPU0 Temp"].value, readings["GPU0 Temp"].status) == (34.0, "ok")
    assert (readings["GPU5 Temp"].value, readings["GPU5 Temp"].status) == (None, "na")
    assert (readings["FAN1"].value, readings["FAN1"].unit, readings["FAN1"].status) == (
        9800.0,
        "RPM",
        "ok",
    )
    power = readings["System Input Power"]
    assert (power.kind, power.value, power.unit) == ("power", 1800.0, "Watts")
    assert (readings["P12V"].kind, readings["P12V"].unit, readings["P12V"].status) == (
        "voltage",
        "Volts",
        "ok",
    )


def test_info_reports_the_firmware_and_the_system(connect: Connect) -> None:
    info = connect().info()

    assert (info.firmware, info.manufacturer, info.model) == (
        "1.10.2",
        "Supermicro",
        "SYS-821GE-TNHR",
    )
    assert info.details["manager_type"] == "BMC"
    assert info.details["power_state"] == "On"


def test_the_sim_bmc_settings_open_a_working_bmc_through_the_inventory(
    sim: SimHandle, pki: Pki, tmp_path: Path
) -> None:
    bmc_setting = sim.bmc_settings(tmp_path / "bmc-password", ca_file=pki.ca_file)
    ctx = ActionContext(actor="alice", settings=load_settings(bmc=bmc_setting))

    bmc = inventory.open_bmc(ctx, "gpu-node-03")
    try:
        assert isinstance(bmc, RedfishBmc)
        assert bmc.power_state() == PowerState.ON
    finally:
        bmc.close()
    assert [r.path for r in sim.bmc_requests()] == ["/redfish/v1/Systems/gpu-node-03"]


# -- failures -----------------------------------------------------------------------------


def test_a_500_is_temporary_names_the_bmc_and_is_not_retried_here(
    sim: SimHandle, connect: Connect
) -> None:
    bmc = connect()
    sim.fail_bmc(NODE, times=1, status=500)

    with pytest.raises(TemporaryActionError) as caught:
        bmc.power_state()

    assert bmc.target.where() in str(caught.value)
    assert "HTTP 500" in str(caught.value)
    assert [r.status for r in sim.bmc_requests()] == [500]
    assert bmc.power_state() == PowerState.ON


def test_a_bmc_slower_than_the_timeout_is_temporary_and_says_so(
    sim: SimHandle, connect: Connect
) -> None:
    sim.slow_bmc(NODE, 5.0)
    bmc = connect(timeout=0.2)

    with pytest.raises(
        TemporaryActionError, match=r"did not answer GET .* within 0.2 s \(bmc\.timeout\)"
    ):
        bmc.power_state()


def test_a_refused_connection_is_temporary(connect: Connect) -> None:
    with socket.socket() as closed:  # bound, never listening: the kernel refuses
        closed.bind(("127.0.0.1", 0))
        bmc = connect(port=closed.getsockname()[1])

        with pytest.raises(TemporaryActionError, match="cannot connect to redfish BMC 127.0.0.1"):
            bmc.power_state()


def test_a_certificate_from_another_ca_is_permanent_and_names_ca_file(
    pki: Pki, connect: Connect
) -> None:
    with pytest.raises(PermanentActionError) as caught:
        connect(ca_file=pki.other_ca_file).power_state()

    message = str(caught.value)
    assert "is not trusted by the CA in" in message
    assert str(pki.other_ca_file) in message
    assert f"set bmc.nodes.{NODE}.ca_file to the BMC's CA" in message


def test_without_verification_a_lab_bmc_answers_over_its_self_made_certificate(
    connect: Connect,
) -> None:
    assert connect(ca_file=None, verify_tls=False).power_state() == PowerState.ON


def test_an_unreadable_ca_file_is_permanent(connect: Connect, tmp_path: Path) -> None:
    with pytest.raises(PermanentActionError, match="cannot load the CA certificate .*ca_file"):
        connect(ca_file=tmp_path / "missing.pem")


def test_a_wrong_password_is_a_credentials_refusal_naming_the_profile_never_a_password(
    connect: Connect, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    wrong = "Wrong-pa55-31b7"

    with pytest.raises(CredentialsRefused) as caught:
        connect(password=wrong).power_state()

    message = str(caught.value)
    assert caught.value.kind == "credentials"
    assert f"of {NODE} refused the login of credentials profile 'default' (HTTP 401" in message
    assert message.endswith("check its user and password in bmc.credentials")
    for secret in (wrong, PASSWORD):
        assert secret not in message
        assert secret not in caplog.text


def test_an_unknown_system_id_is_permanent_and_points_at_the_setting(connect: Connect) -> None:
    with pytest.raises(PermanentActionError, match=f"bmc.nodes.{NODE}.system"):
        connect(system="no-such-system").power_state()


def test_no_log_line_holds_the_password_or_the_authorization_header(
    connect: Connect, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    caplog.set_level(logging.DEBUG, logger="httpx")  # the CLI quiets it; here we want it
    bmc = connect()

    bmc.power_state()
    bmc.sel(5)
    bmc.sensors()
    bmc.info()
    bmc.request_power("off")

    header = base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
    loggers = {record.name for record in caplog.records}
    assert {"bot.actions.bmc.redfish", "httpx"} <= loggers  # both did log, at DEBUG and INFO
    assert PASSWORD not in caplog.text
    assert header not in caplog.text
    assert "authorization" not in caplog.text.lower()


# -- answers that are not Redfish (narrow: one canned HTTP answer each) --------------------


def _canned(
    handler: Callable[[httpx.Request], httpx.Response], system: str | None = "1"
) -> RedfishBmc:
    target = BmcTarget(node=NODE, protocol="redfish", address="10.0.8.11", system=system)
    return RedfishBmc(
        target,
        Credentials(USER, SecretStr(PASSWORD)),
        timeout=1,
        transport=httpx.MockTransport(handler),
    )


def test_an_answer_that_is_not_json_is_permanent() -> None:
    with (
        _canned(lambda _: httpx.Response(200, text="<html>login</html>")) as bmc,
        pytest.raises(
            PermanentActionError, match="/redfish/v1/Systems/1 with something that is not Redfish"
        ),
    ):
        bmc.power_state()


def test_a_503_is_temporary_with_the_retry_after_delay() -> None:
    busy = httpx.Response(503, headers={"Retry-After": "7"}, json={"error": {"message": "busy"}})
    with _canned(lambda _: busy) as bmc, pytest.raises(TemporaryActionError) as caught:
        bmc.power_state()

    assert caught.value.delay == 7.0
    assert "HTTP 503 to GET /redfish/v1/Systems/1: busy" in str(caught.value)


def test_reset_types_come_from_action_info_when_the_action_lists_none() -> None:
    posted: list[Any] = []

    def answer(request: httpx.Request) -> httpx.Response:
        if request.method == "POST":
            posted.append((request.url.path, request.content))
            return httpx.Response(204)
        if request.url.path.endswith("/ResetActionInfo"):
            values = ["On", "ForceOff", "ForceRestart"]
            return httpx.Response(
                200, json={"Parameters": [{"Name": "ResetType", "AllowableValues": values}]}
            )
        action = {
            "target": "/redfish/v1/Systems/1/Actions/ComputerSystem.Reset",
            "@Redfish.ActionInfo": "/redfish/v1/Systems/1/ResetActionInfo",
        }
        return httpx.Response(200, json={"Actions": {"#ComputerSystem.Reset": action}})

    with _canned(answer) as bmc:
        bmc.request_power("cycle")

    assert posted == [
        ("/redfish/v1/Systems/1/Actions/ComputerSystem.Reset", b'{"ResetType":"ForceRestart"}')
    ]


def test_links_that_leave_the_bmc_are_not_followed_with_the_login() -> None:
    hosts: list[str] = []

    def answer(request: httpx.Request) -> httpx.Response:
        hosts.append(request.url.host)
        member = {"@odata.id": "https://collector.example/redfish/v1/Systems/1"}
        return httpx.Response(200, json={"Members": [member]})

    with (
        _canned(answer, system=None) as bmc,
        pytest.raises(
            PermanentActionError, match="links to https://collector.example/.*, off the BMC"
        ),
    ):
        bmc.power_state()

    assert hosts == ["10.0.8.11"]

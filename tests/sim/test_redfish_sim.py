"""The simulated BMCs' Redfish tree, read with plain httpx: DMTF-shaped documents, the
login, resets that move the machines (and their nodes) with the cluster's time scale, and
the fault hooks tests use."""

from __future__ import annotations

import stat
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from bot.config import BmcSettings
from bot.sim import SimHandle, running, seed
from bot.sim.redfish import RedfishOptions
from bot.sim.scenario import Hardware
from tests.sim.waiting import TIME_SCALE, eventually

USER, PASSWORD = "admin", "sim-Redfish-pw"
NODE = "gpu-node-01"
SYSTEM = f"/redfish/v1/Systems/{NODE}"


@pytest.fixture
def bmcs() -> Iterator[SimHandle]:
    with running(seed(), time_scale=TIME_SCALE, redfish=RedfishOptions(USER, PASSWORD)) as sim:
        yield sim


@pytest.fixture
def http(bmcs: SimHandle) -> Iterator[httpx.Client]:
    assert bmcs.redfish_url is not None
    with httpx.Client(base_url=bmcs.redfish_url, auth=(USER, PASSWORD), timeout=5) as client:
        yield client


def _get(http: httpx.Client, path: str) -> dict[str, Any]:
    response = http.get(path)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "application/json"
    body: dict[str, Any] = response.json()
    assert body["@odata.id"] == path.split("?")[0]
    return body


def _message_id(response: httpx.Response) -> str:
    error = response.json()["error"]
    assert error["code"].startswith("Base.1.")
    message_id: str = error["@Message.ExtendedInfo"][0]["MessageId"]
    return message_id


def _reset(http: httpx.Client, body: Any, node: str = NODE) -> httpx.Response:
    return http.post(f"/redfish/v1/Systems/{node}/Actions/ComputerSystem.Reset", json=body)


def test_the_service_root_is_open_on_loopback_and_links_the_collections(
    bmcs: SimHandle,
) -> None:
    assert bmcs.redfish_url == f"http://127.0.0.1:{bmcs.redfish_port}"
    response = httpx.get(f"{bmcs.redfish_url}/redfish/v1", timeout=5)

    assert response.status_code == 200
    assert response.headers["OData-Version"] == "4.0"
    root = response.json()
    assert root["@odata.type"].startswith("#ServiceRoot.v1_")
    assert root["RedfishVersion"].startswith("1.")
    assert {root[k]["@odata.id"] for k in ("Systems", "Managers", "Chassis")} == {
        "/redfish/v1/Systems",
        "/redfish/v1/Managers",
        "/redfish/v1/Chassis",
    }


def test_everything_but_the_root_wants_the_basic_auth_login(bmcs: SimHandle) -> None:
    base = bmcs.redfish_url
    anonymous = httpx.get(f"{base}{SYSTEM}", timeout=5)
    wrong = httpx.get(f"{base}{SYSTEM}", auth=(USER, "not-it"), timeout=5)
    wrong_user = httpx.get(f"{base}{SYSTEM}", auth=("root", PASSWORD), timeout=5)
    reset = httpx.post(f"{base}{SYSTEM}/Actions/ComputerSystem.Reset", json={}, timeout=5)

    for response in (anonymous, wrong, wrong_user, reset):
        assert response.status_code == 401
        assert response.headers["WWW-Authenticate"] == 'Basic realm="Redfish"'
        assert _message_id(response).endswith(".NoValidSession")
    assert [r.status for r in bmcs.bmc_requests(path=SYSTEM + "*")] == [401] * 4
    assert bmcs.cluster.machine(NODE).power == "On"


def test_systems_list_every_node_with_power_state_links_and_the_reset_action(
    http: httpx.Client,
) -> None:
    systems = _get(http, "/redfish/v1/Systems")
    system = _get(http, SYSTEM)

    assert systems["@odata.type"] == "#ComputerSystemCollection.ComputerSystemCollection"
    assert systems["Members@odata.count"] == 4
    assert [m["@odata.id"] for m in systems["Members"]] == [
        f"/redfish/v1/Systems/gpu-node-0{i}" for i in range(1, 5)
    ]
    assert system["@odata.type"].startswith("#ComputerSystem.v1_")
    assert (system["Id"], system["PowerState"]) == (NODE, "On")
    assert (system["Manufacturer"], system["Model"]) == ("Supermicro", "SYS-821GE-TNHR")
    reset = system["Actions"]["#ComputerSystem.Reset"]
    assert reset["target"] == f"{SYSTEM}/Actions/ComputerSystem.Reset"
    assert reset["ResetType@Redfish.AllowableValues"] == [
        "On",
        "ForceOff",
        "GracefulShutdown",
        "ForceRestart",
        "PowerCycle",
    ]
    manager = _get(http, system["Links"]["ManagedBy"][0]["@odata.id"])
    chassis = _get(http, system["Links"]["Chassis"][0]["@odata.id"])
    assert (manager["ManagerType"], manager["FirmwareVersion"]) == ("BMC", "1.10.2")
    assert manager["Links"]["ManagerForServers"] == [{"@odata.id": SYSTEM}]
    assert chassis["Links"]["ComputerSystems"] == [{"@odata.id": SYSTEM}]


def test_the_sel_is_a_log_service_of_the_manager_with_schema_shaped_entries(
    bmcs: SimHandle, http: httpx.Client
) -> None:
    bmcs.cluster.heat_gpu(NODE, 6, 90.0)

    services = _get(http, f"/redfish/v1/Managers/{NODE}/LogServices")
    sel = _get(http, services["Members"][0]["@odata.id"])
    entries = _get(http, sel["Entries"]["@odata.id"])

    assert (sel["Id"], sel["LogEntryType"]) == ("SEL", "SEL")
    assert entries["Members@odata.count"] == 2
    first, hot = entries["Members"]
    assert (first["EntryType"], first["Severity"], first["EntryCode"]) == ("SEL", "OK", "Assert")
    assert first["Message"] == "System Event: Initialization completed"
    assert (hot["SensorType"], hot["SensorNumber"]) == ("Temperature", 0x36)
    assert (hot["Severity"], hot["Message"]) == ("Critical", "GPU6 Temp: Upper critical going high")
    assert datetime.fromisoformat(hot["Created"]).tzinfo is not None
    assert _get(http, hot["@odata.id"]) == hot
    assert _get(http, f"{SYSTEM}/LogServices")["Members"] == []


def test_thermal_and_power_follow_the_machine_and_go_quiet_when_it_is_off(
    bmcs: SimHandle, http: httpx.Client
) -> None:
    bmcs.cluster.heat_gpu(NODE, 2, 91.0)
    thermal = _get(http, f"/redfish/v1/Chassis/{NODE}/Thermal")
    power = _get(http, f"/redfish/v1/Chassis/{NODE}/Power")

    temps = {t["Name"]: t for t in thermal["Temperatures"]}
    assert thermal["@odata.type"].startswith("#Thermal.v1_")
    assert len(temps) == 1 + 8
    assert (temps["GPU2 Temp"]["ReadingCelsius"], temps["GPU2 Temp"]["Status"]["Health"]) == (
        91.0,
        "Critical",
    )
    assert temps["GPU2 Temp"]["UpperThresholdCritical"] == 85
    assert (temps["GPU0 Temp"]["ReadingCelsius"], temps["GPU0 Temp"]["Status"]["Health"]) == (
        34.0,
        "OK",
    )
    assert temps["Inlet Temp"]["ReadingCelsius"] == 24.0
    assert {(f["Reading"], f["ReadingUnits"]) for f in thermal["Fans"]} == {(9800, "RPM")}
    assert power["PowerControl"][0]["PowerConsumedWatts"] == 1800.0
    assert {v["Name"] for v in power["Voltages"]} == {"P12V", "P5V", "P3V3"}

    bmcs.cluster.power(NODE, "ForceOff")
    eventually(lambda: bmcs.cluster.machine(NODE).power == "Off", what="the machine off")
    thermal = _get(http, f"/redfish/v1/Chassis/{NODE}/Thermal")
    power = _get(http, f"/redfish/v1/Chassis/{NODE}/Power")

    gpus = [t for t in thermal["Temperatures"] if t["Name"].startswith("GPU")]
    assert all("ReadingCelsius" not in t and t["Status"]["State"] == "StandbyOffline" for t in gpus)
    assert power["PowerControl"][0]["PowerConsumedWatts"] < 100


def test_a_bad_reset_type_is_a_400_and_changes_nothing(bmcs: SimHandle, http: httpx.Client) -> None:
    sel_before = len(bmcs.cluster.machine(NODE).sel)

    unknown = _reset(http, {"ResetType": "Explode"})
    missing = _reset(http, {})
    garbage = http.post(
        f"{SYSTEM}/Actions/ComputerSystem.Reset",
        content=b"{not json",
        headers={"Content-Type": "application/json"},
    )

    assert [r.status_code for r in (unknown, missing, garbage)] == [400, 400, 400]
    assert _message_id(unknown).endswith(".ActionParameterValueNotInList")
    assert unknown.json()["error"]["@Message.ExtendedInfo"][0]["MessageArgs"][0] == "Explode"
    assert _message_id(missing).endswith(".ActionParameterMissing")
    assert _message_id(garbage).endswith(".MalformedJSON")
    machine = bmcs.cluster.machine(NODE)
    assert (machine.power, len(machine.sel), machine.pending) == ("On", sel_before, [])


def test_a_reset_the_state_forbids_is_a_409(bmcs: SimHandle, http: httpx.Client) -> None:
    already_on = _reset(http, {"ResetType": "On"})
    bmcs.cluster.power("gpu-node-02", "ForceOff")
    eventually(lambda: bmcs.cluster.machine("gpu-node-02").power == "Off", what="node 02 off")
    cycle_when_off = _reset(http, {"ResetType": "PowerCycle"}, node="gpu-node-02")

    assert (already_on.status_code, cycle_when_off.status_code) == (409, 409)
    assert _message_id(cycle_when_off).endswith(".ActionParameterValueConflict")
    assert (
        "the system is Off" in cycle_when_off.json()["error"]["@Message.ExtendedInfo"][0]["Message"]
    )
    assert bmcs.cluster.machine("gpu-node-02").power == "Off"


def test_reset_delays_follow_the_time_scale() -> None:
    slow_rails = seed().model_copy(update={"hardware": Hardware(power_off_seconds=100)})
    options = RedfishOptions(USER, PASSWORD)
    with (
        running(slow_rails, time_scale=TIME_SCALE, redfish=options) as sim,
        httpx.Client(base_url=str(sim.redfish_url), auth=(USER, PASSWORD), timeout=5) as http,
    ):
        before = time.monotonic()
        response = _reset(http, {"ResetType": "ForceOff"})
        after = time.monotonic()

        assert response.status_code == 204
        machine = sim.cluster.machine(NODE)
        assert machine.power == "PoweringOff"
        [(due, what)] = machine.pending
        assert what == "off"
        assert before + 100 * TIME_SCALE <= due <= after + 100 * TIME_SCALE
        assert _get(http, SYSTEM)["PowerState"] == "PoweringOff"


def test_a_force_off_over_redfish_powers_off_and_the_node_goes_not_ready(
    bmcs: SimHandle, http: httpx.Client
) -> None:
    assert _reset(http, {"ResetType": "ForceOff"}).status_code == 204

    eventually(lambda: _get(http, SYSTEM)["PowerState"] == "Off", what="PowerState Off")
    eventually(lambda: not bmcs.cluster.snapshot().nodes[NODE].ready, what="NotReady")
    events = [r.event for r in bmcs.cluster.machine(NODE).sel]
    assert events[-2:] == ["S5/G2: soft-off (ForceOff)", "Power off/down"]
    assert bmcs.cluster.snapshot().nodes["gpu-node-02"].ready


def test_injected_failures_and_slowness_hit_only_that_nodes_bmc(
    bmcs: SimHandle, http: httpx.Client
) -> None:
    bmcs.fail_bmc(NODE, times=2)

    statuses = [http.get(SYSTEM).status_code for _ in range(3)]
    other = http.get("/redfish/v1/Systems/gpu-node-02")

    assert statuses == [500, 500, 200]
    assert other.status_code == 200
    failed = bmcs.bmc_requests(path=SYSTEM)
    assert [(r.status, r.node) for r in failed] == [(500, NODE), (500, NODE), (200, NODE)]

    bmcs.slow_bmc(NODE, 5.0)
    with pytest.raises(httpx.ReadTimeout):
        http.get(SYSTEM, timeout=0.1)
    assert http.get("/redfish/v1/Systems/gpu-node-02", timeout=2).status_code == 200
    bmcs.slow_bmc(NODE, 0)
    assert http.get(SYSTEM, timeout=2).status_code == 200


def test_unknown_nodes_paths_and_methods_get_redfish_errors(http: httpx.Client) -> None:
    no_node = http.get("/redfish/v1/Systems/gpu-node-99")
    no_path = http.get("/redfish/v1/Nonsense")
    no_chassis_sel = http.get(f"/redfish/v1/Chassis/{NODE}/LogServices")
    wrong_method = http.post(SYSTEM, json={})

    assert (no_node.status_code, _message_id(no_node).rsplit(".", 1)[-1]) == (
        404,
        "ResourceNotFound",
    )
    assert (no_path.status_code, _message_id(no_path).rsplit(".", 1)[-1]) == (
        404,
        "ResourceMissingAtURI",
    )
    assert no_chassis_sel.status_code == 404
    assert (wrong_method.status_code, _message_id(wrong_method).rsplit(".", 1)[-1]) == (
        405,
        "OperationNotAllowed",
    )


def test_bmc_settings_name_every_node_and_validate_as_the_bmc_setting(
    bmcs: SimHandle, tmp_path: Path
) -> None:
    password_file = tmp_path / "secrets" / "bmc-password"

    settings = bmcs.bmc_settings(password_file)

    parsed = BmcSettings.model_validate(settings)
    assert sorted(parsed.nodes) == [f"gpu-node-0{i}" for i in range(1, 5)]
    entry = parsed.nodes["gpu-node-03"]
    assert (entry.protocol, entry.address, entry.port) == (
        "redfish",
        "127.0.0.1",
        bmcs.redfish_port,
    )
    assert (entry.system, entry.scheme, entry.ca_file) == ("gpu-node-03", "http", None)
    assert parsed.credentials["default"].username == USER
    assert password_file.read_text(encoding="utf-8").strip() == PASSWORD
    assert stat.S_IMODE(password_file.stat().st_mode) == 0o600


def test_without_redfish_the_handle_serves_no_bmcs() -> None:
    with running(seed(), time_scale=TIME_SCALE) as sim:
        assert (sim.redfish_url, sim.redfish_port, sim.redfish) == (None, None, None)
        with pytest.raises(RuntimeError, match="running\\(redfish=...\\)"):
            sim.fail_bmc(NODE)


def test_redfish_options_want_both_a_certificate_and_its_key(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="both certfile and keyfile"):
        RedfishOptions(USER, PASSWORD, certfile=tmp_path / "cert.pem")

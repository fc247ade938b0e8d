"""The IPMI backend running the real ipmitool against OpenIPMI's BMC emulator ipmi_sim
(tests/support/ipmi_sim.py), and against a UDP socket that never answers.

Every run of ipmitool against ipmi_sim takes about a second: ipmi_sim does not answer
Get Channel Cipher Suites, and ipmitool waits one try (-N 1) for it before logging in.
"""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from pydantic import SecretStr

from bot.actions import ActionContext, execute, registry
from bot.actions.bmc.ipmi import IpmiBmc
from bot.actions.bmc.protocol import BmcTarget, Credentials, PowerState, Reading, SelEntry
from bot.actions.executing import Failure
from bot.clock import FrozenClock
from bot.config import load_settings
from bot.errors import CredentialsRefused, PermanentActionError, TemporaryActionError
from tests.support import ipmi_sim

pytestmark = pytest.mark.timeout(60)

NODE = "gpu-node-07"
TIMEOUT = 6.0
"""Seconds per call: ipmitool waits 1 s per try (-N 1), as the backend derives it."""
WRONG = "Wr0ng-Secret-91"


@pytest.fixture(scope="module")
def sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ipmi_sim.SimBmc]:
    with ipmi_sim.running(tmp_path_factory.mktemp("ipmi_sim")) as running:
        yield running


@pytest.fixture
def bmc(sim: ipmi_sim.SimBmc) -> IpmiBmc:
    sim.set_power(True)
    return backend(sim.address, sim.port, sim.username, sim.password)


def backend(
    address: str,
    port: int,
    username: str,
    password: str,
    *,
    timeout: float = TIMEOUT,
    cipher_suite: int | None = 3,
) -> IpmiBmc:
    """ipmi_sim never answers the cipher suite negotiation (each run would wait a try for
    it), so tests name suite 3, as `bmc.nodes.X.cipher_suite` does; one test negotiates."""
    target = BmcTarget(
        node=NODE, protocol="ipmi", address=address, port=port, cipher_suite=cipher_suite
    )
    return IpmiBmc(target, Credentials(username, SecretStr(password)), timeout=timeout)


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A UDP port on loopback where something is bound but never answers."""
    ipmi_sim.require_tools()
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.bind(("127.0.0.1", 0))
        yield sock.getsockname()[1]


def ipmitool_children() -> list[int]:
    """Pids of ipmitool processes this test process started."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue  # exited meanwhile
        # pid (comm) state ppid ...: comm may hold spaces, so split after the last ')'.
        comm = stat[stat.index("(") + 1 : stat.rindex(")")]
        ppid = int(stat[stat.rindex(")") + 2 :].split()[1])
        if comm == "ipmitool" and ppid == os.getpid():
            found.append(int(entry.name))
    return found


def test_power_state_is_what_the_emulated_chassis_reports(
    sim: ipmi_sim.SimBmc, bmc: IpmiBmc
) -> None:
    assert bmc.power_state() is PowerState.ON

    sim.set_power(False)

    assert bmc.power_state() is PowerState.OFF


def test_power_off_turns_the_chassis_off(sim: ipmi_sim.SimBmc, bmc: IpmiBmc) -> None:
    before = len(sim.chassis_requests())

    bmc.request_power("off")

    assert sim.chassis_requests()[before:] == ["power 0"]
    assert not sim.powered_on
    assert bmc.power_state() is PowerState.OFF


def test_power_on_turns_the_chassis_on(sim: ipmi_sim.SimBmc, bmc: IpmiBmc) -> None:
    sim.set_power(False)
    before = len(sim.chassis_requests())

    bmc.request_power("on")

    assert sim.chassis_requests()[before:] == ["power 1"]
    assert bmc.power_state() is PowerState.ON


def test_soft_off_asks_the_chassis_for_a_graceful_shutdown(
    sim: ipmi_sim.SimBmc, bmc: IpmiBmc
) -> None:
    before = len(sim.chassis_requests())

    bmc.request_power("soft_off")

    assert sim.chassis_requests()[before:] == ["shutdown 1"]
    assert bmc.power_state() is PowerState.OFF


def test_power_cycle_turns_power_off_then_back_on(sim: ipmi_sim.SimBmc, bmc: IpmiBmc) -> None:
    before = len(sim.chassis_requests())

    bmc.request_power("cycle")

    assert sim.chassis_requests()[before:][:1] == ["power 0"]
    # ipmi_sim powers the chassis on again one second after it cut the power.
    sim.wait_for(
        lambda: sim.chassis_requests()[before:] == ["power 0", "power 1"],
        "ipmi_sim to power the chassis back on",
    )
    assert bmc.power_state() is PowerState.ON


def test_power_cycle_of_a_chassis_that_is_off_is_refused_without_touching_it(
    sim: ipmi_sim.SimBmc, bmc: IpmiBmc
) -> None:
    sim.set_power(False)
    before = len(sim.chassis_requests())

    with pytest.raises(PermanentActionError) as refused:
        bmc.request_power("cycle")

    assert str(refused.value) == (
        f"ipmi BMC 127.0.0.1:{sim.port} of {NODE} cannot power cycle: power is off; use power_on"
    )
    # ipmi_sim itself would accept the cycle and power the chassis on a second later.
    assert sim.chassis_requests()[before:] == []
    assert not sim.powered_on


def test_sel_gives_the_newest_entries_oldest_first(bmc: IpmiBmc) -> None:
    newest = bmc.sel(3)
    everything = bmc.sel(100)

    assert [(e.id, e.sensor, e.event, e.direction) for e in newest] == [
        (
            "4",
            "Temperature GPU0 Temp",
            "Upper Critical going high (Reading 96 > Threshold 95 degrees C)",
            "Asserted",
        ),
        ("5", "Critical Interrupt #0x07", "Bus Uncorrectable error", "Asserted"),
        ("6", "Power Unit #0x01", "Power off/down", "Asserted"),
    ]
    assert everything[:2] == [
        SelEntry("1", "Pre-Init", "Power Unit #0x01", "AC lost", "Asserted"),
        SelEntry("2", "Pre-Init", "Power Unit #0x01", "AC lost", "Deasserted"),
    ]
    assert (everything[2].id, everything[2].sensor, everything[2].event) == (
        "3",
        "Memory #0x40",
        "Uncorrectable ECC",
    )
    assert everything[3:] == newest
    for entry in everything[2:]:
        logged = datetime.fromisoformat(entry.time)
        # Stamped by the SEL clock, set to SEL_CLOCK just before these were added.
        assert timedelta(0) <= logged - ipmi_sim.SEL_CLOCK < timedelta(minutes=1)


def test_sensors_are_read_with_their_kind_value_and_status(bmc: IpmiBmc) -> None:
    assert bmc.sensors() == [
        Reading("CPU Temp", "temperature", 48.0, "degrees C", "ok"),
        Reading("GPU0 Temp", "temperature", 96.0, "degrees C", "critical"),
        Reading("GPU1 Temp", "temperature", None, "", "na"),
        Reading("FAN1", "fan", 7200.0, "RPM", "ok"),
        Reading("FAN2", "fan", 800.0, "RPM", "warning"),
        Reading("PSU1 Power", "power", 3000.0, "Watts", "ok"),
        Reading("12V", "voltage", 12.0, "Volts", "ok"),
    ]


def test_info_gives_the_firmware_revision_and_maker(bmc: IpmiBmc) -> None:
    info = bmc.info()

    assert (info.firmware, info.manufacturer) == ("9.08", "MontaVista Software, Inc.")
    assert info.details["IPMI Version"] == "2.0"


def test_wrong_password_is_a_credentials_refusal_naming_the_profile_not_the_password(
    sim: ipmi_sim.SimBmc,
) -> None:
    bmc = backend(sim.address, sim.port, sim.username, WRONG)

    with pytest.raises(CredentialsRefused) as refused:
        bmc.power_state()

    message = str(refused.value)
    assert refused.value.kind == "credentials"
    assert message.startswith(
        f"ipmi BMC 127.0.0.1:{sim.port} of {NODE} refused the login of user 'admin'"
    )
    assert "RAKP 2 HMAC is invalid" in message
    assert message.endswith("check the credentials profile 'default' (bmc.credentials)")
    assert WRONG not in message and sim.password not in message


def test_unknown_user_is_a_credentials_refusal(sim: ipmi_sim.SimBmc) -> None:
    bmc = backend(sim.address, sim.port, "nobody", sim.password)

    with pytest.raises(CredentialsRefused, match="unauthorized name") as refused:
        bmc.info()

    assert "refused the login of user 'nobody'" in str(refused.value)
    assert sim.password not in str(refused.value)


def test_bmc_that_never_answers_is_temporary_and_names_the_timeout(silent_port: int) -> None:
    bmc = backend("127.0.0.1", silent_port, "admin", WRONG)

    with pytest.raises(TemporaryActionError) as silent:
        bmc.sel(10)

    message = str(silent.value)
    assert message.startswith(
        f"ipmi BMC 127.0.0.1:{silent_port} of {NODE} did not answer within 6s"
    )
    assert "Get Auth Capabilities error" in message  # from the diagnosing -v run
    assert message.endswith(f"reachable on UDP port {silent_port}")
    assert WRONG not in message


def test_ipmitool_still_waiting_at_the_timeout_is_killed(silent_port: int) -> None:
    # ipmitool would wait two tries of one second; the call allows half of that.
    bmc = backend("127.0.0.1", silent_port, "admin", WRONG, timeout=1.0)

    with pytest.raises(TemporaryActionError, match="did not answer within 1s"):
        bmc.power_state()

    assert ipmitool_children() == []


def test_password_reaches_ipmitool_only_through_an_inherited_pipe(silent_port: int) -> None:
    bmc = backend("127.0.0.1", silent_port, "admin", WRONG)
    raised: list[Exception] = []

    def call() -> None:
        try:
            bmc.power_state()
        except Exception as exc:
            raised.append(exc)

    caller = threading.Thread(target=call)
    caller.start()
    try:
        [pid] = ipmi_sim.wait_until(ipmitool_children, "ipmitool to start")
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        password_file = argv[argv.index(b"-f") + 1].decode()
        fd = password_file.removeprefix("/dev/fd/")
        pipe = os.readlink(f"/proc/{pid}/fd/{fd}")
    finally:
        caller.join()

    assert WRONG.encode() not in b" ".join(argv) + b" ".join(environ)
    assert b"-E" not in argv
    assert password_file.startswith("/dev/fd/") and pipe.startswith("pipe:"), pipe
    variables = dict(v.split(b"=", 1) for v in environ if v)
    assert set(variables) == {b"PATH", b"LANG"}
    assert [type(e) for e in raised] == [TemporaryActionError]


def test_missing_ipmitool_is_permanent_and_says_how_to_install_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    bmc = backend("127.0.0.1", 623, "admin", WRONG)

    with pytest.raises(PermanentActionError) as missing:
        bmc.power_state()

    assert str(missing.value) == (
        f"ipmitool is not installed, needed to reach ipmi BMC 127.0.0.1:623 of {NODE}; "
        "apt-get install ipmitool"
    )


def test_without_a_cipher_suite_ipmitool_negotiates_one(sim: ipmi_sim.SimBmc) -> None:
    sim.set_power(False)
    negotiating = backend(sim.address, sim.port, sim.username, sim.password, cipher_suite=None)
    assert negotiating.power_state() == PowerState.OFF


def test_the_power_read_through_the_registry_fails_as_credentials_then_reads_once_fixed(
    sim: ipmi_sim.SimBmc, tmp_path: Path
) -> None:
    """What a runbook sees (`steps.power.error.kind`): the action's `Failure.error`."""
    sim.set_power(True)
    password = tmp_path / "ipmi-password"
    password.write_text(WRONG + "\n", encoding="utf-8")
    node = {"protocol": "ipmi", "address": sim.address, "port": sim.port, "cipher_suite": 3}
    settings = load_settings(
        bmc={
            "credentials": {"default": {"username": sim.username, "password_file": str(password)}},
            "nodes": {NODE: node},
            "timeout": f"{TIMEOUT:g}s",
            "attempts": 1,
        }
    )
    ctx = ActionContext(actor="runbook-bot", settings=settings, clock=FrozenClock())
    power_status = registry.get("bmc.power_status")

    refused = execute(power_status, {"node": NODE}, ctx)
    password.write_text(sim.password + "\n", encoding="utf-8")  # the operator fixes it
    fixed = execute(power_status, {"node": NODE}, ctx)

    assert isinstance(refused.result, Failure) and refused.result.error == "credentials"
    assert "check the credentials profile 'default'" in refused.result.summary
    assert refused.retry_after is None and WRONG not in refused.result.summary
    assert fixed.result.ok and fixed.result.model_dump()["power"] == "on"

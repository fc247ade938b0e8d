"""OpenIPMI's `ipmi_sim` as a real BMC on loopback, for the IPMI backend's tests.

`running(workdir)` writes a `lan.conf`, an emulator command file and a chassis-control
script, starts `ipmi_sim` on 127.0.0.1 on a free UDP port, waits until the real `ipmitool`
gets an answer, logs a few dated SEL entries through IPMI itself, yields a `SimBmc`, and
always stops the emulator. Every wait is bounded and its failure message carries the tail
of the emulator's log.

What the emulator holds:
- power, kept by the chassis-control script in the file `power` (`1` on, `0` off); every
  request the emulator makes of the script is appended to `chassis.log` (`power 0`,
  `shutdown 1`). `chassis power cycle` is ipmi_sim's own: power off now, on one second
  later. `chassis power soft` asks the script for a graceful `shutdown`; the script plays
  an OS that halts at once.
- the threshold sensors of `SENSORS`, each with a full SDR so `ipmitool sensor list` names
  them and converts their raw bytes;
- SEL entries: `BOOT_EVENTS`, logged before the SEL clock is set (ipmitool prints their
  time as `Pre-Init`), then `CRASH_EVENTS`, logged after setting the SEL clock to
  `SEL_CLOCK`.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TypeVar

import pytest

from tests.support.ci import skip_or_fail

USERNAME = "admin"
PASSWORD = "sim-Pa55word-7f3c"
WAIT_SECONDS = 20.0
POLL_SECONDS = 0.05
SEL_CLOCK = datetime(2026, 11, 29, 21, 58, 7, tzinfo=UTC)
"""What the SEL clock is set to before `CRASH_EVENTS` are logged: minutes before the alert."""

T = TypeVar("T")

# IPMI base units (IPMI 2.0 table 43-15) and sensor types (table 42-3).
DEGREES_C, VOLTS, WATTS, RPM = 1, 4, 6, 18
TEMPERATURE, VOLTAGE, CURRENT, FAN = 0x01, 0x02, 0x03, 0x04
PROCESSOR, SYSTEM_BOARD, ADD_IN_CARD = 3, 7, 11


@dataclass(frozen=True)
class Sensor:
    """A threshold sensor: the value ipmitool shows is `raw * m * 10**r_exp`."""

    number: int
    name: str
    sensor_type: int
    unit: int
    raw: int | None
    """The reading's raw byte; None leaves the sensor unscanned (ipmitool shows `na`)."""
    m: int = 1
    r_exp: int = 0
    upper: tuple[int, int, int] | None = None
    """Raw upper thresholds: non-critical, critical, non-recoverable."""
    lower: tuple[int, int, int] | None = None
    """Raw lower thresholds: non-critical, critical, non-recoverable."""
    entity: int = SYSTEM_BOARD


SENSORS = (
    Sensor(1, "CPU Temp", TEMPERATURE, DEGREES_C, 48, upper=(85, 95, 105), entity=PROCESSOR),
    Sensor(2, "GPU0 Temp", TEMPERATURE, DEGREES_C, 96, upper=(85, 95, 105), entity=ADD_IN_CARD),
    Sensor(3, "GPU1 Temp", TEMPERATURE, DEGREES_C, None, upper=(85, 95, 105), entity=ADD_IN_CARD),
    Sensor(4, "FAN1", FAN, RPM, 72, m=100, lower=(10, 5, 3)),
    Sensor(5, "FAN2", FAN, RPM, 8, m=100, lower=(10, 5, 3)),
    Sensor(6, "PSU1 Power", CURRENT, WATTS, 150, m=20, upper=(170, 180, 190)),
    Sensor(
        7, "12V", VOLTAGE, VOLTS, 200, m=6, r_exp=-2, lower=(190, 185, 180), upper=(210, 215, 220)
    ),
)

# System event records (IPMI 2.0 table 32-1) from byte 8 on: generator id (the BMC), event
# message revision, sensor type, sensor number, event direction and type, event data 1-3.
BOOT_EVENTS = (
    (0x20, 0x00, 0x04, 0x09, 0x01, 0x6F, 0x04, 0xFF, 0xFF),  # Power Unit: AC lost
    (0x20, 0x00, 0x04, 0x09, 0x01, 0xEF, 0x04, 0xFF, 0xFF),  # Power Unit: AC lost, deasserted
)
CRASH_EVENTS = (
    (0x20, 0x00, 0x04, 0x0C, 0x40, 0x6F, 0x01, 0xFF, 0xFF),  # Memory: uncorrectable ECC
    (0x20, 0x00, 0x04, 0x01, 0x02, 0x01, 0x59, 0x60, 0x5F),  # GPU0 Temp above critical
    (0x20, 0x00, 0x04, 0x13, 0x07, 0x6F, 0x08, 0xFF, 0xFF),  # Critical Interrupt: bus error
    (0x20, 0x00, 0x04, 0x09, 0x01, 0x6F, 0x00, 0xFF, 0xFF),  # Power Unit: power off
)

CHASSIS_SCRIPT = """\
#!/bin/sh
# ipmi_sim's chassis_control: `get power` prints power:1|0; `set power "1"`, `set shutdown "1"`.
dir=$(dirname "$0")
op=$1
shift
case "$op" in
get)
    for parm in "$@"; do
        case "$parm" in
        power) echo "power:$(cat "$dir/power")" ;;
        boot) echo "boot:default" ;;
        esac
    done
    ;;
set)
    while [ $# -ge 2 ]; do
        echo "$1 $2" >>"$dir/chassis.log"
        case "$1" in
        power) state=$2 ;;
        shutdown) state=0 ;;
        *) state=$(cat "$dir/power") ;;
        esac
        echo "$state" >"$dir/power.new" && mv "$dir/power.new" "$dir/power"
        shift 2
    done
    ;;
*)
    echo "unsupported operation: $op"
    exit 1
    ;;
esac
"""


def require_tools() -> None:
    """Skip locally, fail in CI, when ipmi_sim or ipmitool is not installed."""
    missing = [name for name in ("ipmi_sim", "ipmitool") if shutil.which(name) is None]
    if not missing:
        return
    skip_or_fail(f"{' and '.join(missing)} not found", install="apt-get install openipmi ipmitool")


@dataclass
class SimBmc:
    """A running ipmi_sim: where it answers, its login, and its chassis state on disk."""

    address: str
    port: int
    username: str
    password: str
    workdir: Path
    process: subprocess.Popen[bytes]

    @property
    def powered_on(self) -> bool:
        return (self.workdir / "power").read_text().strip() == "1"

    def set_power(self, on: bool) -> None:
        (self.workdir / "power").write_text("1\n" if on else "0\n")

    def chassis_requests(self) -> list[str]:
        """What the emulator asked of the chassis, in order: `power 0`, `shutdown 1`..."""
        log = self.workdir / "chassis.log"
        return log.read_text().splitlines() if log.exists() else []

    def log_tail(self, lines: int = 30) -> str:
        try:
            text = (self.workdir / "ipmi_sim.log").read_text(errors="replace")
        except OSError as exc:
            return f"(no ipmi_sim log: {exc})"
        exited = self.process.poll()
        state = f"exited with code {exited}" if exited is not None else "still running"
        tail = "\n".join(text.splitlines()[-lines:])
        return f"ipmi_sim {state}; last log lines:\n{tail}"

    def ipmitool(self, *command: str) -> subprocess.CompletedProcess[str]:
        """Run the real ipmitool against the emulator, as a test's own client.

        Cipher suite 3 is named because ipmi_sim does not answer Get Channel Cipher Suites:
        without it each run first waits out that request.
        """
        argv = ["ipmitool", "-I", "lanplus", "-H", self.address, "-p", str(self.port)]
        argv += ["-U", self.username, "-C", "3", "-N", "1", "-R", "1", "-Z"]
        env = {"PATH": os.environ.get("PATH", ""), "LANG": "C"}
        with password_pipe(self.password) as fd:
            return subprocess.run(
                [*argv, "-f", f"/dev/fd/{fd}", *command],
                env=env,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=10,
                pass_fds=(fd,),
            )

    def wait_for(self, check: Callable[[], T | None], what: str) -> T:
        """Poll `check` until it returns a truthy value; fail with the log tail if it never does."""
        return wait_until(check, what, details=self.log_tail)


@contextmanager
def password_pipe(password: str) -> Iterator[int]:
    """The read end of a pipe holding `password`, for ipmitool's `-f /dev/fd/N`: the way
    the bot hands it over (never `-E`, whose environment `ps e` shows)."""
    read_end, write_end = os.pipe()
    try:
        try:
            os.write(write_end, password.encode() + b"\n")
        finally:
            os.close(write_end)
        yield read_end
    finally:
        os.close(read_end)


def wait_until(
    check: Callable[[], T | None], what: str, *, details: Callable[[], str] | None = None
) -> T:
    """Poll `check` until it returns a truthy value; fail, with `details()`, if it never does."""
    deadline = time.monotonic() + WAIT_SECONDS
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(
                f"gave up after {WAIT_SECONDS:.0f} s waiting for {what}\n"
                + (details() if details else ""),
                pytrace=False,
            )
        time.sleep(POLL_SECONDS)


@contextmanager
def running(workdir: Path, *, password: str = PASSWORD) -> Iterator[SimBmc]:
    """Run ipmi_sim on 127.0.0.1 with `SENSORS` and a seeded SEL; always stop it."""
    # IPMI v2 passwords are at most 20 bytes; lan.conf quotes them.
    assert len(password.encode()) <= 20 and '"' not in password, "not a usable IPMI password"
    require_tools()
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "state").mkdir(exist_ok=True)
    script = workdir / "chassis"
    script.write_text(CHASSIS_SCRIPT)
    script.chmod(0o755)
    (workdir / "power").write_text("1\n")
    port = free_udp_port()
    (workdir / "lan.conf").write_text(lan_conf(port, script, password))
    (workdir / "bmc.emu").write_text(emulator_commands())
    command = ["ipmi_sim", "-c", "lan.conf", "-f", "bmc.emu", "-s", "state", "-n"]
    with (workdir / "ipmi_sim.log").open("wb") as log:
        process = subprocess.Popen(
            command, cwd=workdir, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT
        )
        bmc = SimBmc("127.0.0.1", port, USERNAME, password, workdir, process)
        try:
            _wait_ready(bmc)
            _log_crash_events(bmc)
            yield bmc
        finally:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)


def free_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def lan_conf(port: int, script: Path, password: str) -> str:
    auths = "none md2 md5 straight"
    return f"""\
name "bmc1"
set_working_mc 0x20
  startlan 1
    addr 127.0.0.1 {port}
    priv_limit admin
    allowed_auths_callback {auths}
    allowed_auths_user {auths}
    allowed_auths_operator {auths}
    allowed_auths_admin {auths}
    guid a123456789abcdefa123456789abcdef
  endlan
  chassis_control "{script}"
  user 2 true "{USERNAME}" "{password}" admin 10 {auths}
"""


def emulator_commands() -> str:
    """The BMC (Get Device ID answers: firmware 9.08, MontaVista), its sensors and SEL."""
    lines = [
        "mc_setbmc 0x20",
        "mc_add 0x20 0 no-device-sdrs 0x23 9 8 0x9f 0x1291 0xf02 persist_sdr",
        "sel_enable 0x20 1000 0x0a",
    ]
    for sensor in SENSORS:
        lines += _sensor_commands(sensor)
    for event in BOOT_EVENTS:
        # sel_add takes the 4 timestamp bytes too; ipmi_sim stamps the entry itself.
        lines.append("sel_add 0x20 0x02 0 0 0 0 " + " ".join(f"0x{b:02x}" for b in event))
    lines.append("mc_enable 0x20")
    return "\n".join(lines) + "\n"


def _sensor_commands(sensor: Sensor) -> list[str]:
    at = f"0x20 0 {sensor.number}"
    upper = sensor.upper or (0, 0, 0)
    lower = sensor.lower or (0, 0, 0)
    enabled = ("111" if sensor.upper else "000") + ("111" if sensor.lower else "000")
    values = " ".join(str(v) for v in (*reversed(upper), *reversed(lower)))
    sdr = " ".join(f"0x{b:02x}" for b in full_sensor_record(sensor))
    lines = [
        f"sensor_add {at} 0x{sensor.sensor_type:02x} 0x01",
        f"sensor_set_threshold {at} settable {enabled} {values}",
        f"main_sdr_add 0x20 {sdr}",
    ]
    if sensor.raw is not None:
        no_events = "000000000000000"
        lines += [
            f"sensor_set_event_support {at} enable scanning per-state " + " ".join([no_events] * 4),
            f"sensor_set_value {at} {sensor.raw} 0",
        ]
    return lines


def full_sensor_record(sensor: Sensor) -> bytes:
    """An SDR type 01 (IPMI 2.0 section 43.1) for one threshold sensor owned by the BMC."""
    name = sensor.name.encode("ascii")
    thresholds = (0x38 if sensor.upper else 0) | (0x07 if sensor.lower else 0)
    unr, uc, unc = reversed(sensor.upper or (0, 0, 0))
    lnr, lc, lnc = reversed(sensor.lower or (0, 0, 0))
    body = bytes(
        [
            0x20, 0x00, sensor.number, sensor.entity, 1,  # owner, LUN, number, entity
            0x7F,  # initialise scanning, events, thresholds, hysteresis, type; scan on
            0x48,  # auto re-arm, thresholds settable, per-threshold event control
            sensor.sensor_type, 0x01,  # event/reading type: threshold
            0x00, 0x70 if sensor.lower else 0,  # assertions; lower thresholds compared
            0x00, 0x70 if sensor.upper else 0,  # deassertions; upper thresholds compared
            thresholds, thresholds,  # readable, settable thresholds
            0x00, sensor.unit, 0x00, 0x00,  # unsigned; base unit; no modifier; linear
            sensor.m & 0xFF, (sensor.m >> 8 & 0x03) << 6,  # M, tolerance 0
            0x00, 0x00, 0x01,  # B 0, accuracy 0, direction input
            (sensor.r_exp & 0x0F) << 4,  # R exponent, B exponent 0
            0x00, 0x00, 0x00, 0x00,  # analog flags, nominal, normal max and min
            0xFF, 0x00,  # sensor maximum and minimum
            unr, uc, unc, lnr, lc, lnc,
            0x00, 0x00, 0x00, 0x00, 0x00,  # hysteresis +/-, reserved, OEM
            0xC0 | len(name),  # 8-bit ASCII id string
        ]
    )  # fmt: skip
    body += name
    return bytes([0x00, 0x00, 0x51, 0x01, len(body)]) + body


def _wait_ready(bmc: SimBmc) -> None:
    def answers() -> bool:
        if bmc.process.poll() is not None:
            pytest.fail(f"ipmi_sim did not start\n{bmc.log_tail()}", pytrace=False)
        return bmc.ipmitool("chassis", "power", "status").returncode == 0

    bmc.wait_for(answers, "ipmi_sim to answer `chassis power status`")


def _log_crash_events(bmc: SimBmc) -> None:
    """Set the SEL clock (Set SEL Time), then add entries (Add SEL Entry), through IPMI."""
    clock = int(SEL_CLOCK.timestamp()).to_bytes(4, "little")
    _raw(bmc, 0x49, clock)
    for event in CRASH_EVENTS:
        # Record id and timestamp are the BMC's to fill in; type 02 is a system event.
        _raw(bmc, 0x44, bytes([0x00, 0x00, 0x02, 0, 0, 0, 0, *event]))


def _raw(bmc: SimBmc, command: int, data: bytes) -> None:
    storage = "0x0a"
    done = bmc.ipmitool("raw", storage, f"0x{command:02x}", *(f"0x{b:02x}" for b in data))
    assert done.returncode == 0, f"raw storage command 0x{command:02x} failed: {done.stderr}"

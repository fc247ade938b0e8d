"""ipmitool parsers against real ipmitool 1.8.19 output captured from ipmi_sim
(tests/fixtures/ipmitool), and hand-written lines in the formats of other ipmitool
versions and vendors' BMCs."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.actions.bmc import ipmitool
from bot.actions.bmc.ipmitool import Failure
from bot.actions.bmc.protocol import PowerState, Reading, SelEntry

FIXTURES = Path(__file__).parent.parent / "fixtures" / "ipmitool"
CRASH_TIME = "2026-11-29T21:58:07+00:00"


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")


def test_chassis_power_status_reads_on_and_off() -> None:
    assert ipmitool.power_state(fixture("chassis-power-status-on.txt")) is PowerState.ON
    assert ipmitool.power_state(fixture("chassis-power-status-off.txt")) is PowerState.OFF


def test_power_control_acknowledgement_is_not_a_power_status() -> None:
    with pytest.raises(ValueError, match="Chassis Power Control: Down/Off"):
        ipmitool.power_state(fixture("chassis-power-off.txt"))


def test_real_sel_elist_gives_pre_init_dated_and_oem_entries_in_order() -> None:
    entries = ipmitool.sel_entries(fixture("sel-elist.txt"))

    assert entries == [
        SelEntry("1", "Pre-Init", "Power Unit #0x01", "AC lost", "Asserted"),
        SelEntry("2", "Pre-Init", "Power Unit #0x01", "AC lost", "Deasserted"),
        SelEntry("3", CRASH_TIME, "Memory #0x40", "Uncorrectable ECC", "Asserted"),
        SelEntry(
            "4",
            CRASH_TIME,
            "Temperature GPU0 Temp",
            "Upper Critical going high (Reading 96 > Threshold 95 degrees C)",
            "Asserted",
        ),
        SelEntry(
            "5", CRASH_TIME, "Critical Interrupt #0x07", "Bus Uncorrectable error", "Asserted"
        ),
        SelEntry("6", CRASH_TIME, "Power Unit #0x01", "Power off/down", "Asserted"),
        SelEntry("7", "2026-11-29T21:58:11+00:00", "OEM record c1", "000157 (deadbeef0102)"),
        SelEntry("8", "", "OEM record e0", "0102030405060708090a0b0c0d"),
    ]


def test_sel_list_without_sdr_lookups_names_sensors_by_number() -> None:
    entries = ipmitool.sel_entries(fixture("sel-list.txt"))

    assert [e.id for e in entries] == ["1", "2", "3", "4", "5", "6"]
    assert entries[3] == SelEntry(
        "4", CRASH_TIME, "Temperature #0x02", "Upper Critical going high", "Asserted"
    )


def test_sel_elist_last_keeps_the_printed_order() -> None:
    entries = ipmitool.sel_entries(fixture("sel-elist-last-3.txt"))

    assert [e.id for e in entries] == ["6", "7", "8"]


def test_empty_sel_prints_nothing_on_stdout_and_gives_no_entries() -> None:
    assert "SEL has no entries" in fixture("sel-elist-empty.stderr.txt")
    assert ipmitool.sel_entries("") == []
    assert ipmitool.sel_entries("SEL has no entries\n") == []


def test_older_ipmitool_sel_lines_with_hex_ids_four_digit_years_and_pre_init() -> None:
    # ipmitool <= 1.8.18 prints %m/%d/%Y and no zone; record ids are hex (%4x); a
    # kernel panic record (type f0) has one column after the id.
    text = (
        "   1 | 04/11/2023 | 10:29:53 | Power Supply PS1 Status | Power Supply AC lost "
        "| Asserted\n"
        "  1a |  Pre-Init  |0000000019| Event Logging Disabled #0x52 "
        "| Log area reset/cleared | Asserted\n"
        "  1b | 04/11/2023 | 10:30:12 | Memory ECC | Correctable ECC (@DIMM B3(CPU2)) "
        "| Asserted\n"
        "  1c | Linux kernel panic: Fatal excep\n"
    )

    assert ipmitool.sel_entries(text) == [
        SelEntry(
            "1", "2023-04-11T10:29:53", "Power Supply PS1 Status", "Power Supply AC lost",
            "Asserted",
        ),
        SelEntry(
            "1a", "Pre-Init", "Event Logging Disabled #0x52", "Log area reset/cleared",
            "Asserted",
        ),
        SelEntry(
            "1b", "2023-04-11T10:30:12", "Memory ECC", "Correctable ECC (@DIMM B3(CPU2))",
            "Asserted",
        ),
        SelEntry("1c", "", "Linux kernel panic: Fatal excep", ""),
    ]  # fmt: skip


def test_sel_time_in_another_zone_is_kept_without_an_offset() -> None:
    # Without -Z ipmitool prints local time with the zone's abbreviation, which names no
    # offset reliably (EDT, IST); the parser keeps the wall time and claims no zone.
    [entry] = ipmitool.sel_entries(
        "   4 | 06/11/26 | 23:39:19 EDT | Critical Interrupt #0x07 | Bus Uncorrectable error "
        "| Asserted\n"
    )

    assert entry.time == "2026-06-11T23:39:19"


@pytest.mark.parametrize(
    "line",
    [
        "no pipes here",
        "   3 | 02/30/26 | 21:58:07 GMT | Memory #0x40 | Uncorrectable ECC | Asserted",
        "   3 | 11/29/26 | late evening | Memory #0x40 | Uncorrectable ECC | Asserted",
    ],
)
def test_unreadable_sel_lines_are_errors_naming_the_line(line: str) -> None:
    with pytest.raises(ValueError, match="Memory #0x40|no pipes here"):
        ipmitool.sel_entries(line + "\n")


def test_real_sensor_list_gives_kinds_values_and_statuses() -> None:
    readings = ipmitool.readings(fixture("sensor-list.txt"))

    assert readings == [
        Reading("CPU Temp", "temperature", 48.0, "degrees C", "ok"),
        Reading("GPU0 Temp", "temperature", 96.0, "degrees C", "critical"),
        Reading("GPU1 Temp", "temperature", None, "", "na"),
        Reading("FAN1", "fan", 7200.0, "RPM", "ok"),
        Reading("FAN2", "fan", 800.0, "RPM", "warning"),
        Reading("PSU1 Power", "power", 3000.0, "Watts", "ok"),
        Reading("12V", "voltage", 12.0, "Volts", "ok"),
    ]


def test_vendor_sensor_lines_with_critical_discrete_and_missing_readings() -> None:
    # Lines in the shape of a Dell and a Supermicro BMC: a non-recoverable voltage, a
    # fan below its critical threshold, a discrete power supply status (state bits), an
    # absent fan (no reading, no unit), amps.
    text = (
        "Inlet Temp       | 24.000     | degrees C  | ok    | na        | -7.000    "
        "| 3.000     | 38.000    | 42.000    | na        \n"
        "Exhaust Temp     | 76.000     | degrees C  | cr    | na        | 3.000     "
        "| 8.000     | 70.000    | 75.000    | na        \n"
        "Fan3             | 480.000    | RPM        | cr    | na        | 600.000   "
        "| 840.000   | na        | na        | na        \n"
        "FAN4             | na         |            | na    | na        | na        "
        "| na        | na        | na        | na        \n"
        "PS1 Status       | 0x0        | discrete   | 0x0b00| na        | na        "
        "| na        | na        | na        | na        \n"
        "Pwr Consumption  | 350.000    | Watts      | ok    | na        | na        "
        "| na        | 1806.000  | 1966.000  | na        \n"
        "Current 1        | 0.800      | Amps       | ok    | na        | na        "
        "| na        | na        | na        | na        \n"
        "CPU1 VCORE       | 0.240      | Volts      | nr    | 0.500     | 0.600     "
        "| 0.700     | 1.400     | 1.450     | 1.500     \n"
    )

    readings = ipmitool.readings(text)

    assert [(r.name, r.kind, r.value, r.status) for r in readings] == [
        ("Inlet Temp", "temperature", 24.0, "ok"),
        ("Exhaust Temp", "temperature", 76.0, "critical"),
        ("Fan3", "fan", 480.0, "critical"),
        ("FAN4", "fan", None, "na"),
        ("PS1 Status", "other", None, "na"),
        ("Pwr Consumption", "power", 350.0, "ok"),
        ("Current 1", "other", 0.8, "ok"),
        ("CPU1 VCORE", "voltage", 0.24, "critical"),
    ]


@pytest.mark.parametrize(
    "line",
    [
        "CPU Temp | 48.000",
        "CPU Temp | hot | degrees C | ok | na | na | na | 85.000 | 95.000 | 105.000",
        "CPU Temp | 48.000 | degrees C | melting | na | na | na | 85.000 | 95.000 | 105.000",
    ],
)
def test_unreadable_sensor_lines_are_errors_naming_the_line(line: str) -> None:
    with pytest.raises(ValueError, match="CPU Temp"):
        ipmitool.readings(line + "\n")


def test_real_mc_info_gives_firmware_and_details_with_continuations() -> None:
    info = ipmitool.mc_info(fixture("mc-info.txt"))

    assert (info.firmware, info.manufacturer, info.model) == (
        "9.08",
        "MontaVista Software, Inc.",
        "Unknown (0xF02)",
    )
    assert info.details["IPMI Version"] == "2.0"
    assert info.details["Manufacturer ID"] == "4753"
    assert info.details["Additional Device Support"] == (
        "Sensor Device, SDR Repository Device, SEL Device, FRU Inventory Device, "
        "IPMB Event Receiver, Chassis Device"
    )
    assert info.details["Aux Firmware Rev Info"] == "0x00, 0x00, 0x00, 0x00"
    assert "Firmware Revision" not in info.details


def test_mc_info_without_a_firmware_revision_is_an_error() -> None:
    text = fixture("mc-info.txt").replace("Firmware Revision         : 9.08\n", "")

    with pytest.raises(ValueError, match="no Firmware Revision"):
        ipmitool.mc_info(text)


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("wrong-password.stderr.txt", Failure.SESSION),
        ("silent-bmc.stderr.txt", Failure.SESSION),
        ("wrong-password-v.stderr.txt", Failure.LOGIN),
        ("unknown-user-v.stderr.txt", Failure.LOGIN),
        ("silent-bmc-v.stderr.txt", Failure.NO_ANSWER),
        ("silent-after-2-datagrams.stderr.txt", Failure.NO_ANSWER),
        ("silent-after-6-datagrams.stderr.txt", Failure.NO_ANSWER),
        ("silent-after-9-datagrams.stderr.txt", Failure.NO_ANSWER),
        ("cipher-17.stderr.txt", Failure.CIPHER),
        ("chassis-power-diag.stderr.txt", Failure.REFUSED),
    ],
)
def test_real_failure_texts_are_classified(name: str, kind: Failure) -> None:
    assert ipmitool.failure(fixture(name)) is kind


@pytest.mark.parametrize(
    ("stderr", "kind"),
    [
        ("Set Chassis Power Control to Cycle failed: Command not supported in present state",
         Failure.PRESENT_STATE),
        ("Unable to send RAW command (channel=0x0 netfn=0x30 lun=0x0 cmd=0x30 rsp=0xd5): "
         "Command not supported in present state", Failure.PRESENT_STATE),
        ("Set Chassis Power Control to Down/Off failed: Insufficient privilege level",
         Failure.PRIVILEGE),
        ("RAKP 2 message indicates an error : unauthorized role or privilege level requested\n"
         "Error: Unable to establish IPMI v2 / RMCP+ session", Failure.PRIVILEGE),
        ("RAKP 2 message indicates an error : insufficient resources for session\n"
         "Error: Unable to establish IPMI v2 / RMCP+ session", Failure.BUSY),
        ("Get SEL Info command failed: Node busy", Failure.BUSY),
        ("Get Device ID command failed: BMC initialization in progress", Failure.BUSY),
        ("Get SEL Info command failed: Invalid command", Failure.REFUSED),
        ("Unable to get Chassis Power Status", Failure.NO_ANSWER),
    ],
)  # fmt: skip
def test_vendor_failure_texts_are_classified(stderr: str, kind: Failure) -> None:
    assert ipmitool.failure(stderr + "\n") is kind


def test_reason_drops_the_lines_ipmitool_prints_on_every_run() -> None:
    assert ipmitool.reason(fixture("wrong-password-v.stderr.txt")) == (
        "> RAKP 2 HMAC is invalid; Error: Unable to establish IPMI v2 / RMCP+ session"
    )
    assert ipmitool.reason(fixture("silent-after-9-datagrams.stderr.txt")) == (
        "No valid response received; Unable to get Chassis Power Status"
    )
    assert ipmitool.reason("Unable to Get Channel Cipher Suites\n") == "no reason given"

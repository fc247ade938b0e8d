"""Parsers for what `ipmitool` prints: text in, the BMC protocol's types out.

Stdout of `chassis power status`, `sel list` / `sel elist`, `sensor list` and `mc info`,
and the failure texts ipmitool writes to stderr (`failure`, `reason`), which tell a BMC
that refused from one that never answered. Nothing here runs a command; output that
cannot be read raises `ValueError` naming the line.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from enum import StrEnum

from bot.actions.bmc.protocol import BmcInfo, PowerState, Reading, SelEntry, SensorKind

_POWER = re.compile(r"^Chassis Power is (on|off)\s*$", re.MULTILINE)
# ipmitool 1.8.19 prints SEL dates with strftime's %x (MM/DD/YY under LANG=C); older
# versions print MM/DD/YYYY. A time may carry the zone (`GMT` under -Z).
_DATE = re.compile(r"^\d{2}/\d{2}/(\d{2}|\d{4})$")
_TIME = re.compile(r"^(\d{2}:\d{2}:\d{2})(?:\s+(\S+))?$")
_UTC_ZONES = frozenset({"GMT", "UTC", "Z"})
_DIRECTIONS = frozenset({"Asserted", "Deasserted"})

_KIND_BY_UNIT: dict[str, SensorKind] = {
    "degrees C": "temperature",
    "degrees F": "temperature",
    "RPM": "fan",
    "Watts": "power",
    "Volts": "voltage",
}
# A sensor without a reading has no unit either; its name is what operators grep for.
_KIND_BY_NAME: tuple[tuple[str, SensorKind], ...] = (
    ("temp", "temperature"),
    ("fan", "fan"),
    ("power", "power"),
    ("pwr", "power"),
    ("volt", "voltage"),
)
_STATUS = {
    "ok": "ok",
    "nc": "warning",
    "lnc": "warning",
    "unc": "warning",
    "cr": "critical",
    "lcr": "critical",
    "ucr": "critical",
    "nr": "critical",
    "lnr": "critical",
    "unr": "critical",
    "na": "na",
    "ns": "na",
}
_HEX = re.compile(r"^0x[0-9a-fA-F]+$")


def power_state(text: str) -> PowerState:
    """`chassis power status`: `Chassis Power is on` or `... is off`."""
    found = _POWER.search(text)
    if found is None:
        raise ValueError(f"no `Chassis Power is on|off` line in {text.strip()[:200]!r}")
    return PowerState.ON if found.group(1) == "on" else PowerState.OFF


def sel_entries(text: str) -> list[SelEntry]:
    """`sel list` / `sel elist`, one entry a line, in the order printed (oldest first).

    Lines look like `   3 | 11/29/26 | 21:58:07 GMT | Memory #0x40 | Uncorrectable ECC |
    Asserted`; entries logged before the BMC's clock was set print `Pre-Init` (and the
    seconds since the BMC started) instead of a date; OEM records without a timestamp
    print only `id | OEM record e0 | <hex>` (type f0: `id | Linux kernel panic: ...`).
    `elist` may add a last column (`Reading 96 > Threshold 95 degrees C`), kept in the
    event text.
    """
    entries = []
    for line in text.splitlines():
        if not line.strip() or line.strip() == "SEL has no entries":
            continue
        fields = [f.strip() for f in line.split("|")]
        if len(fields) < 2 or not fields[0]:
            raise ValueError(f"not a SEL line: {line!r}")
        time, rest = _sel_time(fields[1:], line)
        sensor, event, *more = rest + [""] * (2 - len(rest))
        direction = more.pop(0) if more and more[0] in _DIRECTIONS else ""
        details = "; ".join(m for m in more if m)
        if details:
            event = f"{event} ({details})"
        entries.append(SelEntry(fields[0], time, sensor, event, direction))
    return entries


def _sel_time(fields: list[str], line: str) -> tuple[str, list[str]]:
    """The entry's time and the fields after it."""
    first = fields[0]
    if first.startswith("Pre-Init"):
        # `Pre-Init |0000000978|`: the raw timestamp (seconds since the BMC started).
        skip = 2 if len(fields) > 1 and fields[1].isdigit() else 1
        return "Pre-Init", fields[skip:]
    if not _DATE.match(first):
        return "", fields
    clock = _TIME.match(fields[1]) if len(fields) > 1 else None
    if clock is None:
        raise ValueError(f"a SEL date without a time: {line!r}")
    year_format = "%y" if len(first) == 8 else "%Y"
    try:
        stamp = datetime.strptime(f"{first} {clock.group(1)}", f"%m/%d/{year_format} %H:%M:%S")
    except ValueError as exc:
        raise ValueError(f"a SEL time that is no date: {line!r}") from exc
    if clock.group(2) in _UTC_ZONES:
        stamp = stamp.replace(tzinfo=UTC)
    return stamp.isoformat(), fields[2:]


def readings(text: str) -> list[Reading]:
    """`sensor list`: `name | value | unit | status | lnr | lc | lnc | unc | uc | unr`.

    A threshold sensor's status is `ok`, `nc` (warning), `cr` or `nr` (critical) or `na`
    (no reading). A discrete sensor prints its state bits (`0x0 | discrete | 0x0100`),
    which mean nothing without its type: it is read as no value and status `na`.
    """
    found = []
    for line in text.splitlines():
        if not line.strip():
            continue
        fields = [f.strip() for f in line.split("|")]
        if len(fields) < 4:
            raise ValueError(f"not a sensor line: {line!r}")
        name, value, unit, status = fields[:4]
        found.append(
            Reading(
                name=name,
                kind=_kind(unit, name),
                value=_value(value, line),
                unit=unit,
                status=_status(status, line),
            )
        )
    return found


def _kind(unit: str, name: str) -> SensorKind:
    if unit in _KIND_BY_UNIT:
        return _KIND_BY_UNIT[unit]
    if not unit:
        lowered = name.lower()
        for word, kind in _KIND_BY_NAME:
            if word in lowered:
                return kind
    return "other"


def _value(text: str, line: str) -> float | None:
    if text == "na" or _HEX.match(text):
        return None
    try:
        return float(text)
    except ValueError:
        raise ValueError(f"a sensor value that is no number: {line!r}") from None


def _status(text: str, line: str) -> str:
    if _HEX.match(text):
        return "na"
    if text not in _STATUS:
        raise ValueError(f"an unknown sensor status {text!r}: {line!r}")
    return _STATUS[text]


def mc_info(text: str) -> BmcInfo:
    """`mc info`: `Key : value` lines; indented lines continue the key above them."""
    fields: dict[str, str] = {}
    key = None
    for line in text.splitlines():
        if not line.strip():
            continue
        if line[0].isspace():
            if key is None:
                raise ValueError(f"a continuation line before any key: {line!r}")
            fields[key] = ", ".join(v for v in (fields[key], line.strip()) if v)
            continue
        key, colon, value = line.partition(":")
        if not colon:
            raise ValueError(f"not a `Key : value` line: {line!r}")
        key = key.strip()
        fields[key] = value.strip()
    firmware = fields.pop("Firmware Revision", None)
    if not firmware:
        raise ValueError(f"no Firmware Revision in {text.strip()[:200]!r}")
    return BmcInfo(
        firmware=firmware,
        manufacturer=fields.pop("Manufacturer Name", ""),
        model=fields.pop("Product Name", ""),
        details=fields,
    )


class Failure(StrEnum):
    """Why an ipmitool run failed, as far as its stderr tells."""

    LOGIN = "login"
    """The BMC refused the user name or password."""
    PRIVILEGE = "privilege"
    """The user may not do this (or may not ask for the session's privilege level)."""
    CIPHER = "cipher"
    """No cipher suite both sides accept."""
    BUSY = "busy"
    """The BMC answered that it cannot serve the request now."""
    NO_ANSWER = "no answer"
    """The BMC did not answer (at all, or after the session opened)."""
    PRESENT_STATE = "present state"
    """The BMC refused the command in its present state (power cycle while off)."""
    SESSION = "session"
    """The session failed without saying why: ipmitool prints the cause only with -v."""
    REFUSED = "refused"
    """The BMC answered with an error completion code."""


# Checked in this order against stderr. Completion code and RAKP texts are ipmitool's
# (lib/ipmi_strings.c, src/plugins/lanplus). ipmitool prints `X failed` when the BMC sent
# no response and `X failed: <completion code>` when it refused.
_FAILURES = tuple(
    (kind, re.compile(pattern, re.IGNORECASE | re.MULTILINE))
    for kind, pattern in (
        (
            Failure.PRIVILEGE,
            r"insufficient privilege|role or privilege|privilege level to \w+ failed:",
        ),
        (
            Failure.LOGIN,
            r"hmac is invalid|unauthorized name|invalid user name|invalid name length"
            r"|invalid role|integrity check value",
        ),
        (Failure.CIPHER, r"algorithm|cipher suite|no matching \w+ payload"),
        (
            Failure.BUSY,
            r"insufficient resources|node busy|timeout|response could not be provided"
            r"|in update mode|initialization in progress|destination unavailable",
        ),
        (
            Failure.NO_ANSWER,
            r"no response|no valid response|error sending request|get auth capabilities error"
            r"|authentication capabilities request|failed$",
        ),
        (Failure.PRESENT_STATE, r"not supported in present state"),
        (Failure.SESSION, r"unable to establish ipmi v2"),
        (
            Failure.REFUSED,
            r"failed: |rsp=0x|invalid command|invalid data field|parameter out of range"
            r"|request data|record not found|unspecified error|duplicated request"
            r"|reservation cancel|out of space",
        ),
    )
)
# Lines ipmitool prints on success too, or only with -v.
_NOISE = (
    "Unable to Get Channel Cipher Suites",
    "Close Session command failed",
    "Loading IANA PEN Registry",
    "Running Get VSO Capabilities",
    "Invalid completion code received: Invalid command",
    "Discovered IPMB address",
)


def _meaningful(stderr: str) -> list[str]:
    lines = [line.strip() for line in stderr.splitlines()]
    return [line for line in lines if line and not line.startswith(_NOISE)]


def reason(stderr: str) -> str:
    """What ipmitool said went wrong, on one line, without the lines it always prints."""
    text = "; ".join(_meaningful(stderr)) or "no reason given"
    return text if len(text) <= 300 else text[:297] + "..."


def failure(stderr: str) -> Failure:
    """Classify a failed run by its stderr. A failure without a completion code is a
    BMC that went silent (ipmitool prints `Unable to get Chassis Power Status`)."""
    text = "\n".join(_meaningful(stderr))
    for kind, pattern in _FAILURES:
        if pattern.search(text):
            return kind
    return Failure.NO_ANSWER

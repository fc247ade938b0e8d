"""Reading Redfish documents: JSON objects in, the BMC protocol's values out.

A ComputerSystem gives the power state and, with its Manager, `BmcInfo`; LogEntry
members of the SEL become `SelEntry`s, oldest first; the legacy `Thermal` and `Power`
resources of a Chassis become `Reading`s. Nothing here sends a request. BMCs leave out
much of what the schema allows, so every field is read defensively: a missing or
mistyped value reads as empty, never as an error (only a member without a link is one).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from bot.actions.bmc.protocol import BmcInfo, PowerState, Reading, SelEntry, SensorKind
from bot.errors import PermanentActionError

Doc = dict[str, Any]

POWER_STATES = {
    "On": PowerState.ON,
    "Off": PowerState.OFF,
    "PoweringOn": PowerState.POWERING_ON,
    "PoweringOff": PowerState.POWERING_OFF,
}
HEALTH = {"OK": "ok", "Warning": "warning", "Critical": "critical"}
NO_READING_STATES = {"Absent", "Disabled", "StandbyOffline", "UnavailableOffline"}


# -- fields -------------------------------------------------------------------------------


def child(doc: Doc, key: str) -> Doc:
    value = doc.get(key)
    return value if isinstance(value, dict) else {}


def children(doc: Doc, key: str) -> list[Doc]:
    value = doc.get(key)
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def link(doc: Doc, key: str) -> str | None:
    found = child(doc, key).get("@odata.id")
    return found if isinstance(found, str) and found else None


def first_link(doc: Doc, key: str) -> str | None:
    """The first of `Links.{key}` (a ComputerSystem's ManagedBy, Chassis)."""
    refs = child(doc, "Links").get(key)
    first = refs[0] if isinstance(refs, list) and refs else None
    found = first.get("@odata.id") if isinstance(first, dict) else None
    return found if isinstance(found, str) else None


def text(doc: Doc, key: str) -> str:
    value = doc.get(key)
    return value if isinstance(value, str) else ""


def ref(member: Doc, path: str) -> str:
    """The link of a member of the collection at `path`."""
    found = member.get("@odata.id")
    if not isinstance(found, str):
        raise PermanentActionError(f"a member of {path} has no @odata.id link")
    return found


# -- ComputerSystem and Manager -----------------------------------------------------------


def power_state(system: Doc) -> PowerState:
    value = system.get("PowerState")
    if not isinstance(value, str):
        return PowerState.UNKNOWN
    return POWER_STATES.get(value, PowerState.UNKNOWN)


def bmc_info(system: Doc, manager: Doc) -> BmcInfo:
    details = {
        "manager": manager.get("Id"),
        "manager_type": manager.get("ManagerType"),
        "manager_model": manager.get("Model"),
        "system": system.get("Id"),
        "serial": system.get("SerialNumber"),
        "bios": system.get("BiosVersion"),
        "uuid": system.get("UUID"),
        "power_state": system.get("PowerState"),
        "health": child(system, "Status").get("Health"),
    }
    return BmcInfo(
        firmware=text(manager, "FirmwareVersion") or "unknown",
        manufacturer=text(system, "Manufacturer"),
        model=text(system, "Model"),
        details={k: v for k, v in details.items() if isinstance(v, str) and v},
    )


# -- the SEL ------------------------------------------------------------------------------


def id_key(link_or_id: str) -> tuple[int, int, str]:
    """Orders links (or ids) by their last segment: numbers by value, before names."""
    last = link_or_id.rstrip("/").rsplit("/", 1)[-1]
    return (0, int(last), "") if last.isdigit() else (1, 0, last)


def sel_entries(members: list[Doc], limit: int) -> list[SelEntry]:
    """The newest `limit` LogEntry documents, by creation time then id, oldest first."""
    entries = sorted(members, key=lambda doc: (_created_key(doc), id_key(_entry_id(doc))))
    return [_sel_entry(doc) for doc in entries[-limit:]]


def _entry_id(doc: Doc) -> str:
    value = doc.get("Id")
    if isinstance(value, str | int) and not isinstance(value, bool):
        return str(value)
    found = doc.get("@odata.id")
    return found.rstrip("/").rsplit("/", 1)[-1] if isinstance(found, str) else ""


def _parse_time(value: str) -> datetime | None:
    try:
        when = datetime.fromisoformat(value)
    except ValueError:
        return None
    return when if when.tzinfo else when.replace(tzinfo=UTC)


def _created_key(doc: Doc) -> datetime:
    created = doc.get("Created")
    when = _parse_time(created) if isinstance(created, str) else None
    return when or datetime.min.replace(tzinfo=UTC)


def _sel_entry(doc: Doc) -> SelEntry:
    created = text(doc, "Created")
    when = _parse_time(created)
    sensor_type, number = text(doc, "SensorType"), doc.get("SensorNumber")
    if sensor_type:
        has_number = isinstance(number, int) and not isinstance(number, bool)
        sensor = f"{sensor_type} #0x{number:02x}" if has_number else sensor_type
    else:
        sensor = text(doc, "MessageId") or text(doc, "Name")
    code = text(doc, "EntryCode")
    severity = text(doc, "Severity")
    return SelEntry(
        id=_entry_id(doc),
        time=when.isoformat() if when else created,
        sensor=sensor,
        event=text(doc, "Message"),
        direction={"Assert": "Asserted", "Deassert": "Deasserted"}.get(code, ""),
        severity=HEALTH.get(severity, severity.lower()),
    )


# -- Thermal and Power --------------------------------------------------------------------


def thermal_readings(thermal: Doc) -> list[Reading]:
    """Temperatures, then fans (in RPM unless the fan says otherwise)."""
    readings: list[Reading] = []
    for item in children(thermal, "Temperatures"):
        readings.append(_reading(item, "temperature", "ReadingCelsius", "degrees C"))
    for item in children(thermal, "Fans"):
        key = "Reading" if "Reading" in item else "ReadingRPM"
        readings.append(_reading(item, "fan", key, text(item, "ReadingUnits") or "RPM"))
    return readings


def power_readings(power: Doc) -> list[Reading]:
    """Power consumed, then voltages."""
    readings: list[Reading] = []
    for item in children(power, "PowerControl"):
        readings.append(_reading(item, "power", "PowerConsumedWatts", "Watts"))
    for item in children(power, "Voltages"):
        readings.append(_reading(item, "voltage", "ReadingVolts", "Volts"))
    return readings


def _reading(item: Doc, kind: SensorKind, key: str, unit: str) -> Reading:
    raw = item.get(key)
    value = float(raw) if isinstance(raw, int | float) and not isinstance(raw, bool) else None
    name = text(item, "Name") or text(item, "FanName") or text(item, "MemberId") or key
    return Reading(name=name, kind=kind, value=value, unit=unit, status=_status(item, value))


def _status(item: Doc, value: float | None) -> str:
    status = child(item, "Status")
    health = HEALTH.get(text(status, "Health"))
    if value is None or text(status, "State") in NO_READING_STATES:
        return health if health in ("warning", "critical") else "na"
    if health is not None:
        return health
    # No Health: judge by the thresholds the sensor publishes, as ipmitool does.
    for level, suffixes in (("critical", ("Fatal", "Critical")), ("warning", ("NonCritical",))):
        for suffix in suffixes:
            upper, lower = item.get(f"UpperThreshold{suffix}"), item.get(f"LowerThreshold{suffix}")
            if isinstance(upper, int | float) and value >= upper:
                return level
            if isinstance(lower, int | float) and value <= lower:
                return level
    return "ok"

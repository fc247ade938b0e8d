"""The Redfish documents of the simulated BMCs, built from a copy of a node's `Machine`.

ServiceRoot, the Systems/Managers/Chassis collections and members, LogServices with the
SEL and its entries (IPMI sensor types and numbers), and the Base error body; the
Chassis' Thermal and Power readings are `redfish_sensors`'. Plain JSON objects only: no
HTTP, no locks, no quirks; `redfish_routes` serves them.
"""

from __future__ import annotations

import re
import uuid
from datetime import datetime
from typing import Any

from bot.sim import hardware
from bot.sim.scenario import Hardware

Doc = dict[str, Any]
ROOT = "/redfish/v1"
PAGE = 50
"""SEL entries per page of the Entries collection."""
BASE = "Base.1.16."
# The sensor names of `hardware` as an IPMI SEL types and numbers them.
_SENSORS = {
    "System Event": ("System Event", 0x01),
    "Power Unit": ("PowerUnit", 0x02),
    "ACPI State": ("System ACPI PowerState", 0x03),
    "Chassis Control": ("Chassis", 0x04),
}


def ref(path: str) -> Doc:
    return {"@odata.id": path}


def collection(path: str, kind: str, name: str, members: list[Doc]) -> Doc:
    return {
        "@odata.id": path,
        "@odata.type": f"#{kind}.{kind}",
        "Name": name,
        "Members@odata.count": len(members),
        "Members": members,
    }


def error(status: int, message_id: str, message: str, args: tuple[str, ...]) -> Doc:
    """A Redfish error body with one Base message in its ExtendedInfo."""
    info = {
        "@odata.type": "#Message.v1_1_1.Message",
        "MessageId": BASE + message_id,
        "Message": message,
        "MessageArgs": list(args),
        "Severity": "Critical" if status >= 500 else "Warning",
    }
    return {
        "error": {
            "code": BASE + "GeneralError",
            "message": "A general error has occurred. See ExtendedInfo for more information.",
            "@Message.ExtendedInfo": [info],
        }
    }


def service_root(scenario: str) -> Doc:
    return {
        "@odata.id": ROOT,
        "@odata.type": "#ServiceRoot.v1_15_0.ServiceRoot",
        "Id": "RootService",
        "Name": "runbook-bot simulated BMCs",
        "RedfishVersion": "1.17.0",
        "UUID": str(uuid.uuid5(uuid.NAMESPACE_URL, scenario)),
        "Systems": ref(f"{ROOT}/Systems"),
        "Managers": ref(f"{ROOT}/Managers"),
        "Chassis": ref(f"{ROOT}/Chassis"),
    }


# -- Systems and Managers -----------------------------------------------------------------


def system(m: hardware.Machine, hw: Hardware, reset_types: tuple[str, ...]) -> Doc:
    """The node's ComputerSystem, whose reset action lists `reset_types`."""
    node = m.node
    path = f"{ROOT}/Systems/{node}"
    failing = any(g.temperature >= 85 or not g.present for g in m.gpus)
    health = "Critical" if failing else "OK"
    return {
        "@odata.id": path,
        "@odata.type": "#ComputerSystem.v1_20_0.ComputerSystem",
        "Id": node,
        "Name": node,
        "SystemType": "Physical",
        "HostName": node,
        "Manufacturer": hw.bmc_manufacturer,
        "Model": hw.bmc_model,
        "SerialNumber": f"S{uuid.uuid5(uuid.NAMESPACE_DNS, node).hex[:10].upper()}",
        "UUID": str(uuid.uuid5(uuid.NAMESPACE_DNS, node)),
        "BiosVersion": "2.1a",
        "PowerState": m.power,
        "Status": {
            "State": "Enabled" if m.power == "On" else "StandbyOffline",
            "Health": health,
            "HealthRollup": health,
        },
        "LogServices": ref(f"{path}/LogServices"),
        "Links": {
            "Chassis": [ref(f"{ROOT}/Chassis/{node}")],
            "ManagedBy": [ref(f"{ROOT}/Managers/{node}")],
        },
        "Actions": {
            "#ComputerSystem.Reset": {
                "target": f"{path}/Actions/ComputerSystem.Reset",
                "ResetType@Redfish.AllowableValues": list(reset_types),
            }
        },
    }


def manager(node: str, firmware: str, now: datetime) -> Doc:
    path = f"{ROOT}/Managers/{node}"
    return {
        "@odata.id": path,
        "@odata.type": "#Manager.v1_17_0.Manager",
        "Id": node,
        "Name": f"BMC of {node}",
        "ManagerType": "BMC",
        "FirmwareVersion": firmware,
        "PowerState": "On",
        "Status": {"State": "Enabled", "Health": "OK"},
        "DateTime": now.isoformat(),
        "LogServices": ref(f"{path}/LogServices"),
        "Links": {
            "ManagerForServers": [ref(f"{ROOT}/Systems/{node}")],
            "ManagerForChassis": [ref(f"{ROOT}/Chassis/{node}")],
        },
    }


# -- the SEL ------------------------------------------------------------------------------


def log_services(path: str, has_sel: bool) -> Doc:
    members = [ref(f"{path}/SEL")] if has_sel else []
    return collection(path, "LogServiceCollection", "Log Services", members)


def sel_service(path: str, now: datetime) -> Doc:
    return {
        "@odata.id": path,
        "@odata.type": "#LogService.v1_4_0.LogService",
        "Id": "SEL",
        "Name": "IPMI System Event Log",
        "LogEntryType": "SEL",
        "MaxNumberOfRecords": 3639,
        "OverWritePolicy": "WrapsWhenFull",
        "ServiceEnabled": True,
        "DateTime": now.isoformat(),
        "Status": {"State": "Enabled", "Health": "OK"},
        "Entries": ref(f"{path}/Entries"),
    }


def sel_entries(path: str, records: list[hardware.SelRecord], start: int) -> Doc:
    """The page of the Entries collection at `path` that starts at record `start`."""
    page = [sel_entry(path, r) for r in records[start : start + PAGE]]
    doc = collection(path, "LogEntryCollection", "System Event Log Entries", page)
    doc["Members@odata.count"] = len(records)
    if start + PAGE < len(records):
        doc["Members@odata.nextLink"] = f"{path}?$skip={start + PAGE}"
    return doc


def sel_entry(path: str, record: hardware.SelRecord) -> Doc:
    sensor_type, number = _sel_sensor(record.sensor)
    return {
        "@odata.id": f"{path}/{record.id}",
        "@odata.type": "#LogEntry.v1_15_0.LogEntry",
        "Id": str(record.id),
        "Name": f"SEL entry {record.id}",
        "EntryType": "SEL",
        "Created": record.time.isoformat(),
        "SensorType": sensor_type,
        "SensorNumber": number,
        "EntryCode": "Assert",
        "Message": f"{record.sensor}: {record.event}",
        "Severity": record.severity,
    }


def _sel_sensor(name: str) -> tuple[str, int]:
    """The IPMI sensor type and number of one of `hardware`'s sensor names."""
    gpu = re.fullmatch(r"GPU(\d+) (Temp|Status)", name)
    if gpu is None:
        return _SENSORS.get(name, ("Other Units-based Sensor", 0xF0))
    index = int(gpu.group(1))
    return (
        ("Temperature", 0x30 + index) if gpu.group(2) == "Temp" else ("Add-in Card", 0x40 + index)
    )


# -- Chassis ------------------------------------------------------------------------------


def chassis(m: hardware.Machine, hw: Hardware) -> Doc:
    node = m.node
    path = f"{ROOT}/Chassis/{node}"
    return {
        "@odata.id": path,
        "@odata.type": "#Chassis.v1_21_0.Chassis",
        "Id": node,
        "Name": f"Chassis of {node}",
        "ChassisType": "RackMount",
        "Manufacturer": hw.bmc_manufacturer,
        "Model": hw.bmc_model,
        "PowerState": m.power,
        "Status": {"State": "Enabled", "Health": "OK"},
        "Thermal": ref(f"{path}/Thermal"),
        "Power": ref(f"{path}/Power"),
        "Links": {
            "ComputerSystems": [ref(f"{ROOT}/Systems/{node}")],
            "ManagedBy": [ref(f"{ROOT}/Managers/{node}")],
        },
    }

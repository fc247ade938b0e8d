"""The readings of a simulated BMC's Chassis: the legacy Redfish `Thermal` and `Power`.

Inlet and GPU temperatures, fans, input power and voltage rails of a copy of a node's
`Machine`, each sensor with DMTF-style (non-critical, critical, fatal) thresholds and
the Health they imply. While the machine is off its GPUs and fans read nothing and it
draws standby power.
"""

from __future__ import annotations

from bot.sim import hardware
from bot.sim.redfish_documents import ROOT, Doc


def thermal(m: hardware.Machine) -> Doc:
    """Inlet and GPU temperatures and six fans; GPUs and fans read none while off."""
    path = f"{ROOT}/Chassis/{m.node}/Thermal"
    powered = m.power == "On"
    temperatures: list[Doc] = [
        _sensor(
            f"{path}#/Temperatures/0",
            "Inlet Temp",
            "Intake",
            "ReadingCelsius",
            m.inlet_temperature,
            upper=(35, 40, 45),
        ),
    ]
    for gpu in m.gpus:
        reading = gpu.temperature if powered and gpu.present else None
        item = _sensor(
            f"{path}#/Temperatures/{gpu.index + 1}",
            f"GPU{gpu.index} Temp",
            "GPU",
            "ReadingCelsius",
            reading,
            upper=(80, 85, 95),
        )
        if not gpu.present:
            item["Status"] = {"State": "Absent"}
        temperatures.append(item)
    fans = [
        _sensor(
            f"{path}#/Fans/{i}",
            f"FAN{i + 1}",
            "Fan",
            "Reading",
            m.fan_rpm if powered else None,
            lower=(1500, 1000, 500),
        )
        for i in range(6)
    ]
    for fan in fans:
        fan["ReadingUnits"] = "RPM"
    return {
        "@odata.id": path,
        "@odata.type": "#Thermal.v1_7_1.Thermal",
        "Id": "Thermal",
        "Name": "Thermal",
        "Temperatures": temperatures,
        "Fans": fans,
    }


def power(m: hardware.Machine) -> Doc:
    """Input power (standby watts when off) and three voltage rails."""
    path = f"{ROOT}/Chassis/{m.node}/Power"
    watts = m.power_watts if m.power == "On" else 38.0
    control = {
        "@odata.id": f"{path}#/PowerControl/0",
        "MemberId": "0",
        "Name": "System Input Power",
        "PowerConsumedWatts": watts,
        "PowerCapacityWatts": 10200,
        "Status": {"State": "Enabled", "Health": "OK"},
    }
    # (name, nominal, reading): thresholds at 5, 10 and 15 % off nominal.
    rails = [("P12V", 12.0, 12.05), ("P5V", 5.0, 5.02), ("P3V3", 3.3, 3.31)]
    voltages = [
        _sensor(
            f"{path}#/Voltages/{i}",
            name,
            "VoltageRegulator",
            "ReadingVolts",
            volts,
            upper=(nominal * 1.05, nominal * 1.1, nominal * 1.15),
            lower=(nominal * 0.95, nominal * 0.9, nominal * 0.85),
        )
        for i, (name, nominal, volts) in enumerate(rails)
    ]
    return {
        "@odata.id": path,
        "@odata.type": "#Power.v1_7_1.Power",
        "Id": "Power",
        "Name": "Power",
        "PowerControl": [control],
        "Voltages": voltages,
    }


def _sensor(
    link: str,
    name: str,
    context: str,
    key: str,
    value: float | None,
    *,
    upper: tuple[float, float, float] | None = None,
    lower: tuple[float, float, float] | None = None,
) -> Doc:
    """A legacy Thermal/Power sensor with (non-critical, critical, fatal) thresholds."""
    health = "OK"
    levels = ("NonCritical", "Critical", "Fatal")
    item: Doc = {"@odata.id": link, "MemberId": link.rsplit("/", 1)[-1], "Name": name}
    item["PhysicalContext"] = context
    for bounds, side in ((upper, "Upper"), (lower, "Lower")):
        for level, bound in zip(levels, bounds or (), strict=False):
            item[f"{side}Threshold{level}"] = round(bound, 3)
            crossed = value is not None and (value >= bound if side == "Upper" else value <= bound)
            if crossed:
                health = _health(health, "Warning" if level == "NonCritical" else "Critical")
    if value is None:
        item["Status"] = {"State": "StandbyOffline"}
    else:
        item[key] = value
        item["Status"] = {"State": "Enabled", "Health": health}
    return item


def _health(*levels: str) -> str:
    order = ["OK", "Warning", "Critical"]
    return max(levels, key=order.index, default="OK")

"""Parser for `ibstat` (infiniband-diags), as a node Job captures it: text in, adapters out.

`ibstat` prints each channel adapter as `CA 'mlx5_0'` followed by tab-indented facts
(CA type, firmware, GUIDs) and a `Port N:` block per port (State, Physical state, Rate,
Base lid, LMC, SM lid, Capability mask, Port GUID, Link layer). `ibstat mlx5_0 1` prints
one port under `CA: 'mlx5_0'` without the indentation. Rates are Gb/s ("2.5" for 1x SDR,
"100 (FDR10)"). Nothing here runs a command; malformed output raises `ValueError`.
"""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, Field

_CA = re.compile(r"^(?P<kind>CA|Switch|Router|iWARP RNIC|\?\?\?):? '(?P<name>[^']+)'$")
_PORT = re.compile(r"^Port (?P<number>\d+):$")
_FACT = re.compile(r"^(?P<key>[A-Za-z][A-Za-z ]*?):\s*(?P<value>.*)$")
_RATE = re.compile(r"^(?P<rate>\d+(?:\.\d+)?)(?:\s*\((?P<note>[^)]*)\))?$")


class _Parsed(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Port(_Parsed):
    number: int
    state: str | None = Field(None, description="Down, Initializing, Armed, Active")
    physical_state: str | None = Field(None, description="Polling, Disabled, LinkUp, ...")
    rate: float | None = Field(None, description="Gb/s")
    rate_note: str | None = Field(None, description="e.g. FDR10")
    base_lid: int | None = None
    lmc: int | None = None
    sm_lid: int | None = None
    capability_mask: str | None = None
    port_guid: str | None = None
    link_layer: str | None = Field(None, description="InfiniBand or Ethernet (RoCE)")

    @property
    def infiniband(self) -> bool:
        return (self.link_layer or "InfiniBand").lower() == "infiniband"

    @property
    def rate_text(self) -> str:
        if self.rate is None:
            return "?"
        return f"{self.rate:g}"


class Adapter(_Parsed):
    name: str
    kind: str = "CA"
    ca_type: str | None = None
    number_of_ports: int | None = None
    firmware_version: str | None = None
    hardware_version: str | None = None
    node_guid: str | None = None
    system_image_guid: str | None = None
    ports: list[Port] = Field(default_factory=list)


_ADAPTER_KEYS = {
    "Number of ports": "number_of_ports",
    "Firmware version": "firmware_version",
    "Hardware version": "hardware_version",
    "Node GUID": "node_guid",
    "System image GUID": "system_image_guid",
}
_PORT_KEYS = {
    "State": "state",
    "Physical state": "physical_state",
    "Base lid": "base_lid",
    "LMC": "lmc",
    "SM lid": "sm_lid",
    "Capability mask": "capability_mask",
    "Port GUID": "port_guid",
    "Link layer": "link_layer",
}
_INTS = {"number_of_ports", "base_lid", "lmc", "sm_lid"}


def parse(text: str) -> list[Adapter]:
    """Every adapter and port `ibstat` printed, in order. Empty output: no adapters."""
    adapters: list[tuple[dict[str, object], list[dict[str, object]]]] = []
    port: dict[str, object] | None = None
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line:
            continue
        if match := _CA.match(line):
            adapters.append(({"name": match["name"], "kind": match["kind"]}, []))
            port = None
            continue
        if not adapters:
            raise ValueError(f"ibstat line {number}: expected CA '<name>', got {line[:80]!r}")
        facts, ports = adapters[-1]
        if match := _PORT.match(line):
            port = {"number": int(match["number"])}
            ports.append(port)
            continue
        match = _FACT.match(line)
        if not match:
            raise ValueError(f"ibstat line {number}: not 'key: value': {line[:80]!r}")
        key, value = match["key"], match["value"].strip()
        if port is not None and (key == "Rate" or key in _PORT_KEYS):
            _port_fact(port, key, value, number)
            continue
        field = "ca_type" if key.endswith(" type") else _ADAPTER_KEYS.get(key)
        if field is not None:
            facts[field] = _value(field, value, number)
        # Any other fact (a newer ibstat's addition) is not one we read.
    return [Adapter.model_validate({**facts, "ports": ports}) for facts, ports in adapters]


def _port_fact(port: dict[str, object], key: str, value: str, number: int) -> None:
    if key == "Rate":
        match = _RATE.match(value)
        if not match:
            raise ValueError(f"ibstat line {number}: Rate is not a number: {value!r}")
        port["rate"] = float(match["rate"])
        port["rate_note"] = match["note"]
        return
    field = _PORT_KEYS[key]
    port[field] = _value(field, value, number)


def _value(field: str, value: str, number: int) -> object:
    if field not in _INTS:
        return value
    try:
        return int(value, 0)
    except ValueError:
        raise ValueError(f"ibstat line {number}: {field} is not a number: {value!r}") from None


def port_name(adapter: Adapter, port: Port) -> str:
    """How operators name a port: `mlx5_0/1`."""
    return f"{adapter.name}/{port.number}"

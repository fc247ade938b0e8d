"""What every BMC backend offers, in the words an operator uses with `ipmitool`.

Backends raise `TemporaryActionError` when the BMC does not answer in time or the network
fails (worth retrying), `CredentialsRefused` when it refuses the login or the account's
rights (fix the credentials profile), and `PermanentActionError` when it refuses otherwise
(an operation it does not support). Messages name the node and the BMC's address, never a
credential.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Literal, Protocol

from pydantic import SecretStr

PowerOp = Literal["on", "soft_off", "off", "cycle"]
SensorKind = Literal["temperature", "fan", "power", "voltage", "other"]


class PowerState(StrEnum):
    ON = "on"
    OFF = "off"
    POWERING_ON = "powering on"
    POWERING_OFF = "powering off"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class Credentials:
    username: str
    password: SecretStr


@dataclass(frozen=True)
class BmcTarget:
    """Where one node's BMC answers and how to talk to it (from the inventory)."""

    node: str
    protocol: Literal["ipmi", "redfish"]
    address: str
    port: int | None = None
    credentials: str = "default"
    """The name of a credentials profile in settings (`bmc.credentials`), never a secret."""
    system: str | None = None
    """Redfish ComputerSystem id; unset: the first member of /redfish/v1/Systems."""
    scheme: Literal["https", "http"] = "https"
    cipher_suite: int | None = None
    """IPMI only: the RMCP+ cipher suite (`ipmitool -C`); unset: negotiated."""
    verify_tls: bool = True
    ca_file: Path | None = None
    source: str = "settings"
    """Where the entry came from: `settings` or `annotations`."""

    def where(self) -> str:
        port = f":{self.port}" if self.port else ""
        return f"{self.protocol} BMC {self.address}{port} of {self.node}"


@dataclass(frozen=True)
class SelEntry:
    """One System Event Log record, as `ipmitool sel elist` shows it."""

    id: str
    time: str
    """ISO 8601 when the BMC gave a date, else what it printed (`Pre-Init`)."""
    sensor: str
    event: str
    direction: str = ""
    """`Asserted` / `Deasserted` when the BMC says."""
    severity: str = ""


@dataclass(frozen=True)
class Reading:
    name: str
    kind: SensorKind
    value: float | None
    unit: str
    status: str
    """`ok`, `warning`, `critical` or `na` (no reading)."""


@dataclass(frozen=True)
class BmcInfo:
    firmware: str
    manufacturer: str = ""
    model: str = ""
    details: dict[str, str] = field(default_factory=dict)


class Bmc(Protocol):
    """One open connection to one node's BMC. Every call has its own timeout."""

    target: BmcTarget

    def power_state(self) -> PowerState: ...

    def request_power(self, op: PowerOp) -> None:
        """Ask for a power change and return once the BMC has accepted it (not done it)."""
        ...

    def sel(self, limit: int) -> list[SelEntry]:
        """The newest `limit` entries, oldest first."""
        ...

    def sensors(self) -> list[Reading]: ...

    def info(self) -> BmcInfo: ...

    def close(self) -> None: ...

"""The Redfish backend of `protocol.Bmc`: DMTF Redfish over HTTPS with basic auth.

Discovery follows the links the service publishes. The ComputerSystem is
`/redfish/v1/Systems/{target.system}`, or the first member of `/redfish/v1/Systems`; its
`Links.ManagedBy[0]` is the Manager (firmware, and the SEL among its LogServices, else
among the system's), its `Links.Chassis[0]` the Chassis (the legacy `Thermal` and `Power`
resources). Power changes go through the system's `#ComputerSystem.Reset` action with a
ResetType it lists in `ResetType@Redfish.AllowableValues` (or in its `@Redfish.ActionInfo`).

`RedfishBmc` holds the discovery and the protocol's operations. Requests, and the
translation of every HTTP failure into a `BotError`, are `redfish_client`'s; reading the
documents into the protocol's values is `redfish_documents`'. No retries here; the action
layer retries by settings.
"""

from __future__ import annotations

import logging
from types import TracebackType
from urllib.parse import quote

import httpx

from bot.actions.bmc import redfish_documents as documents
from bot.actions.bmc.protocol import (
    BmcInfo,
    BmcTarget,
    Credentials,
    PowerOp,
    PowerState,
    Reading,
    SelEntry,
)
from bot.actions.bmc.redfish_client import Doc, RedfishClient, error_detail
from bot.errors import PermanentActionError

logger = logging.getLogger(__name__)

SYSTEMS = "/redfish/v1/Systems"
RESET = "#ComputerSystem.Reset"
# An operation's ResetTypes in order of preference: BMCs that do not list PowerCycle
# (the DMTF mockups, many Dell and HPE models) do list ForceRestart.
RESET_TYPES: dict[str, tuple[str, ...]] = {
    "on": ("On", "ForceOn"),
    "off": ("ForceOff",),
    "soft_off": ("GracefulShutdown",),
    "cycle": ("PowerCycle", "ForceRestart"),
}
MAX_PAGES = 100
"""Pages of a log collection followed through `Members@odata.nextLink`."""


class RedfishBmc:
    """One BMC over Redfish; every request has its own `timeout` (seconds)."""

    def __init__(
        self,
        target: BmcTarget,
        credentials: Credentials,
        *,
        timeout: float,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.target = target
        self.timeout = timeout
        self._client = RedfishClient(target, credentials, timeout=timeout, transport=transport)
        self._system: str | None = None
        self._links: dict[str, str | None] = {}

    def __enter__(self) -> RedfishBmc:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        self._client.close()

    # -- the Bmc protocol -------------------------------------------------------------

    def power_state(self) -> PowerState:
        return documents.power_state(self._system_doc())

    def request_power(self, op: PowerOp) -> None:
        system = self._system_doc()
        action = documents.child(documents.child(system, "Actions"), RESET)
        if not action:
            raise PermanentActionError(
                f"{self._where()} does not offer the ComputerSystem.Reset action on "
                f"{self._system_path()}; power it from the BMC's own interface"
            )
        target = action.get("target")
        if not isinstance(target, str):
            raise self._client.malformed(self._system_path(), f"{RESET} has no target")
        allowed = self._allowed_reset_types(action)
        wanted = RESET_TYPES[op]
        choice = next((t for t in wanted if allowed is None or t in allowed), None)
        if choice is None:
            raise PermanentActionError(
                f"{self._where()} cannot {op.replace('_', ' ')}: its ComputerSystem.Reset "
                f"allows {', '.join(allowed or []) or 'no ResetType'}, not "
                f"{' or '.join(wanted)}"
            )
        response = self._client.send("POST", target, body={"ResetType": choice}, handled=(409,))
        if response.status_code == 409:
            state = self.power_state()
            there = {
                "on": (PowerState.ON, PowerState.POWERING_ON),
                "off": (PowerState.OFF, PowerState.POWERING_OFF),
                "soft_off": (PowerState.OFF, PowerState.POWERING_OFF),
            }.get(op, ())
            if state in there:
                # Already there or on the way (an earlier try that timed out was accepted).
                logger.info("%s: %s not needed, the system is %s", self._where(), choice, state)
                return
            raise PermanentActionError(
                f"{self._where()} refused ResetType {choice} while the system is {state}"
                f"{error_detail(response)}"
            )
        logger.info("%s accepted ResetType %s", self._where(), choice)

    def sel(self, limit: int) -> list[SelEntry]:
        if limit <= 0:
            return []
        entries_path = self._sel_entries_path()
        members = self._collect(entries_path)
        if members and all(set(m) <= {"@odata.id"} for m in members):
            # Links only: fetch just the newest `limit`, judged by their ids.
            refs = [documents.ref(m, entries_path) for m in members]
            newest = sorted(refs, key=documents.id_key)[-limit:]
            members = [self._client.get(ref) for ref in newest]
        return documents.sel_entries(members, limit)

    def sensors(self) -> list[Reading]:
        chassis_path = self._linked("Chassis")
        if chassis_path is None:
            raise PermanentActionError(
                f"{self._where()}: system {self._system_path()} links no Chassis, so there "
                "are no sensors to read"
            )
        chassis = self._client.get(chassis_path)
        thermal, power = documents.link(chassis, "Thermal"), documents.link(chassis, "Power")
        if thermal is None and power is None:
            raise PermanentActionError(
                f"{self._where()}: chassis {chassis_path} has neither Thermal nor Power "
                "(BMCs offering only ThermalSubsystem/Sensors are not supported yet)"
            )
        readings: list[Reading] = []
        if thermal is not None:
            readings.extend(documents.thermal_readings(self._client.get(thermal)))
        if power is not None:
            readings.extend(documents.power_readings(self._client.get(power)))
        return readings

    def info(self) -> BmcInfo:
        system = self._system_doc()
        manager_path = self._linked("ManagedBy")
        manager = self._client.get(manager_path) if manager_path else {}
        return documents.bmc_info(system, manager)

    # -- discovery ----------------------------------------------------------------------

    def _system_path(self) -> str:
        if self._system is None:
            if self.target.system:
                self._system = f"{SYSTEMS}/{quote(self.target.system, safe='')}"
            else:
                members = self._members(SYSTEMS)
                if not members:
                    raise PermanentActionError(
                        f"{self._where()} lists no ComputerSystem under {SYSTEMS}"
                    )
                self._system = members[0]
        return self._system

    def _system_doc(self) -> Doc:
        hint = ""
        if self.target.system:
            hint = (
                f"; is {self.target.system!r} its ComputerSystem id? "
                f"(bmc.nodes.{self.target.node}.system)"
            )
        doc = self._client.get(self._system_path(), missing=hint)
        for key in ("ManagedBy", "Chassis"):
            self._links[key] = documents.first_link(doc, key)
        return doc

    def _linked(self, key: str) -> str | None:
        if key not in self._links:
            self._system_doc()
        return self._links.get(key)

    def _allowed_reset_types(self, action: Doc) -> list[str] | None:
        """What the reset action lists; None when it does not say (then we just try)."""
        values = action.get("ResetType@Redfish.AllowableValues")
        if isinstance(values, list):
            return [v for v in values if isinstance(v, str)]
        info = action.get("@Redfish.ActionInfo")
        if isinstance(info, str):
            for parameter in documents.children(self._client.get(info), "Parameters"):
                listed = parameter.get("AllowableValues")
                if parameter.get("Name") == "ResetType" and isinstance(listed, list):
                    return [v for v in listed if isinstance(v, str)]
        return None

    def _sel_entries_path(self) -> str:
        cached = self._links.get("sel")
        if isinstance(cached, str):
            return cached
        owners = [p for p in (self._linked("ManagedBy"), self._system_path()) if p]
        for owner in owners:
            services = documents.link(self._client.get(owner), "LogServices")
            if services is None:
                continue
            refs = self._members(services)
            named = [r for r in refs if r.rstrip("/").rsplit("/", 1)[-1].lower() == "sel"]
            for ref in named + [r for r in refs if r not in named]:
                service = self._client.get(ref)
                if ref in named or service.get("LogEntryType") == "SEL":
                    entries = documents.link(service, "Entries") or f"{ref.rstrip('/')}/Entries"
                    self._links["sel"] = entries
                    return entries
        raise PermanentActionError(
            f"{self._where()} offers no SEL log service among the LogServices of "
            f"{' or '.join(owners)}"
        )

    def _members(self, path: str) -> list[str]:
        """The links of a collection's members (first page: Systems, LogServices)."""
        return [documents.ref(member, path) for member in self._page(path)[0]]

    def _collect(self, path: str) -> list[Doc]:
        """Every member of a collection, following `Members@odata.nextLink`."""
        members, page = self._page(path)
        for _ in range(MAX_PAGES - 1):
            if page is None:
                return members
            found, page = self._page(page)
            members.extend(found)
        if page is not None:
            logger.warning("%s: read only the first %d pages of %s", self._where(), MAX_PAGES, path)
        return members

    def _page(self, path: str) -> tuple[list[Doc], str | None]:
        doc = self._client.get(path)
        found = doc.get("Members")
        if not isinstance(found, list) or not all(isinstance(m, dict) for m in found):
            raise self._client.malformed(
                path, "a collection whose Members is not a list of objects"
            )
        following = doc.get("Members@odata.nextLink")
        return found, following if isinstance(following, str) and following else None

    def _where(self) -> str:
        return self.target.where()

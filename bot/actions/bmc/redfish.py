"""The Redfish backend of `protocol.Bmc`: DMTF Redfish over HTTPS with basic auth.

Discovery follows the links the service publishes. The ComputerSystem is
`/redfish/v1/Systems/{target.system}`, or the first member of `/redfish/v1/Systems`; its
`Links.ManagedBy[0]` is the Manager (firmware, and the SEL among its LogServices, else
among the system's), its `Links.Chassis[0]` the Chassis (the legacy `Thermal` and `Power`
resources). Power changes go through the system's `#ComputerSystem.Reset` action with a
ResetType it lists in `ResetType@Redfish.AllowableValues` (or in its `@Redfish.ActionInfo`).

Every HTTP failure becomes a `BotError` in `_send`, the one place that talks to httpx:
timeouts, refused connections and 5xx are `TemporaryActionError`, the rest (login refused,
untrusted certificate, missing resources, answers that are not Redfish) are
`PermanentActionError`. No retries here; the action layer retries by settings. The
password only ever goes into httpx's `BasicAuth`: never into a message or a log line.
"""

from __future__ import annotations

import logging
import ssl
from datetime import UTC, datetime
from types import TracebackType
from typing import Any
from urllib.parse import quote

import httpx

from bot.actions.bmc.protocol import (
    BmcInfo,
    BmcTarget,
    Credentials,
    PowerOp,
    PowerState,
    Reading,
    SelEntry,
    SensorKind,
)
from bot.errors import ActionError, PermanentActionError, TemporaryActionError

logger = logging.getLogger(__name__)

Doc = dict[str, Any]

SYSTEMS = "/redfish/v1/Systems"
RESET = "#ComputerSystem.Reset"
DEFAULT_PORTS = {"https": 443, "http": 80}
# An operation's ResetTypes in order of preference: BMCs that do not list PowerCycle
# (the DMTF mockups, many Dell and HPE models) do list ForceRestart.
RESET_TYPES: dict[str, tuple[str, ...]] = {
    "on": ("On", "ForceOn"),
    "off": ("ForceOff",),
    "soft_off": ("GracefulShutdown",),
    "cycle": ("PowerCycle", "ForceRestart"),
}
POWER_STATES = {
    "On": PowerState.ON,
    "Off": PowerState.OFF,
    "PoweringOn": PowerState.POWERING_ON,
    "PoweringOff": PowerState.POWERING_OFF,
}
HEALTH = {"OK": "ok", "Warning": "warning", "Critical": "critical"}
NO_READING_STATES = {"Absent", "Disabled", "StandbyOffline", "UnavailableOffline"}
MAX_PAGES = 100
"""Pages of a log collection followed through `Members@odata.nextLink`."""
MAX_DETAIL = 300


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
        port = target.port or DEFAULT_PORTS[target.scheme]
        address = target.address.strip("[]")
        host = f"[{address}]" if ":" in address else address
        self._client = httpx.Client(
            base_url=f"{target.scheme}://{host}:{port}",
            auth=httpx.BasicAuth(credentials.username, credentials.password.get_secret_value()),
            verify=self._verify(),
            timeout=httpx.Timeout(timeout),
            headers={"Accept": "application/json", "OData-Version": "4.0"},
            transport=transport,
        )
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
        value = self._system_doc().get("PowerState")
        if not isinstance(value, str):
            return PowerState.UNKNOWN
        return POWER_STATES.get(value, PowerState.UNKNOWN)

    def request_power(self, op: PowerOp) -> None:
        system = self._system_doc()
        action = _object(_object(system, "Actions"), RESET)
        if not action:
            raise PermanentActionError(
                f"{self._where()} does not offer the ComputerSystem.Reset action on "
                f"{self._system_path()}; power it from the BMC's own interface"
            )
        target = action.get("target")
        if not isinstance(target, str):
            raise self._malformed(self._system_path(), f"{RESET} has no target")
        allowed = self._allowed_reset_types(action)
        wanted = RESET_TYPES[op]
        choice = next((t for t in wanted if allowed is None or t in allowed), None)
        if choice is None:
            raise PermanentActionError(
                f"{self._where()} cannot {op.replace('_', ' ')}: its ComputerSystem.Reset "
                f"allows {', '.join(allowed or []) or 'no ResetType'}, not "
                f"{' or '.join(wanted)}"
            )
        response = self._send("POST", target, body={"ResetType": choice}, handled=(409,))
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
                f"{_detail(response)}"
            )
        logger.info("%s accepted ResetType %s", self._where(), choice)

    def sel(self, limit: int) -> list[SelEntry]:
        if limit <= 0:
            return []
        entries_path = self._sel_entries_path()
        members = self._collect(entries_path)
        if members and all(set(m) <= {"@odata.id"} for m in members):
            # Links only: fetch just the newest `limit`, judged by their ids.
            refs = sorted((_ref(m, entries_path) for m in members), key=_id_key)[-limit:]
            members = [self._get(ref) for ref in refs]
        entries = sorted(members, key=lambda doc: (_created_key(doc), _id_key(_entry_id(doc))))
        return [_sel_entry(doc) for doc in entries[-limit:]]

    def sensors(self) -> list[Reading]:
        chassis_path = self._linked("Chassis")
        if chassis_path is None:
            raise PermanentActionError(
                f"{self._where()}: system {self._system_path()} links no Chassis, so there "
                "are no sensors to read"
            )
        chassis = self._get(chassis_path)
        thermal, power = _link(chassis, "Thermal"), _link(chassis, "Power")
        if thermal is None and power is None:
            raise PermanentActionError(
                f"{self._where()}: chassis {chassis_path} has neither Thermal nor Power "
                "(BMCs offering only ThermalSubsystem/Sensors are not supported yet)"
            )
        readings: list[Reading] = []
        if thermal is not None:
            doc = self._get(thermal)
            for item in _objects(doc, "Temperatures"):
                readings.append(_reading(item, "temperature", "ReadingCelsius", "degrees C"))
            for item in _objects(doc, "Fans"):
                key = "Reading" if "Reading" in item else "ReadingRPM"
                readings.append(_reading(item, "fan", key, _text(item, "ReadingUnits") or "RPM"))
        if power is not None:
            doc = self._get(power)
            for item in _objects(doc, "PowerControl"):
                readings.append(_reading(item, "power", "PowerConsumedWatts", "Watts"))
            for item in _objects(doc, "Voltages"):
                readings.append(_reading(item, "voltage", "ReadingVolts", "Volts"))
        return readings

    def info(self) -> BmcInfo:
        system = self._system_doc()
        manager_path = self._linked("ManagedBy")
        manager = self._get(manager_path) if manager_path else {}
        details = {
            "manager": manager.get("Id"),
            "manager_type": manager.get("ManagerType"),
            "manager_model": manager.get("Model"),
            "system": system.get("Id"),
            "serial": system.get("SerialNumber"),
            "bios": system.get("BiosVersion"),
            "uuid": system.get("UUID"),
            "power_state": system.get("PowerState"),
            "health": _object(system, "Status").get("Health"),
        }
        return BmcInfo(
            firmware=_text(manager, "FirmwareVersion") or "unknown",
            manufacturer=_text(system, "Manufacturer"),
            model=_text(system, "Model"),
            details={k: v for k, v in details.items() if isinstance(v, str) and v},
        )

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
        doc = self._get(self._system_path(), missing=hint)
        for key in ("ManagedBy", "Chassis"):
            refs = _object(doc, "Links").get(key)
            first = refs[0] if isinstance(refs, list) and refs else None
            self._links[key] = first.get("@odata.id") if isinstance(first, dict) else None
        return doc

    def _linked(self, key: str) -> str | None:
        if key not in self._links:
            self._system_doc()
        found = self._links.get(key)
        return found if isinstance(found, str) else None

    def _allowed_reset_types(self, action: Doc) -> list[str] | None:
        """What the reset action lists; None when it does not say (then we just try)."""
        values = action.get("ResetType@Redfish.AllowableValues")
        if isinstance(values, list):
            return [v for v in values if isinstance(v, str)]
        info = action.get("@Redfish.ActionInfo")
        if isinstance(info, str):
            for parameter in _objects(self._get(info), "Parameters"):
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
            services = _link(self._get(owner), "LogServices")
            if services is None:
                continue
            refs = self._members(services)
            named = [r for r in refs if r.rstrip("/").rsplit("/", 1)[-1].lower() == "sel"]
            for ref in named + [r for r in refs if r not in named]:
                service = self._get(ref)
                if ref in named or service.get("LogEntryType") == "SEL":
                    entries = _link(service, "Entries") or f"{ref.rstrip('/')}/Entries"
                    self._links["sel"] = entries
                    return entries
        raise PermanentActionError(
            f"{self._where()} offers no SEL log service among the LogServices of "
            f"{' or '.join(owners)}"
        )

    def _members(self, path: str) -> list[str]:
        """The links of a collection's members (first page: Systems, LogServices)."""
        return [_ref(member, path) for member in self._page(path)[0]]

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
        doc = self._get(path)
        found = doc.get("Members")
        if not isinstance(found, list) or not all(isinstance(m, dict) for m in found):
            raise self._malformed(path, "a collection whose Members is not a list of objects")
        following = doc.get("Members@odata.nextLink")
        return found, following if isinstance(following, str) and following else None

    # -- HTTP, and the one place its failures are translated ----------------------------

    def _verify(self) -> ssl.SSLContext | bool:
        if self.target.scheme == "http" or not self.target.verify_tls:
            return False
        try:
            if self.target.ca_file is not None:
                return ssl.create_default_context(cafile=str(self.target.ca_file))
            # The system store, where a site installs its BMC CA; not certifi's bundle.
            return ssl.create_default_context()
        except (OSError, ssl.SSLError) as exc:
            reason = getattr(exc, "strerror", None) or str(exc)
            raise PermanentActionError(
                f"cannot load the CA certificate {self.target.ca_file} for {self._where()} "
                f"({reason}); set bmc.nodes.{self.target.node}.ca_file to the BMC's CA (PEM)"
            ) from exc

    def _get(self, path: str, *, missing: str = "") -> Doc:
        response = self._send("GET", path, missing=missing)
        try:
            doc = response.json()
        except ValueError as exc:
            raise self._malformed(path, "the answer is not JSON") from exc
        if not isinstance(doc, dict):
            raise self._malformed(path, "the answer is not a JSON object")
        return doc

    def _send(
        self,
        method: str,
        path: str,
        *,
        body: Doc | None = None,
        handled: tuple[int, ...] = (),
        missing: str = "",
    ) -> httpx.Response:
        where = self._where()
        if not path.startswith("/") or path.startswith("//"):
            # httpx would send an absolute link's request, with our login, to its host.
            raise PermanentActionError(
                f"{where} links to {path}, off the BMC; only paths on the BMC are followed, "
                "so its login is never sent elsewhere"
            )
        try:
            response = self._client.request(method, path, json=body)
        except httpx.TimeoutException as exc:
            raise TemporaryActionError(
                f"{where} did not answer {method} {path} within {self.timeout:g} s (bmc.timeout)"
            ) from exc
        except httpx.ConnectError as exc:
            raise self._connect_error(exc, method, path) from exc
        except httpx.HTTPError as exc:
            raise TemporaryActionError(f"{where}: {method} {path} failed: {exc}") from exc
        status = response.status_code
        logger.debug("%s: %s %s -> %s", where, method, path, status)
        if status in handled or status < 300:
            return response
        detail = _detail(response)
        profile = self.target.credentials
        if status == 401:
            raise PermanentActionError(
                f"{where} refused the login (HTTP 401){detail}; check credentials profile "
                f"{profile!r} in bmc.credentials"
            )
        if status == 403:
            raise PermanentActionError(
                f"{where} does not allow {method} {path} for this account (HTTP 403){detail}; "
                f"check credentials profile {profile!r} in bmc.credentials"
            )
        if status == 404:
            raise PermanentActionError(f"{where} has no {path} (HTTP 404){detail}{missing}")
        if status == 429 or status >= 500:
            raise TemporaryActionError(
                f"{where} answered HTTP {status} to {method} {path}{detail}; try again later",
                delay=_retry_after(response),
            )
        raise PermanentActionError(f"{where} refused {method} {path} (HTTP {status}){detail}")

    def _connect_error(self, exc: httpx.ConnectError, method: str, path: str) -> ActionError:
        where, node = self._where(), self.target.node
        cause: BaseException | None = exc
        while cause is not None and not isinstance(cause, ssl.SSLError):
            cause = cause.__cause__ or cause.__context__
        if isinstance(cause, ssl.SSLCertVerificationError):
            trusted = (
                f"the CA in {self.target.ca_file}"
                if self.target.ca_file
                else "the system trust store"
            )
            return PermanentActionError(
                f"the TLS certificate of {where} is not trusted by {trusted} "
                f"({cause.verify_message or cause.reason}); set bmc.nodes.{node}.ca_file to "
                "the BMC's CA"
            )
        if isinstance(cause, ssl.SSLError):
            return PermanentActionError(
                f"the TLS handshake with {where} failed ({cause.reason or cause}); check "
                f"bmc.nodes.{node}.scheme and port"
            )
        return TemporaryActionError(f"cannot connect to {where} for {method} {path}: {exc}")

    def _malformed(self, path: str, problem: str) -> PermanentActionError:
        return PermanentActionError(
            f"{self._where()} answered {path} with something that is not Redfish: {problem}"
        )

    def _where(self) -> str:
        return self.target.where()


# -- reading documents ------------------------------------------------------------------


def _object(doc: Doc, key: str) -> Doc:
    value = doc.get(key)
    return value if isinstance(value, dict) else {}


def _objects(doc: Doc, key: str) -> list[Doc]:
    value = doc.get(key)
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def _link(doc: Doc, key: str) -> str | None:
    found = _object(doc, key).get("@odata.id")
    return found if isinstance(found, str) and found else None


def _text(doc: Doc, key: str) -> str:
    value = doc.get(key)
    return value if isinstance(value, str) else ""


def _ref(member: Doc, path: str) -> str:
    ref = member.get("@odata.id")
    if not isinstance(ref, str):
        raise PermanentActionError(f"a member of {path} has no @odata.id link")
    return ref


def _detail(response: httpx.Response) -> str:
    """The Redfish error message of an answer, if it has one: `: <message>`."""
    try:
        error = response.json().get("error", {})
    except (ValueError, AttributeError):
        return ""
    if not isinstance(error, dict):
        return ""
    messages = [
        m.get("Message")
        for m in error.get("@Message.ExtendedInfo", [])
        if isinstance(m, dict) and isinstance(m.get("Message"), str)
    ] or [error.get("message")]
    text = " ".join(m for m in messages if isinstance(m, str)).strip()
    return f": {text[:MAX_DETAIL]}" if text else ""


def _retry_after(response: httpx.Response) -> float:
    value = response.headers.get("Retry-After", "")
    return float(value) if value.isdigit() else 5.0


def _entry_id(doc: Doc) -> str:
    value = doc.get("Id")
    if isinstance(value, str | int) and not isinstance(value, bool):
        return str(value)
    ref = doc.get("@odata.id")
    return ref.rstrip("/").rsplit("/", 1)[-1] if isinstance(ref, str) else ""


def _id_key(ref: str) -> tuple[int, int, str]:
    last = ref.rstrip("/").rsplit("/", 1)[-1]
    return (0, int(last), "") if last.isdigit() else (1, 0, last)


def _parse_time(text: str) -> datetime | None:
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        return None
    return when if when.tzinfo else when.replace(tzinfo=UTC)


def _created_key(doc: Doc) -> datetime:
    created = doc.get("Created")
    when = _parse_time(created) if isinstance(created, str) else None
    return when or datetime.min.replace(tzinfo=UTC)


def _sel_entry(doc: Doc) -> SelEntry:
    created = _text(doc, "Created")
    when = _parse_time(created)
    sensor_type, number = _text(doc, "SensorType"), doc.get("SensorNumber")
    if sensor_type:
        has_number = isinstance(number, int) and not isinstance(number, bool)
        sensor = f"{sensor_type} #0x{number:02x}" if has_number else sensor_type
    else:
        sensor = _text(doc, "MessageId") or _text(doc, "Name")
    code = _text(doc, "EntryCode")
    severity = _text(doc, "Severity")
    return SelEntry(
        id=_entry_id(doc),
        time=when.isoformat() if when else created,
        sensor=sensor,
        event=_text(doc, "Message"),
        direction={"Assert": "Asserted", "Deassert": "Deasserted"}.get(code, ""),
        severity=HEALTH.get(severity, severity.lower()),
    )


def _reading(item: Doc, kind: SensorKind, key: str, unit: str) -> Reading:
    raw = item.get(key)
    value = float(raw) if isinstance(raw, int | float) and not isinstance(raw, bool) else None
    name = _text(item, "Name") or _text(item, "FanName") or _text(item, "MemberId") or key
    return Reading(name=name, kind=kind, value=value, unit=unit, status=_status(item, value))


def _status(item: Doc, value: float | None) -> str:
    status = _object(item, "Status")
    health = HEALTH.get(_text(status, "Health"))
    if value is None or _text(status, "State") in NO_READING_STATES:
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

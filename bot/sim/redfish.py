"""The machines' BMCs over Redfish: one service whose ComputerSystems are the nodes.

    /redfish/v1                                  ServiceRoot (no login, as the spec says)
    /redfish/v1/Systems/{node}                   PowerState, Links, #ComputerSystem.Reset
    /redfish/v1/Systems/{node}/Actions/ComputerSystem.Reset      POST {"ResetType": ...}
    /redfish/v1/Managers/{node}                  FirmwareVersion, LogServices
    /redfish/v1/Managers/{node}/LogServices/SEL/Entries          the machine's SEL, paged
    /redfish/v1/Chassis/{node}/Thermal | /Power  GPU and inlet temperatures, fans, watts

Documents are built from `Cluster.machines` under the cluster lock on every request; a
reset calls `hardware.request_power`, so its delays follow the cluster's `time_scale`.
Everything but the service root wants HTTP Basic auth with the service's login. Tests
arrange BMC trouble through `RedfishService` (answers of 500, slowness, fewer reset types,
the SEL under the system as some vendors have it) and read its request log.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import fnmatch
import hmac
import json
import re
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from bot.sim import hardware
from bot.sim.cluster import Cluster

Doc = dict[str, Any]
ROOT = "/redfish/v1"
OPEN_PATHS = {"/redfish", "/redfish/", ROOT, f"{ROOT}/"}
RESET_TYPES = ("On", "ForceOff", "GracefulShutdown", "ForceRestart", "PowerCycle")
PAGE = 50
"""SEL entries per page of the Entries collection."""
BASE = "Base.1.16."
_NODE_PATH = re.compile(r"^/redfish/v1/(?:Systems|Managers|Chassis)/([^/]+)")
# The sensor names of `hardware` as an IPMI SEL types and numbers them.
_SENSORS = {
    "System Event": ("System Event", 0x01),
    "Power Unit": ("PowerUnit", 0x02),
    "ACPI State": ("System ACPI PowerState", 0x03),
    "Chassis Control": ("Chassis", 0x04),
}


@dataclass(frozen=True)
class RedfishOptions:
    """The BMCs' login, and a certificate and key (PEM files) to serve HTTPS with."""

    username: str
    password: str
    certfile: Path | None = None
    keyfile: Path | None = None

    def __post_init__(self) -> None:
        if (self.certfile is None) != (self.keyfile is None):
            raise ValueError("give both certfile and keyfile, or neither")

    @property
    def scheme(self) -> str:
        return "https" if self.certfile else "http"


@dataclass(frozen=True)
class BmcRequest:
    method: str
    path: str
    query: str
    node: str | None
    status: int


@dataclass
class _Quirks:
    failures: list[int] = field(default_factory=list)
    delay: float = 0.0
    reset_types: tuple[str, ...] = RESET_TYPES
    sel_on_system: bool = False


class RedfishError(Exception):
    def __init__(self, status: int, message_id: str, message: str, *args: str) -> None:
        super().__init__(message)
        self.status, self.message_id, self.message_args = status, message_id, args

    def response(self, headers: dict[str, str] | None = None) -> Response:
        info = {
            "@odata.type": "#Message.v1_1_1.Message",
            "MessageId": BASE + self.message_id,
            "Message": str(self),
            "MessageArgs": list(self.message_args),
            "Severity": "Critical" if self.status >= 500 else "Warning",
        }
        body = {
            "error": {
                "code": BASE + "GeneralError",
                "message": "A general error has occurred. See ExtendedInfo for more information.",
                "@Message.ExtendedInfo": [info],
            }
        }
        return _json(body, self.status, headers)


class RedfishService:
    """The BMCs of a cluster's machines as an ASGI app, with hooks for tests."""

    def __init__(self, cluster: Cluster, options: RedfishOptions) -> None:
        self.cluster = cluster
        self.options = options
        self._lock = threading.Lock()
        self._quirks: dict[str, _Quirks] = {}
        self._requests: list[BmcRequest] = []
        self.app: ASGIApp = _Guard(self, _routes(self))

    # -- test hooks -----------------------------------------------------------------------

    def fail(self, node: str, times: int = 1, status: int = 500) -> None:
        """The node's BMC answers `status` to its next `times` requests."""
        with self._lock:
            self._quirk(node).failures.extend([status] * times)

    def slow(self, node: str, seconds: float) -> None:
        """The node's BMC waits `seconds` before each answer (0: prompt again)."""
        with self._lock:
            self._quirk(node).delay = seconds

    def limit_reset_types(self, node: str, reset_types: list[str]) -> None:
        """The node's BMC lists (and accepts) only these ResetTypes."""
        with self._lock:
            self._quirk(node).reset_types = tuple(reset_types)

    def move_sel_to_system(self, node: str) -> None:
        """The SEL is served under Systems/{node}/LogServices, not under the Manager."""
        with self._lock:
            self._quirk(node).sel_on_system = True

    def requests(self, method: str | None = None, path: str | None = None) -> list[BmcRequest]:
        """Requests received, oldest first; `path` is a glob."""
        with self._lock:
            return [
                r
                for r in self._requests
                if (method is None or r.method == method)
                and (path is None or fnmatch.fnmatchcase(r.path, path))
            ]

    # -- used by the app ------------------------------------------------------------------

    def _quirk(self, node: str) -> _Quirks:
        if node not in self.cluster.machines:
            raise KeyError(f"no machine {node}")
        return self._quirks.setdefault(node, _Quirks())

    def quirks(self, node: str | None) -> _Quirks:
        with self._lock:
            return _Quirks() if node is None else self._quirks.get(node, _Quirks())

    def take_failure(self, node: str | None) -> int | None:
        with self._lock:
            quirk = self._quirks.get(node or "")
            return quirk.failures.pop(0) if quirk and quirk.failures else None

    def record(self, request: BmcRequest) -> None:
        with self._lock:
            self._requests.append(request)

    def authorized(self, header: str) -> bool:
        scheme, _, encoded = header.partition(" ")
        if scheme.lower() != "basic":
            return False
        try:
            user, _, password = base64.b64decode(encoded, validate=True).decode().partition(":")
        except (binascii.Error, UnicodeDecodeError):
            return False
        good_user = hmac.compare_digest(user.encode(), self.options.username.encode())
        good_password = hmac.compare_digest(password.encode(), self.options.password.encode())
        return good_user and good_password


class _Guard:
    """Records each request, then serves injected slowness and failures, then the login."""

    def __init__(self, service: RedfishService, app: ASGIApp) -> None:
        self.service = service
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        service = self.service
        method, path = scope["method"], scope["path"]
        found = _NODE_PATH.match(path)
        node = found.group(1) if found else None

        async def recorded(message: Message) -> None:
            if message["type"] == "http.response.start":
                query = scope.get("query_string", b"").decode()
                service.record(BmcRequest(method, path, query, node, message["status"]))
            await send(message)

        delay = service.quirks(node).delay
        deadline = time.monotonic() + delay
        # Short naps, so a stopping simulator does not wait out a slow answer.
        while time.monotonic() < deadline and not service.cluster.stopping.is_set():
            await asyncio.sleep(min(0.02, deadline - time.monotonic()))
        failure = service.take_failure(node)
        if failure is not None:
            error = RedfishError(failure, "InternalError", "simulated failure of the BMC")
            await error.response()(scope, receive, recorded)
            return
        headers = dict(scope["headers"])
        if path not in OPEN_PATHS and not service.authorized(
            headers.get(b"authorization", b"").decode("latin-1")
        ):
            error = RedfishError(401, "NoValidSession", "There is no valid session established.")
            challenge = {"WWW-Authenticate": 'Basic realm="Redfish"'}
            await error.response(challenge)(scope, receive, recorded)
            return
        await self.app(scope, receive, recorded)


def _json(body: Doc, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    return Response(
        json.dumps(body),
        status_code=status,
        media_type="application/json",
        headers={"OData-Version": "4.0", **(headers or {})},
    )


def _ref(path: str) -> Doc:
    return {"@odata.id": path}


def _collection(path: str, kind: str, name: str, members: list[Doc]) -> Doc:
    return {
        "@odata.id": path,
        "@odata.type": f"#{kind}.{kind}",
        "Name": name,
        "Members@odata.count": len(members),
        "Members": members,
    }


def _health(*levels: str) -> str:
    order = ["OK", "Warning", "Critical"]
    return max(levels, key=order.index, default="OK")


def _routes(service: RedfishService) -> ASGIApp:
    cluster = service.cluster

    def machine(request: Request) -> tuple[str, hardware.Machine]:
        node = request.path_params["node"]
        with cluster.lock:
            if node not in cluster.machines:
                raise RedfishError(
                    404, "ResourceNotFound", f"No resource named '{node}'.", "Resource", node
                )
        return node, cluster.machine(node)

    def names() -> list[str]:
        with cluster.lock:
            return sorted(cluster.machines)

    async def root(_: Request) -> Response:
        return _json(
            {
                "@odata.id": ROOT,
                "@odata.type": "#ServiceRoot.v1_15_0.ServiceRoot",
                "Id": "RootService",
                "Name": "runbook-bot simulated BMCs",
                "RedfishVersion": "1.17.0",
                "UUID": str(uuid.uuid5(uuid.NAMESPACE_URL, cluster.scenario.name)),
                "Systems": _ref(f"{ROOT}/Systems"),
                "Managers": _ref(f"{ROOT}/Managers"),
                "Chassis": _ref(f"{ROOT}/Chassis"),
            }
        )

    def listing(kind: str, name: str, section: str) -> Route:
        async def handler(_: Request) -> Response:
            path = f"{ROOT}/{section}"
            members = [_ref(f"{path}/{node}") for node in names()]
            return _json(_collection(path, kind, name, members))

        return Route(f"{ROOT}/{section}", handler)

    async def system(request: Request) -> Response:
        node, m = machine(request)
        path, hw = f"{ROOT}/Systems/{node}", cluster.scenario.hardware
        failing = any(g.temperature >= 85 or not g.present for g in m.gpus)
        health = "Critical" if failing else "OK"
        return _json(
            {
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
                "LogServices": _ref(f"{path}/LogServices"),
                "Links": {
                    "Chassis": [_ref(f"{ROOT}/Chassis/{node}")],
                    "ManagedBy": [_ref(f"{ROOT}/Managers/{node}")],
                },
                "Actions": {
                    "#ComputerSystem.Reset": {
                        "target": f"{path}/Actions/ComputerSystem.Reset",
                        "ResetType@Redfish.AllowableValues": list(service.quirks(node).reset_types),
                    }
                },
            }
        )

    async def reset(request: Request) -> Response:
        node, _ = machine(request)
        action = "ComputerSystem.Reset"
        try:
            body = json.loads(await request.body() or b"{}")
        except ValueError:
            raise RedfishError(
                400, "MalformedJSON", "The request body is malformed JSON."
            ) from None
        reset_type = body.get("ResetType") if isinstance(body, dict) else None
        if reset_type is None:
            raise RedfishError(
                400,
                "ActionParameterMissing",
                f"The action {action} requires the parameter ResetType to be present in the "
                "request body.",
                action,
                "ResetType",
            )
        if reset_type not in service.quirks(node).reset_types:
            raise RedfishError(
                400,
                "ActionParameterValueNotInList",
                f"The value '{reset_type}' for the parameter ResetType in the action {action} "
                "is not in the list of acceptable values.",
                str(reset_type),
                "ResetType",
                action,
            )
        with cluster.lock:
            power = cluster.machines[node].power
            off = power in ("Off", "PoweringOff")
            # On wants the machine off (or going); every other reset wants it on (or coming).
            conflict = not off if reset_type == "On" else off
            if not conflict:
                hardware.request_power(cluster, node, reset_type, time.monotonic())
        if conflict:
            raise RedfishError(
                409,
                "ActionParameterValueConflict",
                f"The parameter 'ResetType' with the requested value of '{reset_type}' does "
                f"not meet the constraints of the implementation: the system is {power}.",
                "ResetType",
                str(reset_type),
            )
        return Response(status_code=204, headers={"OData-Version": "4.0"})

    async def manager(request: Request) -> Response:
        node, m = machine(request)
        path = f"{ROOT}/Managers/{node}"
        return _json(
            {
                "@odata.id": path,
                "@odata.type": "#Manager.v1_17_0.Manager",
                "Id": node,
                "Name": f"BMC of {node}",
                "ManagerType": "BMC",
                "FirmwareVersion": cluster.scenario.hardware.bmc_firmware,
                "PowerState": "On",
                "Status": {"State": "Enabled", "Health": "OK"},
                "DateTime": cluster.now().isoformat(),
                "LogServices": _ref(f"{path}/LogServices"),
                "Links": {
                    "ManagerForServers": [_ref(f"{ROOT}/Systems/{node}")],
                    "ManagerForChassis": [_ref(f"{ROOT}/Chassis/{node}")],
                },
            }
        )

    def sel_owner(request: Request) -> tuple[str, hardware.Machine, str, bool]:
        """The node, its machine, the LogServices path asked for, and whether the SEL is
        there (under the Manager, or under the system for nodes moved there)."""
        node, m = machine(request)
        section = request.path_params["section"]
        if section not in ("Systems", "Managers"):
            raise HTTPException(404)
        on_system = service.quirks(node).sel_on_system
        return node, m, f"{ROOT}/{section}/{node}/LogServices", on_system == (section == "Systems")

    async def log_services(request: Request) -> Response:
        _, _, path, has_sel = sel_owner(request)
        members = [_ref(f"{path}/SEL")] if has_sel else []
        return _json(_collection(path, "LogServiceCollection", "Log Services", members))

    async def sel_service(request: Request) -> Response:
        _, m, services, has_sel = sel_owner(request)
        if not has_sel:
            raise RedfishError(404, "ResourceNotFound", "No log service SEL.", "LogService", "SEL")
        path = f"{services}/SEL"
        return _json(
            {
                "@odata.id": path,
                "@odata.type": "#LogService.v1_4_0.LogService",
                "Id": "SEL",
                "Name": "IPMI System Event Log",
                "LogEntryType": "SEL",
                "MaxNumberOfRecords": 3639,
                "OverWritePolicy": "WrapsWhenFull",
                "ServiceEnabled": True,
                "DateTime": cluster.now().isoformat(),
                "Status": {"State": "Enabled", "Health": "OK"},
                "Entries": _ref(f"{path}/Entries"),
            }
        )

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

    async def sel_entries(request: Request) -> Response:
        _, m, services, has_sel = sel_owner(request)
        if not has_sel:
            raise RedfishError(404, "ResourceNotFound", "No log service SEL.", "LogService", "SEL")
        path = f"{services}/SEL/Entries"
        skip = request.query_params.get("$skip", "0")
        start = int(skip) if skip.isdigit() else 0
        page = [sel_entry(path, r) for r in m.sel[start : start + PAGE]]
        doc = _collection(path, "LogEntryCollection", "System Event Log Entries", page)
        doc["Members@odata.count"] = len(m.sel)
        if start + PAGE < len(m.sel):
            doc["Members@odata.nextLink"] = f"{path}?$skip={start + PAGE}"
        return _json(doc)

    async def sel_record(request: Request) -> Response:
        _, m, services, has_sel = sel_owner(request)
        wanted = request.path_params["entry"]
        for record in m.sel if has_sel else []:
            if str(record.id) == wanted:
                return _json(sel_entry(f"{services}/SEL/Entries", record))
        raise RedfishError(404, "ResourceNotFound", "No such entry.", "LogEntry", wanted)

    async def chassis(request: Request) -> Response:
        node, m = machine(request)
        path, hw = f"{ROOT}/Chassis/{node}", cluster.scenario.hardware
        return _json(
            {
                "@odata.id": path,
                "@odata.type": "#Chassis.v1_21_0.Chassis",
                "Id": node,
                "Name": f"Chassis of {node}",
                "ChassisType": "RackMount",
                "Manufacturer": hw.bmc_manufacturer,
                "Model": hw.bmc_model,
                "PowerState": m.power,
                "Status": {"State": "Enabled", "Health": "OK"},
                "Thermal": _ref(f"{path}/Thermal"),
                "Power": _ref(f"{path}/Power"),
                "Links": {
                    "ComputerSystems": [_ref(f"{ROOT}/Systems/{node}")],
                    "ManagedBy": [_ref(f"{ROOT}/Managers/{node}")],
                },
            }
        )

    async def thermal(request: Request) -> Response:
        node, m = machine(request)
        path = f"{ROOT}/Chassis/{node}/Thermal"
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
        return _json(
            {
                "@odata.id": path,
                "@odata.type": "#Thermal.v1_7_1.Thermal",
                "Id": "Thermal",
                "Name": "Thermal",
                "Temperatures": temperatures,
                "Fans": fans,
            }
        )

    async def power(request: Request) -> Response:
        node, m = machine(request)
        path = f"{ROOT}/Chassis/{node}/Power"
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
        return _json(
            {
                "@odata.id": path,
                "@odata.type": "#Power.v1_7_1.Power",
                "Id": "Power",
                "Name": "Power",
                "PowerControl": [control],
                "Voltages": voltages,
            }
        )

    async def redfish_error(_: Request, exc: Exception) -> Response:
        assert isinstance(exc, RedfishError)
        return exc.response()

    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        if exc.status_code == 405:
            message = "The HTTP method is not allowed on this resource."
            return RedfishError(405, "OperationNotAllowed", message).response()
        path = request.url.path
        message = f"The resource at the URI '{path}' was not found."
        return RedfishError(exc.status_code, "ResourceMissingAtURI", message, path).response()

    routes = [
        Route("/redfish", root),
        Route(ROOT, root),
        Route(f"{ROOT}/", root),
        listing("ComputerSystemCollection", "Computer Systems", "Systems"),
        listing("ManagerCollection", "Managers", "Managers"),
        listing("ChassisCollection", "Chassis", "Chassis"),
        Route(f"{ROOT}/Systems/{{node}}", system),
        Route(f"{ROOT}/Systems/{{node}}/Actions/ComputerSystem.Reset", reset, methods=["POST"]),
        Route(f"{ROOT}/Managers/{{node}}", manager),
        Route(f"{ROOT}/{{section}}/{{node}}/LogServices", log_services),
        Route(f"{ROOT}/{{section}}/{{node}}/LogServices/SEL", sel_service),
        Route(f"{ROOT}/{{section}}/{{node}}/LogServices/SEL/Entries", sel_entries),
        Route(f"{ROOT}/{{section}}/{{node}}/LogServices/SEL/Entries/{{entry}}", sel_record),
        Route(f"{ROOT}/Chassis/{{node}}", chassis),
        Route(f"{ROOT}/Chassis/{{node}}/Thermal", thermal),
        Route(f"{ROOT}/Chassis/{{node}}/Power", power),
    ]
    return Starlette(
        routes=routes,
        exception_handlers={RedfishError: redfish_error, HTTPException: http_error},
    )


def _sel_sensor(name: str) -> tuple[str, int]:
    """The IPMI sensor type and number of one of `hardware`'s sensor names."""
    gpu = re.fullmatch(r"GPU(\d+) (Temp|Status)", name)
    if gpu is None:
        return _SENSORS.get(name, ("Other Units-based Sensor", 0xF0))
    index = int(gpu.group(1))
    return (
        ("Temperature", 0x30 + index) if gpu.group(2) == "Temp" else ("Add-in Card", 0x40 + index)
    )


def _sensor(
    ref: str,
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
    item: Doc = {"@odata.id": ref, "MemberId": ref.rsplit("/", 1)[-1], "Name": name}
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

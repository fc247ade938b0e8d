"""The simulated BMCs' Redfish routes as a Starlette app, and the errors they answer.

Each handler takes a copy of the node's machine (`Cluster.machine`) and answers the
document `redfish_documents` (or, for Thermal and Power, `redfish_sensors`) builds from
it; the reset action changes the machine through `hardware.request_power` under the
cluster lock. A `RedfishError` raised anywhere, and Starlette's own 404 and 405, are
answered with a Redfish error body (a Base message). The service's quirks decide the
reset types listed and accepted, and where the SEL is. Login, recording and injected
faults are `redfish`'s guard, in front of this app.
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import ASGIApp

from bot.sim import hardware
from bot.sim import redfish_documents as documents
from bot.sim import redfish_sensors as sensors
from bot.sim.redfish_documents import ROOT, Doc

if TYPE_CHECKING:
    from bot.sim.redfish import RedfishService


class RedfishError(Exception):
    def __init__(self, status: int, message_id: str, message: str, *args: str) -> None:
        super().__init__(message)
        self.status, self.message_id, self.message_args = status, message_id, args

    def response(self, headers: dict[str, str] | None = None) -> Response:
        body = documents.error(self.status, self.message_id, str(self), self.message_args)
        return json_response(body, self.status, headers)


def json_response(body: Doc, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    return Response(
        json.dumps(body),
        status_code=status,
        media_type="application/json",
        headers={"OData-Version": "4.0", **(headers or {})},
    )


def app(service: RedfishService) -> ASGIApp:
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
        return json_response(documents.service_root(cluster.scenario.name))

    def listing(kind: str, name: str, section: str) -> Route:
        async def handler(_: Request) -> Response:
            path = f"{ROOT}/{section}"
            members = [documents.ref(f"{path}/{node}") for node in names()]
            return json_response(documents.collection(path, kind, name, members))

        return Route(f"{ROOT}/{section}", handler)

    async def system(request: Request) -> Response:
        node, m = machine(request)
        reset_types = service.quirks(node).reset_types
        return json_response(documents.system(m, cluster.scenario.hardware, reset_types))

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
        node, _ = machine(request)
        firmware = cluster.scenario.hardware.bmc_firmware
        return json_response(documents.manager(node, firmware, cluster.now()))

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
        return json_response(documents.log_services(path, has_sel))

    async def sel_service(request: Request) -> Response:
        _, _, services, has_sel = sel_owner(request)
        if not has_sel:
            raise RedfishError(404, "ResourceNotFound", "No log service SEL.", "LogService", "SEL")
        return json_response(documents.sel_service(f"{services}/SEL", cluster.now()))

    async def sel_entries(request: Request) -> Response:
        _, m, services, has_sel = sel_owner(request)
        if not has_sel:
            raise RedfishError(404, "ResourceNotFound", "No log service SEL.", "LogService", "SEL")
        skip = request.query_params.get("$skip", "0")
        start = int(skip) if skip.isdigit() else 0
        return json_response(documents.sel_entries(f"{services}/SEL/Entries", m.sel, start))

    async def sel_record(request: Request) -> Response:
        _, m, services, has_sel = sel_owner(request)
        wanted = request.path_params["entry"]
        for record in m.sel if has_sel else []:
            if str(record.id) == wanted:
                return json_response(documents.sel_entry(f"{services}/SEL/Entries", record))
        raise RedfishError(404, "ResourceNotFound", "No such entry.", "LogEntry", wanted)

    async def chassis(request: Request) -> Response:
        _, m = machine(request)
        return json_response(documents.chassis(m, cluster.scenario.hardware))

    async def thermal(request: Request) -> Response:
        _, m = machine(request)
        return json_response(sensors.thermal(m))

    async def power(request: Request) -> Response:
        _, m = machine(request)
        return json_response(sensors.power(m))

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

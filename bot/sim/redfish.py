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

This module holds the service: its options, test hooks and request log, and the guard in
front of its app that records each request, serves the injected slowness and failures,
and checks the login. The routes are `redfish_routes`'; the documents they answer with,
`redfish_documents`' and `redfish_sensors`'.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import fnmatch
import hmac
import re
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from bot.sim import redfish_routes
from bot.sim.cluster import Cluster
from bot.sim.redfish_documents import ROOT
from bot.sim.redfish_routes import RedfishError

OPEN_PATHS = {"/redfish", "/redfish/", ROOT, f"{ROOT}/"}
RESET_TYPES = ("On", "ForceOff", "GracefulShutdown", "ForceRestart", "PowerCycle")
_NODE_PATH = re.compile(r"^/redfish/v1/(?:Systems|Managers|Chassis)/([^/]+)")


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


class RedfishService:
    """The BMCs of a cluster's machines as an ASGI app, with hooks for tests."""

    def __init__(self, cluster: Cluster, options: RedfishOptions) -> None:
        self.cluster = cluster
        self.options = options
        self._lock = threading.Lock()
        self._quirks: dict[str, _Quirks] = {}
        self._requests: list[BmcRequest] = []
        self.app: ASGIApp = _Guard(self, redfish_routes.app(self))

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

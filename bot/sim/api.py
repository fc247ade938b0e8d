"""The simulated Kubernetes API as an ASGI app: routes only, JSON only.

URLs are resolved to (kind, namespace, name, subresource) and handed to `verbs` (or to
`watching` for `?watch=true`); every failure is an `ApiError` answered as a v1 Status.
The outer `Recording` middleware logs each request in the cluster (for tests counting
calls) and serves injected faults. Without `rbac` any bearer token, or none, is accepted;
with it, `Authorizing` holds the service account's token to its RBAC rules (`rbac`).
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from bot.sim import discovery, status, verbs, watching
from bot.sim.cluster import Cluster, RecordedRequest
from bot.sim.kinds import POD, Kind, by_path
from bot.sim.rbac import Attributes, Rbac, unauthorized, verb
from bot.sim.status import PATCH_TYPES, ApiError, bad_request, no_route

Obj = dict[str, Any]
ALL_METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE"]
HOLD_POLL = 0.005
"""Seconds between two looks at a hold that keeps a request waiting."""


def json_response(body: Obj, code: int = 200, headers: dict[str, str] | None = None) -> Response:
    return Response(
        json.dumps(body, separators=(",", ":")),
        status_code=code,
        media_type="application/json",
        headers=headers,
    )


def error_response(error: ApiError) -> Response:
    return json_response(error.body(), error.code, error.headers)


@dataclass(frozen=True)
class Target:
    kind: Kind
    namespace: str | None
    name: str | None
    subresource: str | None


def resolve(group: str, version: str, rest: str) -> Target:
    parts = [p for p in rest.split("/") if p]
    namespace = None
    if len(parts) >= 3 and parts[0] == "namespaces":
        kind = by_path(group, version, parts[2])
        if kind is not None and kind.namespaced:
            namespace, parts = parts[1], parts[2:]
    if not parts or len(parts) > 3:
        raise no_route()
    kind = by_path(group, version, parts[0])
    if kind is None or (namespace is None and kind.namespaced and len(parts) > 1):
        raise no_route()
    name = parts[1] if len(parts) > 1 else None
    sub = parts[2] if len(parts) > 2 else None
    return Target(kind, namespace, name, sub)


async def _body(request: Request, *, required: bool) -> Any:
    raw = await request.body()
    if not raw.strip():
        if required:
            raise bad_request("the request body is empty")
        return None
    try:
        return json.loads(raw)
    except ValueError as exc:
        raise bad_request(f"couldn't get version/kind; json parse error: {exc}") from exc


def _content_type(request: Request) -> str:
    return request.headers.get("content-type", "").split(";")[0].strip().lower()


async def _dispatch(cluster: Cluster, request: Request, target: Target) -> Response:
    query = dict(request.query_params)
    method, kind, ns, name = request.method, target.kind, target.namespace, target.name
    if name is None:
        if method == "GET":
            if query.get("watch") in ("true", "1"):
                events = watching.prepare(cluster, kind, ns, query)
                return StreamingResponse(events, media_type="application/json")
            return json_response(verbs.list_objects(cluster, kind, ns, query))
        if method == "POST" and (ns is not None or not kind.namespaced):
            _require_json(request)
            body = await _body(request, required=True)
            return json_response(verbs.create(cluster, kind, ns, body, query), 201)
        raise status.method_not_allowed()
    sub = target.subresource
    if sub is None or (sub == "status" and kind.has_status):
        if method == "GET":
            return json_response(verbs.get_object(cluster, kind, ns, name))
        if method == "PUT":
            _require_json(request)
            body = await _body(request, required=True)
            return json_response(verbs.replace(cluster, kind, ns, name, body, query, sub))
        if method == "PATCH":
            content_type = _content_type(request)
            if content_type not in PATCH_TYPES:
                raise status.unsupported_media_type(content_type, PATCH_TYPES)
            body = await _body(request, required=True)
            return json_response(
                verbs.patch(cluster, kind, ns, name, content_type, body, query, sub)
            )
        if method == "DELETE" and sub is None:
            body = await _body(request, required=False)
            code, result = verbs.delete(cluster, kind, ns, name, body, query)
            return json_response(result, code)
        raise status.method_not_allowed()
    if kind is POD and sub == "eviction":
        if method != "POST":
            raise status.method_not_allowed()
        _require_json(request)
        body = await _body(request, required=True)
        return json_response(verbs.evict(cluster, ns or "", name, body, query), 201)
    if kind is POD and sub == "log":
        if method != "GET":
            raise status.method_not_allowed()
        text = verbs.read_log(cluster, ns or "", name, query)
        return PlainTextResponse(text)
    raise no_route()


def _require_json(request: Request) -> None:
    content_type = _content_type(request)
    if content_type not in ("", "application/json", "*/*"):
        raise status.unsupported_media_type(content_type, ("application/json",))


def build_app(cluster: Cluster, rbac: Rbac | None = None, admin_token: str = "") -> ASGIApp:
    async def resources(request: Request) -> Response:
        params = request.path_params
        target = resolve(params.get("group", ""), params["version"], params["rest"])
        return await _dispatch(cluster, request, target)

    async def version(_: Request) -> Response:
        return json_response(discovery.version())

    async def core_versions(request: Request) -> Response:
        host = request.headers.get("host", "127.0.0.1")
        return json_response(discovery.api_versions(host))

    async def groups(_: Request) -> Response:
        return json_response(discovery.api_group_list())

    async def group(request: Request) -> Response:
        found = discovery.api_group(request.path_params["group"])
        if found is None:
            raise no_route()
        return json_response(found)

    async def resource_list(request: Request) -> Response:
        found = discovery.resource_list(
            request.path_params.get("group", ""), request.path_params["version"]
        )
        if found is None:
            raise no_route()
        return json_response(found)

    async def missing(_: Request) -> Response:
        raise no_route()

    async def healthy(_: Request) -> Response:
        return PlainTextResponse("ok")

    routes = [
        Route("/version", version),
        Route("/api", core_versions),
        Route("/apis", groups),
        Route("/api/{version}", resource_list),
        Route("/apis/{group}", group),
        Route("/apis/{group}/{version}", resource_list),
        Route("/api/{version}/{rest:path}", resources, methods=ALL_METHODS),
        Route("/apis/{group}/{version}/{rest:path}", resources, methods=ALL_METHODS),
        Route("/openapi/{rest:path}", missing),
        Route("/healthz", healthy),
        Route("/livez", healthy),
        Route("/readyz", healthy),
    ]

    async def api_error(_: Request, exc: Exception) -> Response:
        assert isinstance(exc, ApiError)
        return error_response(exc)

    async def http_error(_: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        if exc.status_code == 405:
            return error_response(status.method_not_allowed())
        if exc.status_code == 404:
            return error_response(no_route())
        return error_response(ApiError(exc.status_code, str(exc.detail)))

    app = Starlette(
        routes=routes, exception_handlers={ApiError: api_error, HTTPException: http_error}
    )
    if rbac is None:
        return Recording(app, cluster)
    return Recording(Authorizing(app, rbac, admin_token), cluster)


class Recording:
    """Records every request in the cluster and answers injected faults before routing."""

    def __init__(self, app: ASGIApp, cluster: Cluster) -> None:
        self.app = app
        self.cluster = cluster

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        method, path = scope["method"], scope["path"]
        query = dict(parse_qsl(scope.get("query_string", b"").decode(), keep_blank_values=True))

        async def recorded(message: Message) -> None:
            if message["type"] == "http.response.start":
                # Logged before the client can see the answer, so tests never race it.
                self.cluster.record(RecordedRequest(method, path, query, message["status"]))
            await send(message)

        hold = self.cluster.hold_for(method, path)
        if hold is not None:  # a server slow to answer (`Cluster.hold_requests`)
            hold.arrived.set()
            while not hold.released.is_set():
                await asyncio.sleep(HOLD_POLL)
        fault = self.cluster.take_request_fault(method, path)
        if fault is not None:
            await error_response(fault)(scope, receive, recorded)
            return
        await self.app(scope, receive, recorded)


class Authorizing:
    """Answers 401 to unknown tokens and 403 to what `rbac` does not grant its account;
    the admin token may do anything. Discovery and health paths are open to both, as the
    real cluster's `system:discovery` role opens them to every authenticated user."""

    def __init__(self, app: ASGIApp, rbac: Rbac, admin_token: str) -> None:
        self.app = app
        self.rbac = rbac
        self.admin_token = admin_token

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            error = self._check(scope)
            if error is not None:
                await error_response(error)(scope, receive, send)
                return
        await self.app(scope, receive, send)

    def _check(self, scope: Scope) -> ApiError | None:
        headers = dict(scope.get("headers") or ())
        token = headers.get(b"authorization", b"").decode().removeprefix("Bearer ").strip()
        if token and token == self.admin_token:
            return None
        if token != self.rbac.token:
            return unauthorized()
        request = _attributes(scope)
        if request is None or self.rbac.allows(request[0]):
            return None
        return self.rbac.forbidden(*request)


def _attributes(scope: Scope) -> tuple[Attributes, str] | None:
    """The request's RBAC attributes and its resource as errors name it; None for
    non-resource paths and URLs no resource answers (those are left to the router)."""
    path: str = scope["path"]
    core, named = path.split("/", 3), path.split("/", 4)
    try:
        if len(core) == 4 and core[1] == "api":
            target = resolve("", core[2], core[3])
        elif len(named) == 5 and named[1] == "apis":
            target = resolve(named[2], named[3], named[4])
        else:
            return None
    except ApiError:
        return None
    query = dict(parse_qsl(scope.get("query_string", b"").decode()))
    kind = target.kind
    attributes = Attributes(
        verb=verb(
            scope["method"],
            named=target.name is not None,
            watch=query.get("watch") in ("true", "1"),
        ),
        group=kind.group,
        resource=kind.plural,
        subresource=target.subresource,
        namespace=target.namespace,
        name=target.name,
    )
    return attributes, kind.resource

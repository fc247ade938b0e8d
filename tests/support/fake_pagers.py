"""Loopback fakes of the paging services, checking what the real ones check.

`running()` serves one Starlette app on a kernel-chosen port with:

- PagerDuty Events API v2 `/v2/enqueue` (routing_key of 32 characters, event_action,
  dedup_key, payload for triggers; 202 / 400 "invalid event" with `errors`);
- a generic webhook `/hook` (checks the X-Runbook-Bot-Signature HMAC when a secret is set);
- WeCom `/cgi-bin/webhook/send?key=` (errcode 93000 for a wrong key);
- DingTalk `/robot/send?access_token=` (timestamp within an hour and sign when signing);
- Feishu `/open-apis/bot/v2/hook/{token}` (timestamp and sign in the body when signing).

Every request is recorded; `fail(service, ...)` makes the next `times` requests answer an
injected status/body (with Retry-After) or stall for `stall` seconds. The SMTP fake is
`tests/escalation/fake_smtp.py`.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

PD_KEY = "R0UT1NGKEY0123456789abcdefABCDEF"  # 32 characters, as PagerDuty demands
WECOM_KEY = "wecom-key-693a91f6-5b2d-4a8e"
DING_TOKEN = "dingtalk-token-2f6c0b9e7d"
DING_SECRET = "SECdingtalk-secret-81c4e2"
FEISHU_TOKEN = "feishu-token-5d2e8a71"
FEISHU_SECRET = "feishu-secret-c09b3f"
HOOK_SECRET = "webhook-secret-7b1e44"
HOUR = 3600


@dataclass(frozen=True)
class Call:
    service: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: Any
    raw: bytes
    status: int


@dataclass
class Fault:
    status: int = 500
    body: Any = None
    times: int = 1
    retry_after: str | None = None
    stall: float = 0.0


@dataclass
class FakePagers:
    url: str = ""
    hook_secret: str | None = HOOK_SECRET
    ding_secret: str | None = DING_SECRET
    feishu_secret: str | None = FEISHU_SECRET
    _faults: dict[str, list[Fault]] = field(default_factory=dict)
    _calls: list[Call] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def fail(self, service: str, **fault: Any) -> None:
        with self._lock:
            self._faults.setdefault(service, []).append(Fault(**fault))

    def calls(self, service: str | None = None) -> list[Call]:
        with self._lock:
            return [c for c in self._calls if service is None or c.service == service]

    def _fault(self, service: str) -> Fault | None:
        with self._lock:
            queue = self._faults.get(service, [])
            if not queue:
                return None
            fault = queue[0]
            fault.times -= 1
            if fault.times <= 0:
                queue.pop(0)
            return fault

    async def _answer(self, service: str, request: Request) -> Response:
        raw = await request.body()
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        fault = self._fault(service)
        if fault is not None and fault.stall:
            await asyncio.sleep(fault.stall)
        if fault is not None and not fault.stall:
            headers = {"Retry-After": fault.retry_after} if fault.retry_after else {}
            response: Response = JSONResponse(fault.body, fault.status, headers=headers)
        else:
            status, answer = CHECKS[service](self, request, body, raw)
            response = JSONResponse(answer, status)
        with self._lock:
            self._calls.append(
                Call(service, request.url.path, dict(request.query_params),
                     dict(request.headers), body, raw, response.status_code)
            )  # fmt: skip
        return response

    def app(self) -> Starlette:
        def route(path: str, service: str) -> Route:
            async def endpoint(request: Request) -> Response:
                return await self._answer(service, request)

            return Route(path, endpoint, methods=["POST"])

        return Starlette(
            routes=[
                route("/v2/enqueue", "pagerduty"),
                route("/hook", "webhook"),
                route("/cgi-bin/webhook/send", "wecom"),
                route("/robot/send", "dingtalk"),
                route("/open-apis/bot/v2/hook/{token}", "feishu"),
            ]
        )


Answer = tuple[int, dict[str, Any]]


def _pagerduty(fake: FakePagers, request: Request, body: Any, raw: bytes) -> Answer:
    errors = []
    if not isinstance(body, dict):
        return 400, {"status": "invalid event", "message": "Event object is invalid",
                     "errors": ["'body' must be a JSON object"]}  # fmt: skip
    key = body.get("routing_key")
    if not isinstance(key, str) or len(key) != 32:
        errors.append("Length of 'routing_key' is incorrect (should be 32 characters)")
    action = body.get("event_action")
    if action not in ("trigger", "acknowledge", "resolve"):
        errors.append("'event_action' is invalid (must be one of: trigger acknowledge resolve)")
    if action in ("acknowledge", "resolve") and not body.get("dedup_key"):
        errors.append("'dedup_key' is missing or blank")
    if action == "trigger":
        payload = body.get("payload") or {}
        for name in ("summary", "source", "severity"):
            if not payload.get(name):
                errors.append(f"'payload.{name}' is missing or blank")
        if len(payload.get("summary", "")) > 1024:
            errors.append("'payload.summary' is too long (max 1024)")
        if payload.get("severity") not in ("critical", "error", "warning", "info"):
            errors.append("'payload.severity' is invalid")
    if errors:
        return 400, {"status": "invalid event", "message": "Event object is invalid",
                     "errors": errors}  # fmt: skip
    return 202, {"status": "success", "message": "Event processed",
                 "dedup_key": body.get("dedup_key")}  # fmt: skip


def _webhook(fake: FakePagers, request: Request, body: Any, raw: bytes) -> Answer:
    if fake.hook_secret is not None:
        stamp = request.headers.get("x-runbook-bot-timestamp", "")
        given = request.headers.get("x-runbook-bot-signature", "")
        digest = hmac.new(fake.hook_secret.encode(), stamp.encode() + b"." + raw, hashlib.sha256)
        if not hmac.compare_digest(given, "sha256=" + digest.hexdigest()):
            return 401, {"error": "bad signature"}
    return 200, {"ok": True}


def _wecom(fake: FakePagers, request: Request, body: Any, raw: bytes) -> Answer:
    if request.query_params.get("key") != WECOM_KEY:
        return 200, {"errcode": 93000, "errmsg": "invalid webhook url, hint: [x], more info"}
    if not isinstance(body, dict) or body.get("msgtype") != "markdown":
        return 200, {"errcode": 40008, "errmsg": "invalid message type"}
    if not body.get("markdown", {}).get("content"):
        return 200, {"errcode": 44004, "errmsg": "empty content"}
    return 200, {"errcode": 0, "errmsg": "ok"}


def _dingtalk(fake: FakePagers, request: Request, body: Any, raw: bytes) -> Answer:
    query = request.query_params
    if query.get("access_token") != DING_TOKEN:
        return 200, {"errcode": 300001, "errmsg": "token is not exist"}
    if fake.ding_secret is not None:
        stamp = query.get("timestamp", "")
        if not stamp.isdigit() or abs(int(stamp) / 1000 - time.time()) > HOUR:
            return 200, {"errcode": 310000, "errmsg": "invalid timestamp"}
        message = f"{stamp}\n{fake.ding_secret}".encode()
        digest = hmac.new(fake.ding_secret.encode(), message, hashlib.sha256).digest()
        if query.get("sign") != base64.b64encode(digest).decode():
            return 200, {"errcode": 310000, "errmsg": "sign not match"}
    markdown = body.get("markdown", {}) if isinstance(body, dict) else {}
    if body.get("msgtype") != "markdown" or not markdown.get("title") or not markdown.get("text"):
        return 200, {"errcode": 40035, "errmsg": "缺少参数 json"}
    return 200, {"errcode": 0, "errmsg": "ok"}


def _feishu(fake: FakePagers, request: Request, body: Any, raw: bytes) -> Answer:
    if request.path_params["token"] != FEISHU_TOKEN:
        return 200, {"code": 19001, "data": {},
                     "msg": "param invalid: incoming webhook access token invalid"}  # fmt: skip
    if not isinstance(body, dict):
        return 400, {"code": 9499, "data": {}, "msg": "Bad Request"}
    if fake.feishu_secret is not None:
        stamp = str(body.get("timestamp", ""))
        key = f"{stamp}\n{fake.feishu_secret}".encode()
        want = base64.b64encode(hmac.new(key, b"", hashlib.sha256).digest()).decode()
        if not stamp.isdigit() or abs(int(stamp) - time.time()) > HOUR or body.get("sign") != want:
            return 200, {"code": 19021, "data": {}, "msg": "sign match fail or timestamp is "
                         "not within one hour from current time"}  # fmt: skip
    if body.get("msg_type") != "text" or not body.get("content", {}).get("text"):
        return 200, {"code": 9499, "data": {}, "msg": "Bad Request"}
    return 200, {"code": 0, "data": {}, "msg": "success"}


CHECKS = {
    "pagerduty": _pagerduty,
    "webhook": _webhook,
    "wecom": _wecom,
    "dingtalk": _dingtalk,
    "feishu": _feishu,
}


@contextmanager
def running(**settings: Any) -> Iterator[FakePagers]:
    """Serve a FakePagers until the block ends; `settings` go to FakePagers."""
    fake = FakePagers(**settings)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    fake.url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    config = uvicorn.Config(
        fake.app(), log_level="warning", access_log=False, lifespan="off", ws="none",
        timeout_graceful_shutdown=1,
    )  # fmt: skip
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("fake pagers did not start")
        time.sleep(0.01)
    try:
        yield fake
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()

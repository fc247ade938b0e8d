"""A fake Slack on loopback that speaks Slack's real protocols, so the real clients run unchanged.

`running()` serves, on a kernel-chosen port:

- the Web API at `{url}/api/<method>` (point `WebClient(base_url=slack.api_url)` at it), with
  bearer-token auth, recorded calls, message state after updates, injected 429/500 faults and
  an optional per-channel rate limit like Slack's ~1 message/s;
- Socket Mode: `apps.connections.open` (app-level `xapp-` token) hands out a `ws://` URL whose
  endpoint greets with `hello`, pushes envelopes the test sends and records the client's acks;
- an incoming-webhook endpoint (`/services/T.../B.../...`, what Alertmanager's slack receiver
  posts to) and `response_url` endpoints (`/response/<id>`), both recorded.

Tests act from their own thread; the server runs on uvicorn's loop in a daemon thread, so all
shared state sits behind one condition variable and every wait has a deadline.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import itertools
import json
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, urlencode

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route, WebSocketRoute
from starlette.websockets import WebSocket, WebSocketDisconnect

BOT_TOKEN = "xoxb-test"
APP_TOKEN = "xapp-test"
TEAM_ID = "T000"
APP_ID = "A000"
BOT_USER_ID = "UBOT"
WAIT_SECONDS = 5.0
# The built-in Socket Mode client reads with a 3 s socket timeout and close() joins that
# reader; pinging often (as Slack also pings) wakes it, so closing a client takes ~0.1 s.
PING_SECONDS = 0.1
# Fields Slack accepts as JSON strings inside form-encoded bodies.
JSON_FIELDS = ("blocks", "attachments", "view", "metadata")
# Methods that need the app-level token; every other method wants the bot token.
APP_TOKEN_METHODS = frozenset({"apps.connections.open"})
PACED_METHODS = frozenset({"chat.postMessage", "chat.update"})


@dataclass(frozen=True)
class Call:
    """One Web API request as it arrived, and the status the fake answered."""

    method: str
    params: dict[str, Any]
    headers: dict[str, str]
    monotonic: float
    wall: float
    status: int
    error: str | None


@dataclass
class Message:
    """A posted message as it stands now; `edits` counts successful chat.update calls."""

    channel: str
    ts: str
    text: str | None
    blocks: list[dict[str, Any]] | None
    attachments: list[dict[str, Any]] | None
    thread_ts: str | None
    user: str = BOT_USER_ID
    edits: int = 0
    metadata: dict[str, Any] | None = None


@dataclass
class File:
    """A file uploaded through files.getUploadURLExternal, the upload URL, and
    files.completeUploadExternal (what WebClient.files_upload_v2 does)."""

    id: str
    filename: str
    length: int
    content: bytes | None = None
    title: str | None = None
    channel: str | None = None
    thread_ts: str | None = None
    comment: str | None = None


@dataclass(frozen=True)
class Post:
    """A JSON body posted to an incoming webhook or a response_url."""

    path: str
    body: Any
    headers: dict[str, str]
    monotonic: float
    wall: float


@dataclass
class _Fault:
    status: int
    retry_after: int | None
    remaining: int
    error: str = "fatal_error"


@dataclass
class _Pace:
    per_second: float
    burst: float = 1.0
    tokens: float = 1.0
    last: float | None = None
    violations: int = 0


@dataclass
class _Socket:
    websocket: WebSocket
    loop: asyncio.AbstractEventLoop


class ApiError(Exception):
    """Answer the current Web API call with `{"ok": false, "error": ...}`."""

    def __init__(self, error: str, status: int = 200, headers: dict[str, str] | None = None):
        super().__init__(error)
        self.error = error
        self.status = status
        self.headers = headers or {}


@dataclass
class FakeSlack:
    """State and behaviour of the fake; `running()` serves it and yields it as the handle."""

    bot_token: str = BOT_TOKEN
    app_token: str = APP_TOKEN
    usergroups: dict[str, list[str]] = field(default_factory=dict)
    users: dict[str, dict[str, Any]] = field(default_factory=dict)
    url: str = ""
    _cond: threading.Condition = field(default_factory=threading.Condition)
    _calls: list[Call] = field(default_factory=list)
    _messages: list[Message] = field(default_factory=list)
    _ephemerals: list[dict[str, Any]] = field(default_factory=list)
    _views: dict[str, dict[str, Any]] = field(default_factory=dict)
    _dms: dict[str, str] = field(default_factory=dict)
    _files: dict[str, File] = field(default_factory=dict)
    _faults: dict[str, list[_Fault]] = field(default_factory=dict)
    _paces: dict[str, _Pace] = field(default_factory=dict)
    _incoming: list[Post] = field(default_factory=list)
    _responses: list[Post] = field(default_factory=list)
    _sockets: list[_Socket] = field(default_factory=list)
    _opened: int = 0
    _acks: dict[str, dict[str, Any]] = field(default_factory=dict)
    _counter: Iterator[int] = field(default_factory=lambda: itertools.count(1))
    _last_micros: int = 0

    # ---- configuration and fault injection (test thread) ----

    @property
    def api_url(self) -> str:
        """What `WebClient(base_url=...)` wants: it appends the method name directly."""
        return f"{self.url}/api/"

    def fail(
        self,
        method: str,
        status: int = 429,
        *,
        retry_after: int | None = 1,
        times: int = 1,
        error: str = "fatal_error",
    ) -> None:
        """Answer the next `times` calls to `method` with `status` (429 carries Retry-After)
        and `error`; a 200 with an error is how Slack refuses (`not_in_channel`)."""
        with self._cond:
            fault = _Fault(status, retry_after if status == 429 else None, times, error)
            self._faults.setdefault(method, []).append(fault)

    def rate_limit(self, channel: str, per_second: float = 1.0, burst: float = 1.0) -> None:
        """Answer 429 (Retry-After: 1) to chat.postMessage/update on `channel` coming faster
        than `per_second` on average, allowing `burst` at once (Slack tolerates short
        bursts per channel)."""
        with self._cond:
            self._paces[channel] = _Pace(per_second, burst, burst)

    def violations(self, channel: str) -> int:
        """How many calls to a rate-limited channel were answered 429 for coming too fast."""
        with self._cond:
            pace = self._paces.get(channel)
            return pace.violations if pace else 0

    # ---- queries (test thread) ----

    def calls(self, method: str | None = None) -> list[Call]:
        with self._cond:
            return [c for c in self._calls if method is None or c.method == method]

    def files(self, channel: str | None = None) -> list[File]:
        """Files shared (upload completed), in order."""
        with self._cond:
            shared = [f for f in self._files.values() if f.channel is not None]
            return [f for f in shared if channel is None or f.channel == channel]

    def receive_upload(self, file_id: str, data: bytes) -> int:
        """The bytes POSTed to a file's upload URL; the HTTP status to answer."""
        with self._cond:
            stored = self._files.get(file_id)
            if stored is None or stored.content is not None:
                return 404
            if len(data) != stored.length:
                return 400
            stored.content = data
            return 200

    def messages(self, channel: str | None = None) -> list[Message]:
        """Posted messages in posting order, as they read after any updates."""
        with self._cond:
            return [m for m in self._messages if channel is None or m.channel == channel]

    def message(self, channel: str, ts: str) -> Message:
        with self._cond:
            found = self._find(channel, ts)
        if found is None:
            raise KeyError(f"no message {ts} in {channel}")
        return found

    def ephemerals(self, channel: str | None = None) -> list[dict[str, Any]]:
        with self._cond:
            return [e for e in self._ephemerals if channel is None or e["channel"] == channel]

    def views(self) -> dict[str, dict[str, Any]]:
        """Opened, updated and published views by view id, as they stand now."""
        with self._cond:
            return dict(self._views)

    def incoming(self) -> list[Post]:
        with self._cond:
            return list(self._incoming)

    def responses(self) -> list[Post]:
        """Posts to response_url endpoints (`path` is the id minted into the URL)."""
        with self._cond:
            return list(self._responses)

    def response_url(self) -> str:
        """A fresh response_url for a payload; posts to it show up in `responses()`."""
        return f"{self.url}/response/{uuid.uuid4().hex}"

    # ---- Socket Mode (test thread) ----

    def connected(self, timeout: float = WAIT_SECONDS) -> int:
        """Wait until a Socket Mode client is connected; return how many are."""
        with self._cond:
            if not self._cond.wait_for(lambda: self._sockets, timeout):
                raise TimeoutError(f"no Socket Mode client connected within {timeout} s")
            return len(self._sockets)

    def connections(self) -> tuple[int, int]:
        """(open now, opened ever): a reconnect shows as (1, 2) once the old one is closed."""
        with self._cond:
            return len(self._sockets), self._opened

    def send_envelope(
        self,
        type: str,
        payload: dict[str, Any],
        *,
        accepts_response_payload: bool = False,
        retry_attempt: int = 0,
        retry_reason: str = "",
        timeout: float = WAIT_SECONDS,
    ) -> str:
        """Push an envelope to the newest connection (Slack delivers each to one connection)
        and return its envelope_id for `wait_ack`."""
        envelope_id = str(uuid.uuid4())
        envelope = {
            "envelope_id": envelope_id,
            "type": type,
            "payload": payload,
            "accepts_response_payload": accepts_response_payload,
            "retry_attempt": retry_attempt,
            "retry_reason": retry_reason,
        }
        self._send_raw(json.dumps(envelope), timeout)
        return envelope_id

    def send_disconnect(self, reason: str = "refresh_requested") -> None:
        """Tell the client to reconnect, as Slack does every few hours."""
        message = {"type": "disconnect", "reason": reason, "debug_info": {"host": "fake"}}
        self._send_raw(json.dumps(message), WAIT_SECONDS)

    def wait_ack(self, envelope_id: str, timeout: float = WAIT_SECONDS) -> dict[str, Any]:
        """The ack the client sent for `envelope_id` ({"envelope_id", optional "payload"})."""
        with self._cond:
            if not self._cond.wait_for(lambda: envelope_id in self._acks, timeout):
                raise TimeoutError(f"no ack for envelope {envelope_id} within {timeout} s")
            return self._acks[envelope_id]

    def wait_for(self, condition: Callable[[], bool], timeout: float = WAIT_SECONDS) -> None:
        """Wait until `condition` (which may use the query methods) holds; it is rechecked
        whenever the fake records something."""
        with self._cond:
            if not self._cond.wait_for(condition, timeout):
                raise TimeoutError(f"condition still false after {timeout} s")

    def _send_raw(self, text: str, timeout: float) -> None:
        self.connected(timeout)
        with self._cond:
            target = self._sockets[-1]
        future = asyncio.run_coroutine_threadsafe(target.websocket.send_text(text), target.loop)
        future.result(timeout)

    # ---- Web API (server loop) ----

    def answer(self, method: str, params: dict[str, Any], headers: dict[str, str]) -> Response:
        """Authenticate, inject faults, dispatch and record one Web API call."""
        arrived, wall = time.monotonic(), time.time()
        status, extra = 200, {}
        with self._cond:
            try:
                self._inject_fault(method)
                self._authenticate(method, params, headers)
                self._pace(method, params)
                body: dict[str, Any] = {"ok": True, **self._dispatch(method, params)}
            except ApiError as exc:
                status, extra, body = exc.status, exc.headers, {"ok": False, "error": exc.error}
            error = body.get("error")
            self._calls.append(Call(method, params, headers, arrived, wall, status, error))
            self._cond.notify_all()
        return JSONResponse(body, status_code=status, headers=extra)

    def _inject_fault(self, method: str) -> None:
        faults = self._faults.get(method)
        if not faults:
            return
        fault = faults[0]
        fault.remaining -= 1
        if fault.remaining <= 0:
            faults.pop(0)
        if fault.status == 429:
            retry_after = 1 if fault.retry_after is None else fault.retry_after
            raise ApiError("ratelimited", 429, {"Retry-After": str(retry_after)})
        raise ApiError(fault.error, fault.status)

    def _authenticate(self, method: str, params: dict[str, Any], headers: dict[str, str]) -> None:
        """Slack takes the token from the Authorization header (or a `token` param); the
        app-level token is only good for apps.connections.open, and vice versa."""
        auth = headers.get("authorization", "")
        token = auth.removeprefix("Bearer ") if auth.startswith("Bearer ") else params.get("token")
        if not token:
            raise ApiError("not_authed")
        if token not in (self.bot_token, self.app_token):
            raise ApiError("invalid_auth")
        wants_app = method in APP_TOKEN_METHODS
        if (token == self.app_token) != wants_app:
            raise ApiError("not_allowed_token_type")

    def _pace(self, method: str, params: dict[str, Any]) -> None:
        pace = self._paces.get(str(params.get("channel")))
        if method not in PACED_METHODS or pace is None:
            return
        now = time.monotonic()
        if pace.last is not None:  # a token bucket: `per_second`, at most `burst` saved
            pace.tokens = min(pace.burst, pace.tokens + (now - pace.last) * pace.per_second)
        pace.last = now
        if pace.tokens < 1.0 - 1e-6:
            pace.violations += 1
            raise ApiError("ratelimited", 429, {"Retry-After": "1"})
        pace.tokens -= 1.0

    def _dispatch(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        handler = _HANDLERS.get(method)
        if handler is None:
            raise ApiError("unknown_method")
        return handler(self, params)

    def _find(self, channel: str, ts: str) -> Message | None:
        return next((m for m in self._messages if m.channel == channel and m.ts == ts), None)

    def _next_ts(self) -> str:
        """Unique, increasing message timestamps in Slack's "seconds.micros" shape, from the
        wall clock as Slack's are (`conversations.history` filters on them)."""
        micros = max(self._last_micros + 1, int(time.time() * 1_000_000))
        self._last_micros = micros
        return f"{micros // 1_000_000}.{micros % 1_000_000:06d}"

    # ---- recorders (server loop) ----

    def record_post(self, into: list[Post], path: str, body: Any, headers: dict[str, str]) -> None:
        with self._cond:
            into.append(Post(path, body, headers, time.monotonic(), time.time()))
            self._cond.notify_all()

    def record_socket(self, sock: _Socket, present: bool) -> None:
        with self._cond:
            if present:
                self._sockets.append(sock)
                self._opened += 1
            else:
                self._sockets.remove(sock)
            self._cond.notify_all()

    def record_ack(self, text: str) -> None:
        """Keep acks by envelope_id; anything else a client sends is ignored, as by Slack."""
        ack = json.loads(text) if text.startswith("{") else {}
        if "envelope_id" not in ack:
            return
        with self._cond:
            self._acks[ack["envelope_id"]] = ack
            self._cond.notify_all()


# ---- Web API methods: each takes the params and returns the body beyond {"ok": true} ----


def _auth_test(slack: FakeSlack, params: dict[str, Any]) -> dict[str, Any]:
    return {
        "url": "https://fake.slack.com/",
        "team": "Fake",
        "user": "runbook-bot",
        "team_id": TEAM_ID,
        "user_id": BOT_USER_ID,
        "bot_id": "BBOT",
        "is_enterprise_install": False,
    }


def _post_message(slack: FakeSlack, params: dict[str, Any]) -> dict[str, Any]:
    channel = _require(params, "channel")
    message = Message(
        channel=channel,
        ts=slack._next_ts(),
        text=params.get("text"),
        blocks=params.get("blocks"),
        attachments=params.get("attachments"),
        thread_ts=params.get("thread_ts"),
        metadata=params.get("metadata"),
    )
    slack._messages.append(message)
    return {"channel": channel, "ts": message.ts, "message": _as_event(message)}


def _history(slack: FakeSlack, params: dict[str, Any]) -> dict[str, Any]:
    """Top-level messages of a channel, newest first, with metadata when asked for."""
    channel = _require(params, "channel")
    oldest = float(params.get("oldest") or 0)
    found = [
        m
        for m in slack._messages
        if m.channel == channel and m.thread_ts is None and float(m.ts) >= oldest
    ]
    limit = int(params.get("limit") or 100)
    with_metadata = str(params.get("include_all_metadata", "")).lower() in ("1", "true")
    events = []
    for message in reversed(found[-limit:]):
        event = _as_event(message)
        if with_metadata and message.metadata is not None:
            event["metadata"] = message.metadata
        events.append(event)
    return {"messages": events, "has_more": len(found) > limit}


def _update(slack: FakeSlack, params: dict[str, Any]) -> dict[str, Any]:
    channel, ts = _require(params, "channel"), _require(params, "ts")
    message = slack._find(channel, ts)
    if message is None:
        raise ApiError("message_not_found")
    for name in ("text", "blocks", "attachments"):
        if name in params:
            setattr(message, name, params[name])
    message.edits += 1
    return {"channel": channel, "ts": ts, "text": message.text, "message": _as_event(message)}


def _post_ephemeral(slack: FakeSlack, params: dict[str, Any]) -> dict[str, Any]:
    _require(params, "channel")
    _require(params, "user")
    ts = slack._next_ts()
    slack._ephemerals.append({**params, "message_ts": ts})
    return {"message_ts": ts}


def _permalink(slack: FakeSlack, params: dict[str, Any]) -> dict[str, Any]:
    channel, ts = _require(params, "channel"), _require(params, "message_ts")
    link = f"https://fake.slack.com/archives/{channel}/p{ts.replace('.', '')}"
    return {"channel": channel, "permalink": link}


def _open_conversation(slack: FakeSlack, params: dict[str, Any]) -> dict[str, Any]:
    users = _require(params, "users")
    channel = slack._dms.setdefault(users, f"D{len(slack._dms) + 1:08d}")
    return {"channel": {"id": channel, "is_im": "," not in users}}


def _usergroup_users(slack: FakeSlack, params: dict[str, Any]) -> dict[str, Any]:
    group = _require(params, "usergroup")
    if group not in slack.usergroups:
        raise ApiError("no_such_subteam")
    return {"users": list(slack.usergroups[group])}


def _user_info(slack: FakeSlack, params: dict[str, Any]) -> dict[str, Any]:
    user = _require(params, "user")
    name = user.lower()
    default = {
        "id": user,
        "team_id": TEAM_ID,
        "name": name,
        "real_name": name,
        "tz": "UTC",
        "is_bot": False,
        "profile": {"display_name": name, "real_name": name, "email": f"{name}@example.com"},
    }
    return {"user": {**default, **slack.users.get(user, {})}}


def _open_view(slack: FakeSlack, params: dict[str, Any]) -> dict[str, Any]:
    _require(params, "trigger_id")
    return {"view": _store_view(slack, f"V{len(slack._views) + 1:08d}", params)}


def _update_view(slack: FakeSlack, params: dict[str, Any]) -> dict[str, Any]:
    view_id = params.get("view_id") or _require(params, "external_id")
    if view_id not in slack._views:
        raise ApiError("not_found")
    return {"view": _store_view(slack, view_id, params)}


def _publish_view(slack: FakeSlack, params: dict[str, Any]) -> dict[str, Any]:
    user = _require(params, "user_id")
    return {"view": _store_view(slack, f"VHOME{user}", params)}


def _connections_open(slack: FakeSlack, params: dict[str, Any]) -> dict[str, Any]:
    ws = slack.url.replace("http://", "ws://", 1)
    return {"url": f"{ws}/socket-mode/{uuid.uuid4().hex}?ticket={uuid.uuid4()}&app_id={APP_ID}"}


def _upload_url(slack: FakeSlack, params: dict[str, Any]) -> dict[str, Any]:
    filename = _require(params, "filename")
    length = _require(params, "length")
    if not length.isdigit():
        raise ApiError("invalid_arguments")
    file_id = f"F{next(slack._counter):010d}"
    slack._files[file_id] = File(file_id, filename, int(length))
    return {"upload_url": f"{slack.url}/upload/{file_id}", "file_id": file_id}


def _complete_upload(slack: FakeSlack, params: dict[str, Any]) -> dict[str, Any]:
    files = params.get("files")
    if isinstance(files, str):
        files = json.loads(files)
    if not isinstance(files, list) or not files:
        raise ApiError("invalid_arguments")
    done = []
    for item in files:
        stored = slack._files.get(str(item.get("id")))
        if stored is None or stored.content is None:
            raise ApiError("file_not_found")
        stored.title = item.get("title") or stored.filename
        stored.channel = params.get("channel_id")
        stored.thread_ts = params.get("thread_ts")
        stored.comment = params.get("initial_comment")
        link = f"https://fake.slack.com/files/{BOT_USER_ID}/{stored.id}/{stored.filename}"
        done.append({"id": stored.id, "title": stored.title, "permalink": link})
    return {"files": done}


_HANDLERS = {
    "auth.test": _auth_test,
    "chat.postMessage": _post_message,
    "conversations.history": _history,
    "chat.update": _update,
    "chat.postEphemeral": _post_ephemeral,
    "chat.getPermalink": _permalink,
    "conversations.open": _open_conversation,
    "usergroups.users.list": _usergroup_users,
    "users.info": _user_info,
    "views.open": _open_view,
    "views.update": _update_view,
    "views.publish": _publish_view,
    "apps.connections.open": _connections_open,
    "files.getUploadURLExternal": _upload_url,
    "files.completeUploadExternal": _complete_upload,
}


def _require(params: dict[str, Any], name: str) -> str:
    value = params.get(name)
    if not value:
        # Slack's own error for a missing argument, e.g. "channel_not_found" for channel.
        raise ApiError("channel_not_found" if name == "channel" else "invalid_arguments")
    return str(value)


def _as_event(message: Message) -> dict[str, Any]:
    event: dict[str, Any] = {"type": "message", "user": message.user, "ts": message.ts}
    for name in ("text", "blocks", "attachments", "thread_ts"):
        if getattr(message, name) is not None:
            event[name] = getattr(message, name)
    return event


def _store_view(slack: FakeSlack, view_id: str, params: dict[str, Any]) -> dict[str, Any]:
    view = params.get("view")
    if not isinstance(view, dict):
        raise ApiError("invalid_arguments")
    stored = {**view, "id": view_id, "team_id": TEAM_ID, "hash": uuid.uuid4().hex}
    slack._views[view_id] = stored
    return stored


# ---- the ASGI app ----


async def _parse_params(request: Request) -> dict[str, Any]:
    """WebClient sends JSON for chat.* and views.* and forms for the rest; forms carry
    blocks/attachments/view as JSON strings, which Slack decodes, so we do too."""
    params: dict[str, Any] = dict(request.query_params)
    raw = await request.body()
    if request.headers.get("content-type", "").startswith("application/json"):
        params.update(json.loads(raw or b"{}"))
        return params
    params.update(parse_qsl(raw.decode(), keep_blank_values=True))
    for name in JSON_FIELDS:
        if isinstance(params.get(name), str) and params[name][:1] in ("[", "{"):
            params[name] = json.loads(params[name])
    return params


def _build_app(slack: FakeSlack) -> Starlette:
    async def api(request: Request) -> Response:
        params = await _parse_params(request)
        return slack.answer(request.path_params["method"], params, dict(request.headers))

    async def webhook(request: Request) -> Response:
        body = json.loads(await request.body())
        slack.record_post(slack._incoming, request.url.path, body, dict(request.headers))
        return PlainTextResponse("ok")

    async def response_url(request: Request) -> Response:
        body = json.loads(await request.body())
        slack.record_post(slack._responses, request.path_params["id"], body, dict(request.headers))
        return JSONResponse({"ok": True})

    async def upload(request: Request) -> Response:
        status = slack.receive_upload(request.path_params["id"], await request.body())
        return PlainTextResponse(f"OK - {status}", status_code=status)

    async def socket_mode(websocket: WebSocket) -> None:
        await websocket.accept()
        await websocket.send_text(json.dumps(_hello(len(slack._sockets) + 1)))
        sock = _Socket(websocket, asyncio.get_running_loop())
        slack.record_socket(sock, present=True)
        try:
            while True:
                slack.record_ack(await websocket.receive_text())
        except WebSocketDisconnect:
            pass
        finally:
            slack.record_socket(sock, present=False)

    return Starlette(
        routes=[
            Route("/api/{method}", api, methods=["GET", "POST"]),
            Route("/services/{path:path}", webhook, methods=["POST"]),
            Route("/response/{id}", response_url, methods=["POST"]),
            Route("/upload/{id}", upload, methods=["POST"]),
            WebSocketRoute("/socket-mode/{id}", socket_mode),
        ]
    )


def _hello(connections: int) -> dict[str, Any]:
    return {
        "type": "hello",
        "num_connections": connections,
        "debug_info": {
            "host": "applink-fake",
            "build_number": 1,
            "approximate_connection_time": 18060,
        },
        "connection_info": {"app_id": APP_ID},
    }


@contextmanager
def running(**config: Any) -> Iterator[FakeSlack]:
    """Serve a fake Slack until the block ends; `config` sets FakeSlack's public fields
    (bot_token, app_token, usergroups, users)."""
    slack = FakeSlack(**config)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    slack.url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    uv_config = uvicorn.Config(
        _build_app(slack),
        log_level="warning",
        access_log=False,
        lifespan="off",
        ws="websockets-sansio",
        ws_ping_interval=PING_SECONDS,
    )
    server = uvicorn.Server(uv_config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("fake Slack did not start")
        time.sleep(0.01)
    try:
        yield slack
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


# ---- inbound request signing and payload encoding (for the HTTP transport) ----


def signed_headers(
    signing_secret: str, body: bytes, timestamp: int | None = None
) -> dict[str, str]:
    """Headers Slack signs an inbound request with; pass an old `timestamp` to forge a replay."""
    ts = int(time.time()) if timestamp is None else timestamp
    base = b"v0:" + str(ts).encode() + b":" + body
    digest = hmac.new(signing_secret.encode(), base, hashlib.sha256).hexdigest()
    return {"X-Slack-Request-Timestamp": str(ts), "X-Slack-Signature": f"v0={digest}"}


def interactive_form(payload: dict[str, Any]) -> bytes:
    """The body Slack POSTs for interactivity: one form field, `payload`, holding JSON."""
    return urlencode({"payload": json.dumps(payload)}).encode()


def form(fields: dict[str, str]) -> bytes:
    """A form-encoded body, as Slack sends slash commands."""
    return urlencode(fields).encode()


# ---- payloads shaped like Slack's documented ones ----


def block_actions(
    *,
    action_id: str,
    value: str,
    response_url: str,
    user_id: str = "U100",
    user_name: str = "alice",
    channel_id: str = "C100",
    message: Message | None = None,
    message_ts: str = "1700000000.000100",
    block_id: str = "actions",
    action_ts: str | None = None,
) -> dict[str, Any]:
    """A button click; pass the `Message` the fake recorded to carry its real ts and blocks."""
    ts = message.ts if message else message_ts
    clicked = f"{time.time():.6f}" if action_ts is None else action_ts
    return {
        "type": "block_actions",
        "user": {"id": user_id, "username": user_name, "name": user_name, "team_id": TEAM_ID},
        "api_app_id": APP_ID,
        "token": "legacy-verification-token",
        "container": {
            "type": "message",
            "message_ts": ts,
            "channel_id": channel_id,
            "is_ephemeral": False,
        },
        "trigger_id": _trigger_id(),
        "team": {"id": TEAM_ID, "domain": "fake"},
        "enterprise": None,
        "is_enterprise_install": False,
        "channel": {"id": channel_id, "name": "incidents"},
        "message": _as_event(message) if message else {"type": "message", "ts": ts},
        "state": {"values": {}},
        "response_url": response_url,
        "actions": [
            {
                "type": "button",
                "action_id": action_id,
                "block_id": block_id,
                "text": {"type": "plain_text", "text": action_id, "emoji": True},
                "value": value,
                "action_ts": clicked,
            }
        ],
    }


def slash_command(
    *,
    text: str,
    response_url: str,
    command: str = "/incident",
    user_id: str = "U100",
    user_name: str = "alice",
    channel_id: str = "C100",
) -> dict[str, str]:
    """A slash command's fields: the Socket Mode payload as is, or `form(...)` it for HTTP."""
    return {
        "token": "legacy-verification-token",
        "team_id": TEAM_ID,
        "team_domain": "fake",
        "channel_id": channel_id,
        "channel_name": "incidents",
        "user_id": user_id,
        "user_name": user_name,
        "command": command,
        "text": text,
        "api_app_id": APP_ID,
        "is_enterprise_install": "false",
        "response_url": response_url,
        "trigger_id": _trigger_id(),
    }


def view_submission(
    *,
    callback_id: str,
    values: dict[str, dict[str, dict[str, Any]]],
    private_metadata: str = "",
    view_id: str = "V00000001",
    user_id: str = "U100",
    user_name: str = "alice",
) -> dict[str, Any]:
    """A modal's submit; `values` is state.values: block_id -> action_id -> element state,
    e.g. {"reason": {"text": {"type": "plain_text_input", "value": "disk full"}}}."""
    return {
        "type": "view_submission",
        "team": {"id": TEAM_ID, "domain": "fake"},
        "user": {"id": user_id, "username": user_name, "name": user_name, "team_id": TEAM_ID},
        "api_app_id": APP_ID,
        "token": "legacy-verification-token",
        "trigger_id": _trigger_id(),
        "view": {
            "id": view_id,
            "team_id": TEAM_ID,
            "type": "modal",
            "callback_id": callback_id,
            "private_metadata": private_metadata,
            "title": {"type": "plain_text", "text": "Incident"},
            "blocks": [],
            "state": {"values": values},
            "hash": uuid.uuid4().hex,
            "app_id": APP_ID,
            "bot_id": "BBOT",
        },
        "response_urls": [],
        "is_enterprise_install": False,
        "enterprise": None,
    }


def _trigger_id() -> str:
    return f"{int(time.time())}.{TEAM_ID}.{uuid.uuid4().hex}"


__all__ = [
    "APP_TOKEN",
    "BOT_TOKEN",
    "Call",
    "FakeSlack",
    "Message",
    "Post",
    "form",
    "interactive_form",
    "running",
    "signed_headers",
    "block_actions",
    "slash_command",
    "view_submission",
]

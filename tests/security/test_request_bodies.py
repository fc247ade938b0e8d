"""Bodies an attacker sends: far past any cap, chunked or with a `Content-Length` that lies.

The real app under uvicorn on loopback (tests/support/server.py) with Slack and the console
on; the requests go over a raw socket, so the test controls every byte and sees the answer
the server sends before it closes. The memory bound is the server process's peak RSS
(`VmHWM`, reset through `/proc/self/clear_refs` before the request): the server runs in
this process, in a thread, and the body is generated lazily, a chunk at a time.
"""

from __future__ import annotations

import select
import socket
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from bot.chat import slack as slack_chat
from bot.chat.slack.app import MAX_BODY_BYTES, SlackApp
from bot.clock import FrozenClock
from bot.db import Database
from bot.web import MAX_DECISION_BYTES
from tests.console.rig import ConsoleRig
from tests.support import fake_slack, people

MiB = 1024 * 1024
FLOOD = 64 * MiB
CHUNK = 64 * 1024
SLACK = "/slack/events"
HOOK = "/webhooks/alertmanager"
APPROVE = "/api/incidents/1/steps/cordon/approve"
LOGIN = "/login"
CAPS = {SLACK: MAX_BODY_BYTES, HOOK: 2048, APPROVE: MAX_DECISION_BYTES, LOGIN: 16 * 1024}


@dataclass(frozen=True)
class Served:
    url: str
    token: str
    """alice's personal API token: the decision endpoints read no body before it."""

    def auth(self, path: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"} if path == APPROVE else {}


@pytest.fixture
def url(served: Served) -> str:
    return served.url


@pytest.fixture
def served(db: Database, clock: FrozenClock, tmp_path: Path) -> Iterator[Served]:
    with fake_slack.running() as slack:
        rig = ConsoleRig(
            db,
            clock,
            tmp_path,
            max_body_bytes=CAPS[HOOK],
            slack_bot_token=fake_slack.BOT_TOKEN,
            slack_signing_secret="8f742231b10e8888abcd99yyyzzz85a5",
            slack_channel="C0INCIDENTS",
            slack_api_url=slack.api_url,
        )
        app = SlackApp(rig.settings, db, clock, slack_chat.api(rig.settings))
        token = people.token(db, rig.settings, "alice")
        with rig.serving(slack=app) as base:
            yield Served(base, token)


def _connect(url: str) -> socket.socket:
    parts = urlsplit(url)
    sock = socket.create_connection((parts.hostname, parts.port), timeout=30)
    return sock


def _head(path: str, **headers: Any) -> bytes:
    lines = [f"POST {path} HTTP/1.1", "Host: 127.0.0.1"]
    lines += [f"{name.replace('_', '-')}: {value}" for name, value in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def _answer(sock: socket.socket) -> tuple[int, bytes]:
    """The status and what came of the body before the server closed or went quiet."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 "), f"no HTTP answer: {data[:200]!r}"
    return int(head.split()[1]), body


def _send_until_answered(sock: socket.socket, chunks: Iterator[bytes]) -> int:
    """Send `chunks` until the server answers; how many bytes went out."""
    sent = 0
    for chunk in chunks:
        readable, _, _ = select.select([sock], [], [], 0)
        if readable:
            break
        try:
            sock.sendall(chunk)
        except (BrokenPipeError, ConnectionResetError):
            break
        sent += len(chunk)
    return sent


def _chunked(total: int) -> Iterator[bytes]:
    """`total` bytes of chunked transfer encoding, made one chunk at a time."""
    piece = b"x" * CHUNK
    for _ in range(total // CHUNK):
        yield f"{CHUNK:x}\r\n".encode() + piece + b"\r\n"
    yield b"0\r\n\r\n"


def _raw(total: int) -> Iterator[bytes]:
    piece = b"x" * CHUNK
    for _ in range(total // CHUNK):
        yield piece


def _peak_reset() -> None:
    Path("/proc/self/clear_refs").write_text("5")


def _rss(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no {field} in /proc/self/status")


@pytest.mark.parametrize("framing", ["chunked", "lying-content-length"])
def test_an_unsigned_slack_post_far_past_the_cap_is_a_413_in_bounded_memory(
    url: str, framing: str
) -> None:
    with _connect(url) as warm:  # the first request's imports and buffers are no growth
        warm.sendall(_head(SLACK, Content_Length=2, Content_Type="application/json") + b"{}")
        _answer(warm)
    _peak_reset()
    before = _rss("VmRSS")

    with _connect(url) as sock:
        if framing == "chunked":
            sock.sendall(_head(SLACK, Transfer_Encoding="chunked", Content_Type="text/plain"))
            sent = _send_until_answered(sock, _chunked(FLOOD))
        else:
            # It declares a size under the cap and sends far more: the excess is never
            # read as this request's body.
            sock.sendall(_head(SLACK, Content_Length=MAX_BODY_BYTES - 1))
            sent = _send_until_answered(sock, _raw(FLOOD))
        status, body = _answer(sock)
    grown = _rss("VmHWM") - before

    if framing == "chunked":
        assert status == 413, body
        assert b"larger than" in body and b"not from Slack" in body
    else:
        # What was read as the body carries no signature (401), or the excess, read as
        # the next request, is no HTTP (400): either way nothing past the cap is held.
        assert status in (400, 401), body
    assert sent > MAX_BODY_BYTES, "the server answered before the body passed the cap"
    assert grown < 3 * MAX_BODY_BYTES + 24 * MiB, f"the server grew by {grown // MiB} MiB"


@pytest.mark.parametrize("path", [SLACK, HOOK, APPROVE, LOGIN])
def test_a_declared_length_past_the_cap_is_a_413_before_the_body_is_read(
    served: Served, path: str
) -> None:
    with _connect(served.url) as sock:
        # 2 GiB announced, nothing sent: an answer now means nothing was waited for.
        kind = "application/x-www-form-urlencoded" if path == LOGIN else "application/json"
        sock.sendall(_head(path, Content_Length=2**31, Content_Type=kind, **served.auth(path)))
        status, body = _answer(sock)

    assert status == 413, body
    assert f"larger than {CAPS[path]} bytes".encode() in body


@pytest.mark.parametrize("path", [SLACK, HOOK, APPROVE, LOGIN])
def test_every_post_that_reads_a_body_refuses_a_chunked_flood_with_413(
    served: Served, path: str
) -> None:
    kind = "application/x-www-form-urlencoded" if path == LOGIN else "application/json"
    with _connect(served.url) as sock:
        sock.sendall(
            _head(path, Transfer_Encoding="chunked", Content_Type=kind, **served.auth(path))
        )
        sent = _send_until_answered(sock, _chunked(8 * MiB))
        status, body = _answer(sock)

    assert status == 413, body
    assert f"larger than {CAPS[path]} bytes".encode() in body
    assert sent < 8 * MiB, "the whole flood went in before the answer"

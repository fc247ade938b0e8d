"""The real ASGI app under uvicorn, in a thread, on a loopback port chosen by the kernel."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import uvicorn

from bot.clock import Clock
from bot.config import Settings
from bot.db import Database
from bot.web import build_app


@contextmanager
def running(settings: Settings, db: Database, clock: Clock, **app: Any) -> Iterator[str]:
    """Serve the app until the block ends; yield its base URL. `app` goes to build_app
    (catalog, wake)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(
        build_app(settings, db, clock, **app),
        log_level="warning",
        access_log=False,
        proxy_headers=False,  # as serve: the peer is the socket's
        lifespan="off",
        ws="none",
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("test server did not start")
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()

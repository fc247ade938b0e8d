"""A loopback TCP proxy that a test can cut, hold, pause and restore, to make a real server
vanish, go silent or answer late; `RoundRobin` spreads connections over several servers, as
a Service does."""

from __future__ import annotations

import contextlib
import itertools
import socket
import threading
from collections import Counter


class TcpProxy:
    """Forward 127.0.0.1:`port` to `target`; `cut()` drops every connection and refuses new;
    `hold()` keeps connections open but forwards nothing (a server that stopped answering);
    `pause_answers()` lets requests through and keeps the answers until `release()`."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._open = threading.Event()
        self._open.set()
        self._holding = threading.Event()
        self._answering = threading.Event()
        self._answering.set()
        self._conns: list[socket.socket] = []
        self._lock = threading.Lock()
        self._stop = False
        self.accepted: Counter[tuple[str, int]] = Counter()
        """Connections forwarded, per target."""
        threading.Thread(target=self._accept, daemon=True).start()

    def _next_target(self) -> tuple[str, int]:
        return self.target

    def _connect(self) -> tuple[tuple[str, int], socket.socket] | None:
        target = self._next_target()
        try:
            upstream = socket.create_connection(target, timeout=5)
        except OSError:
            return None
        upstream.settimeout(None)
        return target, upstream

    def _accept(self) -> None:
        while not self._stop:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            if not self._open.is_set():
                client.close()
                continue
            found = self._connect()
            if found is None:
                client.close()
                continue
            target, upstream = found
            with self._lock:
                self._conns += [client, upstream]
                self.accepted[target] += 1
            for a, b, answers in ((client, upstream, False), (upstream, client, True)):
                threading.Thread(target=self._pipe, args=(a, b, answers), daemon=True).start()

    def _pipe(self, src: socket.socket, dst: socket.socket, answers: bool) -> None:
        try:
            while data := src.recv(65536):
                if answers:
                    self._answering.wait()
                if not self._holding.is_set():
                    dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)

    def cut(self) -> None:
        self._open.clear()
        with self._lock:
            for conn in self._conns:
                with contextlib.suppress(OSError):
                    conn.shutdown(socket.SHUT_RDWR)
                conn.close()
            self._conns.clear()

    def hold(self) -> None:
        """Swallow every byte from now on, both ways: callers wait until they time out."""
        self._holding.set()

    def pause_answers(self) -> None:
        """Forward requests but keep what the server answers until `release()` (or
        `restore()`): the server has acted, its client does not know yet."""
        self._answering.clear()

    def release(self) -> None:
        """Forward the answers kept since `pause_answers()`, and answers from now on."""
        self._answering.set()

    def restore(self) -> None:
        self._holding.clear()
        self._answering.set()
        self._open.set()

    def close(self) -> None:
        self._stop = True
        self._answering.set()
        self.cut()
        self._listener.close()


class RoundRobin(TcpProxy):
    """Forward each new connection to the next of `targets` in turn (a target that refuses
    is skipped, as a load balancer drops an endpoint that is down)."""

    def __init__(self, targets: list[tuple[str, int]]) -> None:
        if not targets:
            raise ValueError("RoundRobin needs at least one target")
        self.targets = list(targets)
        self._turns = itertools.cycle(self.targets)
        super().__init__(self.targets[0])

    def _next_target(self) -> tuple[str, int]:
        return next(self._turns)

    def _connect(self) -> tuple[tuple[str, int], socket.socket] | None:
        for _ in self.targets:
            found = super()._connect()
            if found is not None:
                return found
        return None

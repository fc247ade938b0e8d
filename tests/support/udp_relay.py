"""A UDP relay on loopback that holds every datagram for a while before passing it on.

Put in front of ipmi_sim, it makes a real ipmitool call last long enough for a test to
look at the running process (/proc/PID/environ, cmdline, fds) while the call still
succeeds. One client at a time, which is what one ipmitool run is.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def delaying(target: tuple[str, int], *, delay: float) -> Iterator[int]:
    """Relay 127.0.0.1:PORT <-> `target`, each datagram held `delay` seconds; yield PORT."""
    front = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    back = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    front.bind(("127.0.0.1", 0))
    back.bind(("127.0.0.1", 0))
    front.settimeout(0.1)
    back.settimeout(0.1)
    stop = threading.Event()
    client: list[tuple[str, int]] = []

    def forward() -> None:
        while not stop.is_set():
            try:
                data, peer = front.recvfrom(65535)
            except TimeoutError:
                continue
            client[:] = [peer]
            time.sleep(delay)
            back.sendto(data, target)

    def answer() -> None:
        while not stop.is_set():
            try:
                data, _ = back.recvfrom(65535)
            except TimeoutError:
                continue
            time.sleep(delay)
            if client:
                front.sendto(data, client[0])

    threads = [threading.Thread(target=f, daemon=True) for f in (forward, answer)]
    for thread in threads:
        thread.start()
    try:
        yield front.getsockname()[1]
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=5)
        front.close()
        back.close()

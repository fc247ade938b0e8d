"""A real SMTP server (aiosmtpd) on a port-0 loopback socket that records mail, checks
logins and refuses chosen recipients; and a port that accepts but never answers."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult, Envelope, LoginPassword, Session


@dataclass
class Mailbox:
    """What the SMTP fake received; `refuse` holds recipients it answers 550 for."""

    port: int = 0
    refuse: set[str] = field(default_factory=set)
    logins: dict[str, str] = field(default_factory=dict)
    messages: list[Envelope] = field(default_factory=list)

    async def handle_RCPT(  # noqa: N802 - aiosmtpd's hook name
        self, server: Any, session: Session, envelope: Envelope, address: str, options: Any
    ) -> str:
        if address in self.refuse:
            return "550 5.1.1 no such user here"
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(  # noqa: N802
        self, server: Any, session: Session, envelope: Envelope
    ) -> str:
        self.messages.append(envelope)
        return "250 Message accepted for delivery"

    def authenticate(
        self, server: Any, session: Session, envelope: Envelope, mechanism: str, data: Any
    ) -> AuthResult:
        if isinstance(data, LoginPassword):
            user, password = data.login.decode(), data.password.decode()
            if self.logins.get(user) == password:
                return AuthResult(success=True)
        return AuthResult(success=False, handled=False)


class _PortZeroController(Controller):
    """aiosmtpd's Controller on a socket the kernel already gave a port (no bind race)."""

    def __init__(self, handler: Mailbox, sock: socket.socket, **kwargs: Any) -> None:
        self._sock = sock
        super().__init__(handler, hostname="127.0.0.1", port=sock.getsockname()[1], **kwargs)

    def _create_server(self) -> Any:
        return self.loop.create_server(self._factory_invoker, sock=self._sock)


@contextmanager
def smtp_server(**mailbox: Any) -> Iterator[Mailbox]:
    box = Mailbox(**mailbox)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    box.port = sock.getsockname()[1]
    controller = _PortZeroController(
        box, sock, authenticator=box.authenticate, auth_require_tls=False, ready_timeout=5
    )
    controller.start()
    try:
        yield box
    finally:
        controller.stop()


@contextmanager
def silent_port() -> Iterator[int]:
    """A port that accepts connections (the kernel's backlog) but never says a word."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    try:
        yield sock.getsockname()[1]
    finally:
        sock.close()

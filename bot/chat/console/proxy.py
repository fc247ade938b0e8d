"""Console sign-in by a trusted reverse proxy, as oauth2-proxy does in front of an app.

Only a request whose TCP peer is inside `console.trusted_proxies` may say who it is with
`X-Forwarded-User` / `X-Forwarded-Email`: it is signed in as the person with that
`proxy_user` (or, failing that, `email`). From any other address the headers are ignored,
so a client that reaches the bot directly cannot name itself. A proxy naming nobody the
settings know is refused (403) with who to ask. The peer is the socket's: `serve` runs
uvicorn without proxy headers, so no `X-Forwarded-For` moves it.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping

from bot.config import Settings
from bot.errors import RequestRejected
from bot.people import Directory, Person

USER = "x-forwarded-user"
EMAIL = "x-forwarded-email"
MAX_HEADER = 254


class ProxyPersonUnknown(RequestRejected):
    """The proxy signed in someone the settings do not name."""

    status = 403


class TrustedProxy:
    def __init__(self, settings: Settings, directory: Directory) -> None:
        self.networks = tuple(settings.console.trusted_proxies)
        self.directory = directory

    def trusted(self, peer: str | None) -> bool:
        if not self.networks or not peer:
            return False
        try:
            address = ipaddress.ip_address(peer)
        except ValueError:
            return False
        return any(address in network for network in self.networks)

    def person(self, headers: Mapping[str, str], peer: str | None) -> tuple[Person, str] | None:
        """The person the proxy signed in and the identity it gave (`proxy:alice`); None
        when the request is not from a trusted proxy or names nobody."""
        if not self.trusted(peer):
            return None
        user = headers.get(USER, "").strip()
        email = headers.get(EMAIL, "").strip()
        if not user and not email:
            return None
        named = user or email
        if len(user) > MAX_HEADER or len(email) > MAX_HEADER:
            raise ProxyPersonUnknown("the sign-in proxy sent a user name or e-mail too long")
        found = self.directory.resolve("proxy_user", user) if user else None
        if found is None and email:
            found = self.directory.resolve("email", email)
        if found is None:
            raise ProxyPersonUnknown(
                f"the sign-in proxy says you are {named!r}, and no person in runbook-bot's "
                f"settings has that proxy_user or email; ask {self._admins()} to add you to "
                "`people` (with `proxy_user` or `email`)"
            )
        return found, f"proxy:{named}"

    def _admins(self) -> str:
        admins = sorted(p.name for p in self.directory.people if "admin" in p.roles)
        return f"an admin ({', '.join(admins)})" if admins else "whoever runs runbook-bot"

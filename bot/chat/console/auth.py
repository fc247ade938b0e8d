"""Who may log in to the console and with which roles: users with hashed passwords, or
the one admin token (user `admin`, role admin). Failed logins are throttled per user
name and client address, in memory (a replica counts its own)."""

from __future__ import annotations

import hmac
import threading
from datetime import datetime, timedelta

from bot.chat.console import passwords
from bot.chat.decisions import ROLE_ORDER, Clicker
from bot.config import Settings
from bot.errors import BotError

ADMIN = "admin"
FAILURES = 5
"""Failed logins allowed per user and client within WINDOW."""
WINDOW = timedelta(minutes=15)
MAX_TRACKED = 10_000


class LoginThrottled(BotError):
    """Too many failed logins for this user from this client."""


class Auth:
    def __init__(self, settings: Settings) -> None:
        self.console = settings.console
        self._lock = threading.Lock()
        self._failures: dict[tuple[str, str], list[datetime]] = {}

    def user(self, name: str) -> Clicker | None:
        """The console user `name` as the decisions know them; None if there is none (a
        user removed from the settings is logged out)."""
        if name == ADMIN and self.console.secret("admin_token") is not None:
            return Clicker(ADMIN, ADMIN, (ADMIN,))
        found = self.console.users.get(name)
        if found is None:
            return None
        roles = tuple(role for role in ROLE_ORDER if role in found.roles)
        return Clicker(name, found.name or name, roles)

    def password(self, name: str, password: str, client: str, now: datetime) -> Clicker | None:
        """The user, when `password` is theirs. LoginThrottled after too many failures."""
        name = name.strip().lower()
        self._check(name, client, now)
        found = self.console.users.get(name)
        stored = found.password_hash if found is not None else None
        if password and passwords.verify(password, stored):
            self._forget(name, client)
            return self.user(name)
        self._failed(name, client, now)
        return None

    def token(self, token: str, client: str, now: datetime) -> Clicker | None:
        """`admin`, when `token` is the admin token."""
        self._check(ADMIN, client, now)
        expected = self.console.secret("admin_token")
        if (
            expected is not None
            and token
            and hmac.compare_digest(token.encode(), expected.encode())
        ):
            self._forget(ADMIN, client)
            return self.user(ADMIN)
        self._failed(ADMIN, client, now)
        return None

    def _check(self, name: str, client: str, now: datetime) -> None:
        with self._lock:
            recent = [at for at in self._failures.get((name, client), []) if now - at < WINDOW]
        if len(recent) >= FAILURES:
            wait = max(1, int((recent[0] + WINDOW - now).total_seconds() // 60) + 1)
            raise LoginThrottled(
                f"too many failed logins for {name} from your address; wait {wait} min and "
                "try again, or ask an admin to check your password"
            )

    def _failed(self, name: str, client: str, now: datetime) -> None:
        with self._lock:
            if len(self._failures) >= MAX_TRACKED:
                self._failures.clear()  # bounded memory beats a perfect count under a flood
            key = (name, client)
            recent = [at for at in self._failures.get(key, []) if now - at < WINDOW]
            self._failures[key] = [*recent, now]

    def _forget(self, name: str, client: str) -> None:
        with self._lock:
            self._failures.pop((name, client), None)

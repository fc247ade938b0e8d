"""Who may log in to the console and who they are: users with hashed passwords, or the one
admin token (user `admin`, role admin). A login is a person of the people directory (the
one with that console login), with that person's roles. Failed logins are throttled per
user name and client address (`throttle.Throttle`)."""

from __future__ import annotations

import hmac
from datetime import datetime

from bot.chat.console import passwords
from bot.chat.console.throttle import FAILURES, WINDOW, LoginThrottled, Throttle
from bot.chat.decisions import Clicker
from bot.config import Settings
from bot.people import Decider, Directory, Person

ADMIN = "admin"

__all__ = ["ADMIN", "FAILURES", "WINDOW", "Auth", "LoginThrottled"]


class Auth:
    def __init__(self, settings: Settings) -> None:
        self.console = settings.console
        self.directory = Directory(settings)
        self.throttle = Throttle(self.console.login_throttle_size)

    def user(self, name: str) -> Clicker | None:
        """The console user `name` as the decisions know them; None if there is none (a
        user removed from the settings is logged out)."""
        admin = name == ADMIN and self.console.secret("admin_token") is not None
        if not admin and name not in self.console.users:
            return None
        person = self.directory.resolve("console", name)
        return None if person is None else self.signed_in(person, f"console:{name}")

    def signed_in(self, person: Person, via: str) -> Clicker:
        return Decider(person, "console", via)

    def password(self, name: str, password: str, client: str, now: datetime) -> Clicker | None:
        """The user, when `password` is theirs. LoginThrottled after too many failures."""
        name = name.strip().lower()
        self._check(name, client, now)
        found = self.console.users.get(name)
        stored = found.password_hash if found is not None else None
        # scrypt runs for every attempt, an empty password or an unknown user included
        # (against a dummy hash): what a failure costs tells nothing and saves nothing.
        if passwords.verify(password, stored) and password:
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
        self.throttle.check((name, client), now)

    def _failed(self, name: str, client: str, now: datetime) -> None:
        self.throttle.failed((name, client), now)

    def _forget(self, name: str, client: str) -> None:
        self.throttle.forget((name, client))

"""The console under test: users with real password hashes, the real app under uvicorn on
loopback (tests/support/server.py), logins through the real login form, and the engine
rig (tests/runbooks/rig.py) for incidents and their runbooks."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from pathlib import Path
from typing import Any

import httpx

from bot.chat.console.passwords import hash_password
from bot.clock import FrozenClock
from bot.db import Database
from tests.runbooks.rig import Rig
from tests.support import server

PASSWORDS = {
    "alice": "alice-Pw-1",
    "bob": "bob-Pw-2",
    "carol": "carol-Pw-3",
    "mallory": "mallory-Pw-4",
}
ROLES: dict[str, list[str]] = {
    "alice": ["responder"],
    "bob": ["responder"],
    "carol": ["second_line", "admin"],
    "mallory": [],
}
ADMIN_TOKEN = "console-admin-token-0123456789"
CSRF = re.compile(r'data-csrf="([^"]*)"')


@cache
def _hashes() -> dict[str, str]:
    """scrypt is slow on purpose: hash each password once per test session."""
    return {name: hash_password(password) for name, password in PASSWORDS.items()}


def console_settings(**overrides: Any) -> dict[str, Any]:
    users = {
        name: {"password_hash": _hashes()[name], "roles": ROLES[name], "name": name.title()}
        for name in PASSWORDS
    }
    return {"users": users, "admin_token": ADMIN_TOKEN, **overrides}


class ConsoleRig(Rig):
    """The engine rig with console users (and no `roles`: the console's roles count)."""

    def __init__(
        self,
        db: Database,
        clock: FrozenClock,
        tmp: Path,
        console: dict[str, Any] | None = None,
        **overrides: Any,
    ) -> None:
        overrides.setdefault("roles", {})
        super().__init__(db, clock, tmp, console=console_settings(**(console or {})), **overrides)

    @contextmanager
    def serving(self, **app: Any) -> Iterator[str]:
        """The real app on loopback; its base URL."""
        with server.running(
            self.settings, self.db, self.clock, catalog=self.catalog(), **app
        ) as url:
            yield url


def browser(url: str) -> httpx.Client:
    """A client with its own cookie jar; it does not follow redirects (tests look at them)."""
    return httpx.Client(base_url=url, follow_redirects=False, timeout=10)


def login(client: httpx.Client, user: str, password: str | None = None) -> str:
    """Log in through the form; the CSRF token of the new session."""
    data = {"username": user, "password": password or PASSWORDS[user], "next": "/"}
    answer = post_login(client, data)
    assert answer.status_code == 303, answer.text
    return csrf_of(client)


def post_login(client: httpx.Client, data: dict[str, str]) -> httpx.Response:
    """Post the login form as a browser does: first load it (its CSRF cookie and field)."""
    form = client.get("/login")
    assert form.status_code == 200, form.text
    found = CSRF.search(form.text)
    assert found is not None and found.group(1), "no CSRF token on the login form"
    return client.post("/login", data={**data, "csrf": found.group(1)})


def csrf_of(client: httpx.Client) -> str:
    page = client.get("/")
    assert page.status_code == 200, page.text
    found = CSRF.search(page.text)
    assert found is not None and found.group(1), "no CSRF token on the page"
    return found.group(1)


def click(client: httpx.Client, path: str, csrf: str, **form: str) -> httpx.Response:
    """A button as the console's JavaScript sends it: the token as a header, JSON back."""
    return client.post(
        path, data=form, headers={"X-CSRF-Token": csrf, "Accept": "application/json"}
    )

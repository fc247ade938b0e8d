"""Web console settings: who may log in (users with hashed passwords and roles, or one
admin token), the key that signs their sessions, and how long a session lasts.

Pure data at the config layer, so `Settings.console` can hold them; `bot.chat.console`
acts on them. No password is ever written here, only its hash
(`runbook-bot console hash-password`); the admin token and the session key are named by
a file or given as a secret, never logged.
"""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path
from typing import Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    IPvAnyNetwork,
    SecretStr,
    field_validator,
    model_validator,
)

from bot.durations import Duration

ConsoleRole = Literal["responder", "second_line", "admin"]
HASH = re.compile(r"^scrypt\$n=(\d+),r=(\d+),p=(\d+)\$[A-Za-z0-9+/=]{16,}\$[A-Za-z0-9+/=]{32,}$")
"""`scrypt$n=16384,r=8,p=1$SALT$HASH` (base64), what `runbook-bot console hash-password`
prints."""
USERNAME = re.compile(r"^[a-z][a-z0-9._-]{0,63}$")
"""A console user name: the person id the log names (`alice`), as the CLI's `--as`."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ConsoleUser(_Strict):
    """One person who logs in to the console."""

    password_hash: str = Field(description="`runbook-bot console hash-password` prints it.")
    roles: list[ConsoleRole] = []
    """Empty: the person may look but not decide (every button is refused, and logged)."""
    name: str | None = Field(None, max_length=100)
    """How the console shows them (`Alice Chen`); unset: the user name."""

    @field_validator("password_hash")
    @classmethod
    def _hashed(cls, value: str) -> str:
        if not HASH.match(value):
            raise ValueError(
                "not a password hash: write the output of `runbook-bot console hash-password`"
                " (scrypt$n=...,r=...,p=...$SALT$HASH), never the password itself"
            )
        return value


class ConsoleSettings(_Strict):
    """The built-in web console at `/`."""

    enabled: bool = True
    """Serve the console at `/` (it asks for a login before it shows anything)."""
    users: dict[str, ConsoleUser] = {}
    admin_token: SecretStr | None = None
    """One token that logs in as `admin` with the admin role (for a first start, or
    automation); prefer users. Exclusive with `admin_token_file`."""
    admin_token_file: Path | None = None
    session_secret: SecretStr | None = None
    """Signs session cookies and CSRF tokens. Unset: a random key per process, so a
    restart logs everyone out and replicas do not share sessions: set it (or
    `session_secret_file`) when more than one replica serves the console."""
    session_secret_file: Path | None = None
    session_ttl: Duration = timedelta(hours=12)
    """A login lasts this long (a night shift), then the console asks again."""
    login_throttle_size: int = Field(10_000, ge=10, le=1_000_000)
    """How many (user name, client address) pairs with recent failed logins are counted.
    A pair is never forgotten before its 15 min window ends: when this many are counted,
    logins under new pairs are refused until the oldest window ends."""
    secure_cookies: bool = False
    """Mark cookies `Secure` (sent over HTTPS only): set true behind TLS."""
    trusted_proxies: list[IPvAnyNetwork] = []
    """Peer addresses (CIDRs) of a reverse proxy that signs people in, oauth2-proxy style:
    from these only, `X-Forwarded-User` / `X-Forwarded-Email` sign the request in as the
    person with that `proxy_user` / `email`; from anywhere else the headers are ignored."""
    public_url: str | None = Field(None, pattern=r"^https?://[^\s]+$")
    """Where people reach the console (`https://runbook-bot.example.com`): cards and pages
    link to incidents there."""

    @field_validator("users")
    @classmethod
    def _user_names(cls, users: dict[str, ConsoleUser]) -> dict[str, ConsoleUser]:
        for name in users:
            if not USERNAME.match(name):
                raise ValueError(
                    f"user name {name!r}: lower-case letters, digits, '.', '_' or '-', "
                    "starting with a letter"
                )
        return users

    @model_validator(mode="after")
    def _one_source(self) -> ConsoleSettings:
        for name in ("admin_token", "session_secret"):
            given = getattr(self, name), getattr(self, f"{name}_file")
            if given[0] is not None and given[1] is not None:
                raise ValueError(f"set {name} or {name}_file, not both")
            if given[1] is not None and not given[1].is_file():
                raise ValueError(f"{name}_file {given[1]} is not a file")
        if "admin" in self.users and (self.admin_token or self.admin_token_file):
            raise ValueError("the admin token logs in as `admin`: rename the user `admin`")
        token = self.secret("admin_token")
        if token is not None and len(token) < 16:
            raise ValueError("admin_token must be at least 16 characters")
        return self

    def secret(self, name: Literal["admin_token", "session_secret"]) -> str | None:
        """A secret, read from its file when one is set."""
        value: SecretStr | None = getattr(self, name)
        if value is not None:
            return value.get_secret_value()
        path: Path | None = getattr(self, f"{name}_file")
        return path.read_text(encoding="utf-8").strip() if path is not None else None

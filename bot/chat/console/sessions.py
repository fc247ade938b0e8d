"""Signed session cookies and CSRF tokens, signed with itsdangerous.

A session cookie is the user and a random nonce, signed with a timestamp
(`URLSafeTimedSerializer`, salt `runbook-bot.console.session`) under the console's session
secret (a random one per process when none is set); it is refused once `session_ttl` old,
by the injected clock. It is HttpOnly, SameSite=Lax, and Secure with `secure_cookies`. The
CSRF token of a session is the signature of its nonce under its own salt: a form carries
it, and a token of another session does not fit. The flash cookie has a salt of its own
too, so no signed value of one purpose passes for another. Nothing is stored server-side:
logging out clears the cookie.
"""

from __future__ import annotations

import hmac
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from itsdangerous import BadSignature, TimestampSigner, URLSafeSerializer, URLSafeTimedSerializer
from itsdangerous import Signer as ItsSigner
from starlette.responses import Response

COOKIE = "rbb_session"
FLASH = "rbb_flash"
LOGIN = "rbb_login"
"""The login form's CSRF cookie: the form carries the same random value (double submit),
so a form posted from another site, which can neither read nor set it, is refused."""


@dataclass(frozen=True)
class Flash:
    """The answer to a click without JavaScript, shown once on the next page, next to
    the control that was pressed: `at` names its block (`decision`, `incident-actions`)."""

    text: str
    ok: bool = True
    at: str = "decision"


@dataclass(frozen=True)
class Login:
    user: str
    expires: int
    """Unix seconds."""
    nonce: str


SALT = "runbook-bot.console."


class _SignedAt(TimestampSigner):
    """A TimestampSigner on the injected clock: `now` is the instant it signs or checks at."""

    def __init__(self, *args: Any, now: datetime, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.now = now

    def get_timestamp(self) -> int:
        return int(self.now.timestamp())


class Signer:
    def __init__(self, secret: str | None, ttl: timedelta, *, secure: bool) -> None:
        self._key = secret or secrets.token_urlsafe(32)
        self.ttl = ttl
        self.secure = secure
        self._csrf = ItsSigner(self._key, salt=SALT + "csrf")
        self._flash = URLSafeSerializer(self._key, salt=SALT + "flash")

    def _sessions(self, now: datetime) -> URLSafeTimedSerializer:
        return URLSafeTimedSerializer(
            self._key, salt=SALT + "session", signer=_SignedAt, signer_kwargs={"now": now}
        )

    def issue(self, user: str, now: datetime) -> tuple[str, Login]:
        login = Login(user, int((now + self.ttl).timestamp()), secrets.token_urlsafe(16))
        return self._sessions(now).dumps([login.user, login.nonce]), login

    def proxied(self, person: str, now: datetime) -> Login:
        """The login of a person a trusted proxy signed in: no cookie, a nonce derived
        from the key and the person (stable, so their CSRF token is too)."""
        nonce = hmac.new(self._key.encode(), f"proxy\n{person}".encode(), "sha256").hexdigest()
        return Login(person, int((now + self.ttl).timestamp()), nonce[:22])

    def read(self, value: str | None, now: datetime) -> Login | None:
        """The login a cookie holds; None when it is missing, forged or expired."""
        if not value or len(value) > 4096:
            return None
        # Valid for ttl seconds and no longer: itsdangerous refuses an age past max_age.
        ttl = max(0, int(self.ttl.total_seconds()) - 1)
        try:
            data, signed = self._sessions(now).loads(value, max_age=ttl, return_timestamp=True)
        except BadSignature:  # forged, edited, expired or of another purpose
            return None
        if not (
            isinstance(data, list) and len(data) == 2 and all(isinstance(d, str) for d in data)
        ):
            return None
        user, nonce = data
        return Login(user, int((signed + self.ttl).timestamp()), nonce)

    def csrf(self, login: Login) -> str:
        return self._csrf.get_signature(login.nonce).decode()

    def csrf_ok(self, login: Login, token: str | None) -> bool:
        return bool(token) and hmac.compare_digest(str(token), self.csrf(login))

    def set_session(self, response: Response, value: str) -> None:
        response.set_cookie(
            COOKIE,
            value,
            max_age=int(self.ttl.total_seconds()),
            httponly=True,
            samesite="lax",
            secure=self.secure,
            path="/",
        )

    def clear_session(self, response: Response) -> None:
        response.delete_cookie(COOKIE, path="/", httponly=True, samesite="lax", secure=self.secure)

    def login_token(self, request_cookie: str | None) -> str:
        """The login form's CSRF value: the browser's, or a new one."""
        if request_cookie and 16 <= len(request_cookie) <= 64 and request_cookie.isascii():
            return request_cookie
        return secrets.token_urlsafe(24)

    def set_login_token(self, response: Response, value: str) -> None:
        response.set_cookie(
            LOGIN, value, max_age=3600, httponly=True, samesite="strict", secure=self.secure,
            path="/login",
        )  # fmt: skip

    @staticmethod
    def login_token_ok(cookie: str | None, token: str | None) -> bool:
        return bool(cookie) and bool(token) and hmac.compare_digest(str(cookie), str(token))

    def set_flash(self, response: Response, flash: Flash) -> None:
        """The answer to a click without JavaScript, shown once on the next page."""
        value = self._flash.dumps([flash.text[:500], flash.ok, flash.at[:40]])
        response.set_cookie(
            FLASH, value, max_age=60, httponly=True, samesite="lax", secure=self.secure, path="/"
        )

    def read_flash(self, value: str | None) -> Flash | None:
        if not value or len(value) > 4096:
            return None
        try:
            found = self._flash.loads(value)
        except BadSignature:
            return None
        if not (isinstance(found, list) and len(found) == 3):
            return None
        text, ok, at = found
        if not (isinstance(text, str) and isinstance(ok, bool) and isinstance(at, str)):
            return None
        return Flash(text, ok, at)

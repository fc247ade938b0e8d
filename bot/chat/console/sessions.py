"""Signed session cookies and CSRF tokens.

A session cookie is `user:expiry:nonce:signature`, the signature an HMAC-SHA256 over the
rest with the console's session secret (a random one per process when none is set). It
is HttpOnly, SameSite=Lax, and Secure with `secure_cookies`. The CSRF token of a session
is an HMAC of its nonce: a form carries it, and a token of another session does not fit.
Nothing is stored server-side: logging out clears the cookie.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

from starlette.responses import Response

COOKIE = "rbb_session"
FLASH = "rbb_flash"
LOGIN = "rbb_login"
"""The login form's CSRF cookie: the form carries the same random value (double submit),
so a form posted from another site, which can neither read nor set it, is refused."""


@dataclass(frozen=True)
class Login:
    user: str
    expires: int
    """Unix seconds."""
    nonce: str


class Signer:
    def __init__(self, secret: str | None, ttl: timedelta, *, secure: bool) -> None:
        self._key = (secret or secrets.token_urlsafe(32)).encode()
        self.ttl = ttl
        self.secure = secure

    def issue(self, user: str, now: datetime) -> tuple[str, Login]:
        login = Login(user, int((now + self.ttl).timestamp()), secrets.token_urlsafe(16))
        body = f"{login.user}:{login.expires}:{login.nonce}"
        return f"{body}:{self._mac('session', body)}", login

    def read(self, value: str | None, now: datetime) -> Login | None:
        """The login a cookie holds; None when it is missing, forged or expired."""
        if not value or value.count(":") != 3:
            return None
        body, _, mac = value.rpartition(":")
        if not hmac.compare_digest(mac, self._mac("session", body)):
            return None
        user, expires, nonce = body.split(":")
        if not expires.isdigit() or int(expires) <= now.timestamp():
            return None
        return Login(user, int(expires), nonce)

    def csrf(self, login: Login) -> str:
        return self._mac("csrf", login.nonce)

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

    def set_flash(self, response: Response, text: str) -> None:
        """The answer to a click without JavaScript, shown once on the next page."""
        body = base64.urlsafe_b64encode(text[:500].encode()).decode()
        value = f"{body}:{self._mac('flash', body)}"
        response.set_cookie(
            FLASH, value, max_age=60, httponly=True, samesite="lax", secure=self.secure, path="/"
        )

    def read_flash(self, value: str | None) -> str | None:
        if not value or ":" not in value:
            return None
        body, _, mac = value.rpartition(":")
        if not hmac.compare_digest(mac, self._mac("flash", body)):
            return None
        try:
            return base64.urlsafe_b64decode(body.encode()).decode()
        except ValueError:
            return None

    def _mac(self, purpose: str, text: str) -> str:
        digest = hmac.new(self._key, f"{purpose}\n{text}".encode(), hashlib.sha256).digest()
        return base64.urlsafe_b64encode(digest).decode().rstrip("=")

"""Password hashes for console users: scrypt from the standard library, in the format
`ConsoleUser.password_hash` accepts (`scrypt$n=16384,r=8,p=1$SALT$HASH`).

The parameters are Django's (n=2^14, r=8, p=1: 16 MiB and tens of milliseconds a check),
and they travel in the hash, so raising them later keeps old hashes valid.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets

from bot.console_settings import HASH

N, R, P = 2**14, 8, 1
_MAXMEM = 64 * 1024 * 1024
_DUMMY = ""  # set on first use: a hash to check against when the user does not exist


def hash_password(password: str) -> str:
    """A new salted hash of `password`."""
    if not password:
        raise ValueError("the password is empty")
    salt = secrets.token_bytes(16)
    digest = _scrypt(password, salt, N, R, P)
    return f"scrypt$n={N},r={R},p={P}${_b64(salt)}${_b64(digest)}"


def verify(password: str, stored: str | None) -> bool:
    """Whether `password` matches `stored`. With `stored` None (no such user) it spends
    the same time on a dummy hash and answers False, so timing does not tell which user
    names exist."""
    global _DUMMY
    known = stored is not None
    if stored is None:
        _DUMMY = _DUMMY or hash_password(secrets.token_urlsafe(12))
        stored = _DUMMY
    match = HASH.match(stored)
    if match is None:
        return False
    n, r, p = (int(group) for group in match.groups())
    _, _, salt, digest = stored.split("$")
    try:
        got = _scrypt(password, base64.b64decode(salt), n, r, p)
    except ValueError:  # parameters this machine's OpenSSL refuses
        return False
    return hmac.compare_digest(got, base64.b64decode(digest)) and known


def _scrypt(password: str, salt: bytes, n: int, r: int, p: int) -> bytes:
    # One place that hashes: the login tests count its calls (an empty password and an
    # unknown user must cost a hash like a wrong password does; only time would show it).
    return hashlib.scrypt(password.encode(), salt=salt, n=n, r=r, p=p, maxmem=_MAXMEM)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()

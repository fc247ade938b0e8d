"""Logging in to the console: passwords, the admin token, the throttle, the session
cookie's flags and expiry, and pages that ask for a login first."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import httpx
import pytest

from bot.chat.console import auth
from bot.clock import FrozenClock
from bot.db import Database
from tests.console.rig import ADMIN_TOKEN, ConsoleRig, browser, login, post_login

Browsers = Callable[[], httpx.Client]
PAGES = ["/", "/incidents/1", "/incidents/1/card", "/incidents/1/postmortem",
         "/incidents/1/postmortem.md"]  # fmt: skip


@pytest.mark.parametrize("path", PAGES)
def test_every_console_page_redirects_to_the_login_without_a_session(
    browsers: Browsers, path: str
) -> None:
    answer = browsers().get(path)
    assert answer.status_code == 303
    assert answer.headers["location"] == f"/login?next={path}"


def test_the_login_page_has_the_password_and_token_forms(browsers: Browsers) -> None:
    page = browsers().get("/login?next=/incidents/1")
    assert page.status_code == 200
    for part in ('name="username"', 'name="password"', ">Log in</button>", 'name="token"',
                 ">Log in with token</button>", 'value="/incidents/1"'):  # fmt: skip
        assert part in page.text, part


def test_a_right_password_logs_in_and_goes_to_next(browsers: Browsers) -> None:
    client = browsers()
    answer = post_login(
        client, {"username": "alice", "password": "alice-Pw-1", "next": "/incidents/7"}
    )
    assert answer.status_code == 303
    assert answer.headers["location"] == "/incidents/7"
    page = client.get("/")
    assert page.status_code == 200
    assert "Alice (alice)" in page.text and "responder" in page.text and "Log out" in page.text


@pytest.mark.parametrize(
    ("user", "password"), [("alice", "bob-Pw-2"), ("nobody", "alice-Pw-1"), ("alice", "")]
)
def test_a_wrong_password_or_an_unknown_user_gets_the_form_again_with_401(
    browsers: Browsers, user: str, password: str
) -> None:
    client = browsers()
    answer = post_login(client, {"username": user, "password": password, "next": "/"})
    assert answer.status_code == 401
    assert "wrong user name or password" in answer.text
    assert "rbb_session" not in answer.headers.get("set-cookie", "")
    assert client.get("/").status_code == 303  # still logged out


def test_the_admin_token_logs_in_as_admin_with_the_admin_role(browsers: Browsers) -> None:
    client = browsers()
    assert post_login(client, {"token": "not-the-token-at-all"}).status_code == 401
    answer = post_login(client, {"token": ADMIN_TOKEN, "next": "/"})
    assert answer.status_code == 303
    page = client.get("/")
    assert '<span class="who">admin' in page.text and "admin" in page.text


def test_next_is_only_ever_a_local_path(browsers: Browsers) -> None:
    client = browsers()
    for target in ("https://evil.example/", "//evil.example/x", "/\\evil.example"):
        answer = post_login(client, {"username": "bob", "password": "bob-Pw-2", "next": target})
        assert answer.headers["location"] == "/", target


def test_repeated_failures_are_throttled_per_user_and_client(
    browsers: Browsers, rig: ConsoleRig
) -> None:
    client = browsers()
    for _ in range(auth.FAILURES):
        wrong = {"username": "carol", "password": "guess", "next": "/"}
        assert post_login(client, wrong).status_code == 401
    right = {"username": "carol", "password": "carol-Pw-3", "next": "/"}
    throttled = post_login(client, right)
    assert throttled.status_code == 429
    assert "too many failed logins for carol" in throttled.text
    assert post_login(client, {"username": "bob", "password": "bob-Pw-2"}).status_code == 303
    rig.clock.advance(auth.WINDOW)
    assert post_login(client, right).status_code == 303


def test_the_session_cookie_is_httponly_and_samesite_lax(browsers: Browsers) -> None:
    answer = post_login(browsers(), {"username": "alice", "password": "alice-Pw-1"})
    cookie = next(c for c in answer.headers.get_list("set-cookie") if "rbb_session" in c).lower()
    assert cookie.startswith("rbb_session=")
    assert "httponly" in cookie and "samesite=lax" in cookie and "path=/" in cookie
    assert "secure" not in cookie
    assert "alice-pw-1" not in cookie


def test_a_login_form_without_its_csrf_token_is_refused(browsers: Browsers) -> None:
    """Login CSRF: another site cannot log a victim's browser in as the attacker."""
    client = browsers()
    right = {"username": "alice", "password": "alice-Pw-1", "next": "/"}
    bare = client.post("/login", data=right)  # never loaded the form: no cookie, no field
    assert bare.status_code == 403 and "CSRF" in bare.text
    assert "rbb_session" not in bare.headers.get("set-cookie", "")

    other = browsers()
    post_login(other, {"username": "bob", "password": "wrong"})  # bob's form token
    client.get("/login")  # the victim's own form cookie, which the forged field does not fit
    forged = client.post("/login", data={**right, "csrf": other.cookies["rbb_login"]})
    assert forged.status_code == 403, "a token of another browser's form was accepted"
    assert client.get("/").status_code == 303  # still not logged in
    assert post_login(client, right).status_code == 303


def test_secure_cookies_marks_the_session_cookie_secure(
    db: Database, clock: FrozenClock, tmp_path: Path
) -> None:
    rig = ConsoleRig(db, clock, tmp_path, console={"secure_cookies": True})
    with rig.serving() as url, browser(url) as client:
        answer = post_login(client, {"username": "alice", "password": "alice-Pw-1"})
        assert "secure" in answer.headers["set-cookie"].lower()


def test_a_session_ends_after_its_ttl(browsers: Browsers, rig: ConsoleRig) -> None:
    client = browsers()
    login(client, "alice")
    rig.clock.advance(rig.settings.console.session_ttl - timedelta(seconds=1))
    assert client.get("/").status_code == 200
    rig.clock.advance(timedelta(seconds=1))
    answer = client.get("/")
    assert answer.status_code == 303 and answer.headers["location"].startswith("/login")


def test_a_forged_or_edited_cookie_is_no_session(browsers: Browsers) -> None:
    client = browsers()
    login(client, "mallory")
    value = client.cookies["rbb_session"]
    payload, stamp, signature = value.split(".")
    decoded = base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4))
    edited = base64.urlsafe_b64encode(decoded.replace(b"mallory", b"carol")).rstrip(b"=")
    assert json.loads(decoded)[0] == "mallory"
    for forged in (
        f"{edited.decode()}.{stamp}.{signature}",  # another user, the same signature
        f"{payload}.{stamp}.{signature[:-2]}xx",  # the signature edited
        f"{payload}.{stamp}",  # no signature
        value.replace(".", ":"),  # the old format
    ):
        client.cookies.clear()
        client.cookies.set("rbb_session", forged)
        assert client.get("/").status_code == 303, forged
    client.cookies.set("rbb_session", value)
    assert client.get("/").status_code == 200


def test_logout_ends_the_session_and_needs_the_csrf_token(browsers: Browsers) -> None:
    client = browsers()
    csrf = login(client, "bob")
    assert client.post("/logout", data={"csrf": "wrong"}).status_code == 403
    assert client.get("/").status_code == 200
    answer = client.post("/logout", data={"csrf": csrf})
    assert answer.status_code == 303 and answer.headers["location"] == "/login"
    assert client.get("/").status_code == 303


def test_a_session_signed_by_another_process_is_not_accepted(
    db: Database, clock: FrozenClock, tmp_path: Path, url: str
) -> None:
    """Without a configured session secret each process signs with its own random key."""
    (tmp_path / "other").mkdir()
    other = ConsoleRig(db, clock, tmp_path / "other")
    with browser(url) as first, other.serving() as other_url, browser(other_url) as second:
        login(first, "alice")
        second.cookies.set("rbb_session", first.cookies["rbb_session"])
        assert second.get("/").status_code == 303

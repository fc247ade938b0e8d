"""The login throttle under a flood of invented user names, and what a failure costs.

Real posts of the real login form to the console under uvicorn on loopback. The throttle
is set to count 40 (user, client) pairs, so 60 invented names overflow it; the default is
10,000 and the code path is the same. Before, a full table was cleared, and the user
being guessed got fresh tries; an empty password skipped scrypt, so it cost nothing.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from bot.chat.console import auth, passwords
from bot.clock import FrozenClock
from bot.db import Database
from tests.console.rig import ConsoleRig, browser, post_login

SIZE = 40
WRONG = {"username": "carol", "password": "guess", "next": "/"}
RIGHT = {"username": "carol", "password": "carol-Pw-3", "next": "/"}


@pytest.fixture
def small(db: Database, clock: FrozenClock, tmp_path: Path) -> ConsoleRig:
    return ConsoleRig(db, clock, tmp_path, console={"login_throttle_size": SIZE})


@pytest.fixture
def client(small: ConsoleRig) -> Iterator[httpx.Client]:
    with small.serving() as url, browser(url) as http:
        yield http


def _flood(client: httpx.Client, count: int) -> list[int]:
    statuses = []
    for i in range(count):
        invented = {"username": f"invented-{i}", "password": "", "next": "/"}
        statuses.append(post_login(client, invented).status_code)
    return statuses


def test_a_flood_of_invented_names_never_gives_the_guessed_user_fresh_tries(
    client: httpx.Client, small: ConsoleRig
) -> None:
    for _ in range(auth.FAILURES - 1):
        assert post_login(client, WRONG).status_code == 401

    statuses = _flood(client, SIZE + 20)

    # The table filled (carol's pair and 39 invented ones); past it new names are refused.
    assert statuses[: SIZE - 1] == [401] * (SIZE - 1)
    assert set(statuses[SIZE - 1 :]) == {429}
    refused = post_login(client, {"username": "invented-x", "password": "x", "next": "/"})
    assert "takes no new ones" in refused.text
    assert post_login(client, WRONG).status_code == 401  # carol's fifth failure, still counted
    throttled = post_login(client, RIGHT)
    assert throttled.status_code == 429, "the flood gave carol's guesser fresh tries"
    assert "too many failed logins for carol" in throttled.text

    small.clock.advance(auth.WINDOW)  # every window ends: the real user gets in
    assert post_login(client, RIGHT).status_code == 303


def test_an_empty_password_and_an_unknown_user_cost_a_hash_like_a_wrong_password(
    client: httpx.Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    # No answer shows whether scrypt ran (only time would, and tests do not time): count
    # the calls of the one function that hashes.
    passwords.verify("warm", None)  # the dummy hash of unknown users, made once
    calls: list[int] = []
    real = passwords._scrypt

    def counting(password: str, salt: bytes, n: int, r: int, p: int) -> bytes:
        calls.append(n)
        return real(password, salt, n, r, p)

    monkeypatch.setattr(passwords, "_scrypt", counting)
    tries = [
        {"username": "alice", "password": "wrong", "next": "/"},
        {"username": "alice", "password": "", "next": "/"},
        {"username": "nobody", "password": "", "next": "/"},
        {"username": "nobody", "password": "wrong", "next": "/"},
        {"username": "", "password": "", "next": "/"},
    ]
    for fields in tries:
        before = len(calls)
        answer = post_login(client, fields)
        assert answer.status_code == 401, answer.text
        assert "wrong user name or password" in answer.text
        assert len(calls) == before + 1, f"{fields} skipped the hash"
    assert set(calls) == {passwords.N}

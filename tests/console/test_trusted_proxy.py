"""Console sign-in by a trusted reverse proxy (issue 19, the paragraph after items 1 and 2):
from `console.trusted_proxies` only, `X-Forwarded-User` / `X-Forwarded-Email` sign the
request in as the person with that `proxy_user` / `email`; from any other peer they are
ignored. The real app under uvicorn on 127.0.0.1; the "proxy" is a client whose socket is
bound to 127.0.0.2, the one trusted address."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from bot.clock import FrozenClock
from bot.db import Database
from tests.console.rig import CSRF, ConsoleRig, click

PROXY = "127.0.0.2"
MANUAL = """\
    id: gpu-xid
    title: Single GPU fault
    version: 1
    match: {alerts: [GPUXIDError]}
    steps:
      - {id: call, title: Call the vendor, manual: call them}
"""
DANA = {"x-forwarded-user": "dana", "x-forwarded-email": "dana@example.com"}


@pytest.fixture
def rig(db: Database, clock: FrozenClock, tmp_path: Path) -> ConsoleRig:
    rig = ConsoleRig(
        db,
        clock,
        tmp_path,
        console={"trusted_proxies": [f"{PROXY}/32"]},
        people={
            "dana": {
                "name": "Dana Wu",
                "roles": ["responder"],
                "proxy_user": "dana",
                "email": "Dana@Example.com",
            },
            "erin": {"name": "Erin", "roles": ["responder"], "email": "erin@example.com"},
        },
    )
    rig.write(MANUAL)
    return rig


@pytest.fixture
def url(rig: ConsoleRig) -> Iterator[str]:
    with rig.serving() as base:
        yield base


def _from(address: str, url: str, headers: dict[str, str]) -> httpx.Client:
    transport = httpx.HTTPTransport(local_address=address)
    return httpx.Client(base_url=url, transport=transport, headers=headers, timeout=10)


def test_a_trusted_proxy_signs_in_the_person_it_names_and_their_decision_says_so(
    rig: ConsoleRig, url: str
) -> None:
    number = rig.fire()
    run = rig.runs(number)["call"].id

    with _from(PROXY, url, DANA) as proxy:
        page = proxy.get("/")
        found = CSRF.search(page.text)
        assert found is not None
        skipped = click(proxy, f"/incidents/{number}/steps/{run}/skip", found.group(1))
    with _from(PROXY, url, {"x-forwarded-email": "ERIN@example.com"}) as by_email:
        erin = by_email.get("/")

    assert page.status_code == 200 and "Dana Wu" in page.text
    assert skipped.status_code == 200, skipped.text
    assert rig.states(number)["call"] == "skipped"
    entry = [e for e in rig.log(number) if e.type == "step.skipped"][-1]
    assert entry.actor_id == "dana"
    assert entry.data["by"] == {"person": "dana", "channel": "console", "via": "proxy:dana"}
    assert erin.status_code == 200 and "Erin" in erin.text


def test_the_headers_from_any_other_peer_are_ignored(rig: ConsoleRig, url: str) -> None:
    number = rig.fire()
    spoofed = {**DANA, "x-forwarded-for": PROXY}

    with _from("127.0.0.1", url, spoofed) as direct:
        page = direct.get("/", follow_redirects=False)
        clicked = direct.post(f"/incidents/{number}/ack", data={"csrf": "x"})

    assert page.status_code == 303 and page.headers["location"].startswith("/login")
    assert clicked.status_code == 401
    assert "incident.acknowledged" not in rig.types(number)


def test_a_proxy_naming_nobody_known_gets_a_403_page_saying_who_to_ask(
    rig: ConsoleRig, url: str
) -> None:
    with _from(PROXY, url, {"x-forwarded-user": "mallory@corp"}) as proxy:
        page = proxy.get("/")
        button = proxy.post("/incidents/1/ack", data={"csrf": "x"})

    assert page.status_code == 403
    assert "the sign-in proxy says you are &#39;mallory@corp&#39;" in page.text
    assert "ask an admin (Carol, admin) to add you to" in page.text
    assert button.status_code == 403

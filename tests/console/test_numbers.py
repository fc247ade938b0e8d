"""Numbers in console paths that are no id of ours: past the integer column (a 500 on
PostgreSQL, an OverflowError on SQLite before) or a Unicode digit (`²`). Every path that
carries an incident, a step run or a follow-up answers 400 saying what it must be."""

from __future__ import annotations

from collections.abc import Callable
from urllib.parse import quote

import httpx
import pytest

from tests.console.rig import click, login

HUGE = "99999999999999999999"
BAD = [HUGE, "²"]
RANGE = "must be a number from 1 to 2147483647"
PAGES = [
    "/incidents/{n}",
    "/incidents/{n}/card",
    "/incidents/{n}/events",
    "/incidents/{n}/postmortem",
    "/incidents/{n}/postmortem.md",
]
BUTTONS = [
    "/incidents/{n}/steps/{r}/approve",
    "/incidents/{n}/steps/{r}/skip",
    "/incidents/{n}/steps/{r}/done",
    "/incidents/{n}/ack",
    "/incidents/{n}/own",
    "/incidents/{n}/resolve",
    "/incidents/{n}/followups",
    "/incidents/{n}/followups/{f}/done",
]


@pytest.mark.parametrize("value", BAD, ids=["huge", "superscript"])
@pytest.mark.parametrize("page", PAGES)
def test_a_page_whose_incident_number_is_no_id_is_a_400(
    browsers: Callable[[], httpx.Client], page: str, value: str
) -> None:
    client = browsers()
    login(client, "alice")

    answer = client.get(page.format(n=quote(value)))

    assert answer.status_code == 400, answer.text
    assert "the incident number" in answer.text and RANGE in answer.text


@pytest.mark.parametrize("value", BAD, ids=["huge", "superscript"])
@pytest.mark.parametrize(
    ("button", "where"), [(b, w) for b in BUTTONS for w in "nrf" if "{" + w + "}" in b]
)
def test_a_button_whose_path_carries_no_id_is_a_400(
    browsers: Callable[[], httpx.Client], button: str, where: str, value: str
) -> None:
    client = browsers()
    csrf = login(client, "alice")
    ids = {"n": "1", "r": "1", "f": "1", where: quote(value)}

    answer = click(client, button.format(**ids), csrf, title="x", note="x")

    assert answer.status_code == 400, answer.text
    named = {"n": "the incident number", "r": "the step run", "f": "the follow-up"}[where]
    assert named in answer.text and RANGE in answer.text


@pytest.mark.parametrize("value", [*BAD, "-1", "1e3"], ids=["huge", "superscript", "neg", "exp"])
def test_an_event_streams_last_event_id_that_is_no_number_is_a_400(
    browsers: Callable[[], httpx.Client], value: str
) -> None:
    client = browsers()
    login(client, "alice")

    answer = client.get("/incidents/1/events", headers={"Last-Event-ID": value.encode()})

    assert answer.status_code == 400, answer.text
    assert "Last-Event-ID" in answer.text and "must be a number from 0" in answer.text

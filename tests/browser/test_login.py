"""Nobody sees the console without logging in, and a wrong password says so."""

from __future__ import annotations

import re
from urllib.parse import parse_qs, urlsplit

from playwright.sync_api import Page, Playwright, expect

from tests.browser.conftest import NewPage
from tests.browser.console import (
    card,
    first_incident,
    form_action,
    log_in,
    open_incident,
    submit_login,
)
from tests.browser.demo import Demo


def expect_login_page_for(page: Page, demo: Demo, path: str) -> None:
    """The page is the login page, and logging in will lead back to `path`."""
    expect(page).to_have_url(re.compile(re.escape(demo.at("/login")) + r"\?"))
    assert parse_qs(urlsplit(page.url).query).get("next") == [path], page.url


def test_a_console_page_redirects_to_the_login_page_and_back_after_logging_in(
    demo: Demo, new_page: NewPage
) -> None:
    page = new_page(demo)
    wanted = "/?status=all"

    answer = page.goto(demo.at(wanted))

    assert answer is not None and answer.status == 200
    redirect = answer.request.redirected_from
    assert redirect is not None, f"{wanted} was not redirected"
    first = redirect.response()
    assert first is not None and first.status == 303
    expect_login_page_for(page, demo, wanted)

    submit_login(page, "oncall", demo.passwords["oncall"])

    expect(page).to_have_url(demo.at(wanted))
    header = page.locator("header")
    expect(header).to_contain_text("oncall")
    expect(header).to_contain_text("responder")
    expect(page.locator("table#incidents")).to_be_visible()
    expect(page.locator("form#filters select[name=status]")).to_have_value("all")

    with page.expect_response(lambda r: r.request.method == "POST") as logout:
        page.get_by_role("button", name="Log out").click()
    assert logout.value.status in (200, 303), logout.value.status
    page.goto(demo.url)
    expect_login_page_for(page, demo, "/")


def test_a_wrong_password_shows_the_error_and_lets_nobody_in(demo: Demo, new_page: NewPage) -> None:
    page = new_page(demo)
    page.goto(demo.at("/login"))

    with page.expect_response(lambda r: r.request.method == "POST") as answer:
        submit_login(page, "oncall", demo.passwords["oncall"] + "-wrong")

    assert answer.value.status == 401
    expect(page.get_by_text("wrong user name or password")).to_be_visible()
    page.goto(demo.url)
    expect_login_page_for(page, demo, "/")


def test_a_decision_posted_without_a_login_answers_401(
    demo: Demo, new_page: NewPage, playwright: Playwright
) -> None:
    page = new_page(demo)
    log_in(page, demo, "oncall")
    number = first_incident(page)
    open_incident(page, demo, number)
    action = form_action(page, "ack")
    anonymous = playwright.request.new_context(timeout=30_000)
    try:
        answer = anonymous.post(action, form={"csrf": "none"}, max_redirects=0)
        assert answer.status == 401, answer.text()
    finally:
        anonymous.dispose()
    page.reload()
    expect(card(page)).to_have_attribute("data-status", "open")

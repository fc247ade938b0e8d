"""A logged-in browser cannot be made to decide without the page's CSRF token."""

from __future__ import annotations

from playwright.sync_api import expect

from tests.browser.conftest import NewPage
from tests.browser.console import (
    CSRF_REFUSAL,
    card,
    first_incident,
    flash,
    form_action,
    log_in,
    open_incident,
    tamper_csrf,
)
from tests.browser.demo import Demo


def test_a_post_with_the_session_cookie_but_no_token_answers_403(
    demo: Demo, new_page: NewPage
) -> None:
    page = new_page(demo)
    log_in(page, demo, "oncall")
    number = first_incident(page)
    open_incident(page, demo, number)
    action = form_action(page, "ack")

    without = page.request.post(action, max_redirects=0)  # the context's cookies go along
    wrong = page.request.post(
        action,
        form={"csrf": "not-the-token"},
        headers={"X-CSRF-Token": "not-the-token"},
        max_redirects=0,
    )

    for answer in (without, wrong):
        assert answer.status == 403, answer.text()
        assert CSRF_REFUSAL in answer.text()
    page.reload()
    expect(card(page)).to_have_attribute("data-status", "open")


def test_a_tampered_token_in_the_page_is_refused_with_the_message(
    demo: Demo, new_page: NewPage
) -> None:
    page = new_page(demo)
    log_in(page, demo, "oncall")
    number = first_incident(page)
    open_incident(page, demo, number)
    assert tamper_csrf(page) > 0, 'the incident page has no <input name="csrf">'

    page.locator('button[data-action="ack"]').click()

    expect(flash(page)).to_contain_text(CSRF_REFUSAL)
    page.reload()
    expect(card(page)).to_have_attribute("data-status", "open")


def test_a_tampered_form_posted_without_javascript_is_refused_with_the_message(
    demo: Demo, new_page: NewPage
) -> None:
    watcher = new_page(demo)  # the list shows new incidents live only with JavaScript
    log_in(watcher, demo, "viewer")
    number = first_incident(watcher)
    page = new_page(demo, javascript=False)
    log_in(page, demo, "oncall")
    open_incident(page, demo, number)
    assert tamper_csrf(page) > 0, 'the incident page has no <input name="csrf">'

    with page.expect_response(lambda r: r.request.method == "POST") as answer:
        page.locator('button[data-action="ack"]').click()

    assert answer.value.status == 403
    expect(page.get_by_text(CSRF_REFUSAL)).to_be_visible()
    page.goto(demo.at(f"/incidents/{number}"))
    expect(card(page)).to_have_attribute("data-status", "open")

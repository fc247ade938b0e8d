"""A console user without a role may look at an incident but not decide on it: the page
offers them no decision (no Approve, Skip, Acknowledge, Take ownership or Resolve), says
they may look and whom to ask, and a decision posted anyway with their own session and
token is refused by the server and logged."""

from __future__ import annotations

from playwright.sync_api import expect

from tests.browser.conftest import NewPage
from tests.browser.console import (
    ROLE_REFUSAL,
    card,
    first_incident,
    log_in,
    open_incident,
    timeline,
)
from tests.browser.demo import Demo

DECISIONS = ("approve", "skip", "done", "ack", "own", "resolve", "stop", "repropose")


def test_a_viewer_sees_no_decision_and_one_posted_anyway_is_refused_and_logged(
    demo: Demo, new_page: NewPage
) -> None:
    page = new_page(demo, phone=True)
    log_in(page, demo, "viewer")
    number = first_incident(page)
    open_incident(page, demo, number)
    expect(card(page)).to_have_attribute("data-status", "open")
    expect(page.locator("#card button[data-action]")).to_have_count(0)
    for action in DECISIONS:  # nor anywhere else on the page
        expect(page.locator(f'button[data-action="{action}"]')).to_have_count(0)
    note = page.locator("#viewer-note")
    expect(note).to_be_visible()
    expect(note).to_contain_text("Ask oncall (on call) to decide")  # whom to ask
    refusals = timeline(page).filter(has_text="chat.refused")
    before = refusals.count()

    csrf = page.locator("body").get_attribute("data-csrf") or ""
    assert csrf, "the viewer's page carries no CSRF token to post with"
    answer = page.request.post(
        demo.at(f"/incidents/{number}/ack"),
        form={"csrf": csrf},
        headers={"Accept": "application/json", "X-CSRF-Token": csrf},
    )

    assert answer.status == 403, answer.text()
    assert ROLE_REFUSAL.search(answer.json()["flash"]), answer.text()
    expect(refusals).to_have_count(before + 1)  # live, from the incident's event stream
    expect(refusals.last).to_contain_text("viewer", ignore_case=True)
    page.reload()
    expect(card(page)).to_have_attribute("data-status", "open")
    expect(refusals).to_have_count(before + 1)

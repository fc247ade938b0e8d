"""A console user without a role may look at an incident but not decide on it."""

from __future__ import annotations

from playwright.sync_api import expect

from tests.browser.conftest import NewPage
from tests.browser.console import (
    ROLE_REFUSAL,
    card,
    first_incident,
    flash,
    log_in,
    open_incident,
    timeline,
)
from tests.browser.demo import Demo


def test_a_viewer_clicking_acknowledge_is_refused_and_the_log_says_so(
    demo: Demo, new_page: NewPage
) -> None:
    page = new_page(demo)
    log_in(page, demo, "viewer")
    number = first_incident(page)
    open_incident(page, demo, number)
    expect(card(page)).to_have_attribute("data-status", "open")
    refusals = timeline(page).filter(has_text="chat.refused")
    before = refusals.count()

    page.locator('button[data-action="ack"]').click()

    expect(flash(page)).to_contain_text(ROLE_REFUSAL)
    expect(refusals).to_have_count(before + 1)  # live, from the incident's event stream
    expect(refusals.last).to_contain_text("viewer", ignore_case=True)
    page.reload()
    expect(card(page)).to_have_attribute("data-status", "open")
    expect(refusals).to_have_count(before + 1)

"""Feedback where the finger is (issue 21, item 5): resolving a critical incident with a
blank disposition is refused next to the Resolve form, on the screen, in the console's own
words (never the CLI's `--note "..."`), with JavaScript and without it (the form posts and
the page comes back at the block that was pressed). The shared demo's XID incident stays
open."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import NewPage
from tests.browser.console import card, first_incident, log_in, open_incident
from tests.browser.demo import Demo
from tests.browser.measure import press


@pytest.mark.parametrize("javascript", [True, False], ids=["js", "no-js"])
def test_a_blank_disposition_is_refused_in_view_in_the_consoles_words(
    demo: Demo, new_page: NewPage, javascript: bool
) -> None:
    watcher = new_page(demo)  # the list shows new incidents live only with JavaScript
    log_in(watcher, demo, "viewer")
    number = first_incident(watcher)
    page = new_page(demo, phone=True, javascript=javascript)
    log_in(page, demo, "oncall")
    open_incident(page, demo, number)
    expect(page.locator("#status-line")).to_contain_text("critical")
    if javascript:
        page.locator('button[data-action="resolve"]').click()
    form = page.locator("form#resolve")
    expect(form).to_be_visible()
    # Blank to the server; spaces get past the browser's `required`.
    form.locator("textarea[name=disposition]").fill("   ")

    refused = press(page, form.locator('button[data-action="resolve-submit"]'))

    assert f"INC-{number} is critical" in refused, refused
    assert "disposition" in refused
    assert "--note" not in refused and "--" not in refused
    expect(card(page)).to_have_attribute("data-status", "open")

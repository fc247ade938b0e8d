"""Feedback where the finger is (issue 21, item 5): resolving a critical incident with a
blank disposition is refused next to the Resolve form, on the screen, in the console's own
words (never the CLI's `--note "..."`), readable (AA contrast) in each viewing combination,
with JavaScript and without it (the form posts and the page comes back at the block that
was pressed). The shared demo's XID incident stays open."""

from __future__ import annotations

import pytest
from playwright.sync_api import Browser, expect

from tests.browser.console import card, first_incident, log_in, open_incident
from tests.browser.demo import Demo
from tests.browser.measure import press
from tests.browser.viewing import COMBOS, SCREENS, Screen, Theme

CASES = [(screen, theme, True) for screen, theme in COMBOS] + [("phone", "dark", False)]


@pytest.mark.parametrize(
    ("screen", "theme", "javascript"),
    CASES,
    ids=[f"{s}-{t}-{'js' if js else 'no-js'}" for s, t, js in CASES],
)
def test_a_blank_disposition_is_refused_in_view_in_the_consoles_words(
    demo: Demo, browser: Browser, screen: Screen, theme: Theme, javascript: bool
) -> None:
    number = _the_incident(browser, demo)
    context = browser.new_context(
        **SCREENS[screen], color_scheme=theme, java_script_enabled=javascript, locale="en-US"
    )
    try:
        page = context.new_page()
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
        assert "--" not in refused  # no CLI syntax
        expect(card(page)).to_have_attribute("data-status", "open")
    finally:
        context.close()


def _the_incident(browser: Browser, demo: Demo) -> int:
    """The shared demo's incident, waited for in a page with JavaScript (the list shows new
    incidents live only with it)."""
    context = browser.new_context()
    try:
        page = context.new_page()
        log_in(page, demo, "viewer")
        return first_incident(page)
    finally:
        context.close()

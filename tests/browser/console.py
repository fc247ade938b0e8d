"""What a person does in the web console, as Playwright steps, and the screenshots they see.

The selectors are the console UI contract's (docs of issue 9): `tr[data-incident]`,
`section#card`, `li[data-step][data-state]` (in whichever block of the card holds the step),
`button[data-action=...]`, `#flash`, `ol#timeline`; and issue 21's hooks: `#status-line`,
`#decision` (the step waiting for a decision, with its buttons), `#running`, `#folded` (a
<details>), `.feedback` (the message after a click, next to the control pressed; an empty
slot keeps the class `empty`), `[data-waiting]` on list rows, `#paged`. After each click
the feedback must be in view where the finger is (`viewing.in_view`). Waits are
Playwright's auto-waiting `expect` with the package's 30 s timeout (conftest); nothing
here sleeps.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

from playwright.sync_api import Locator, Page, expect

from tests.browser.demo import Demo
from tests.browser.measure import press

ARTIFACTS = Path(__file__).parent / "artifacts"
README_IMAGE = Path(__file__).parents[2] / "docs" / "images" / "console-incident.png"
CSRF_REFUSAL = "CSRF token missing or wrong; reload the page and try again"
ROLE_REFUSAL = re.compile(r"you need the responder role to \w[\w ]* incidents; ask an admin")
"""The contract's words are "to decide on incidents"; the console names the decision."""
PHONE_WIDTH = 390


def log_in(page: Page, demo: Demo, user: str) -> None:
    """Log in through the form with the demo's password and land on the incident list."""
    page.goto(demo.at("/login"))
    submit_login(page, user, demo.passwords[user])
    expect(page).to_have_url(demo.url)


def submit_login(page: Page, user: str, password: str) -> None:
    """Fill and send the user name and password form of the page at hand."""
    page.locator("input[name=username]").fill(user)
    page.locator("input[name=password]").fill(password)
    page.get_by_role("button", name="Log in", exact=True).click()


def incident_rows(page: Page) -> Locator:
    return page.locator("table#incidents tr[data-incident]")


def first_incident(page: Page) -> int:
    """The number of the first incident in the list, waiting for one to appear."""
    row = incident_rows(page).first
    expect(row).to_be_visible()
    return int(row.get_attribute("data-incident") or "")


def open_incident(page: Page, demo: Demo, number: int) -> None:
    """Follow the list's INC-N link to the incident page."""
    page.locator(f'tr[data-incident="{number}"]').get_by_role("link", name=f"INC-{number}").click()
    expect(page).to_have_url(demo.at(f"/incidents/{number}"))
    expect(card(page)).to_be_visible()


def card(page: Page) -> Locator:
    return page.locator("section#card")


def step(page: Page, step_id: str) -> Locator:
    """The step's item, in whichever block of the card shows it (decision, running, the
    steps so far, the folded ones)."""
    return page.locator(f'section#card li[data-step="{step_id}"]')


def steps_not_in(page: Page, states: tuple[str, ...]) -> Locator:
    """The runbook's steps whose state is none of `states`."""
    unless = "".join(f':not([data-state="{state}"])' for state in states)
    return page.locator(f"section#card li[data-step]{unless}")


def decision(page: Page) -> Locator:
    """The block of the one step waiting for a decision."""
    return page.locator("#decision")


def flash(page: Page) -> Locator:
    return page.locator("#flash")


def list_row(page: Page, number: int) -> Locator:
    return page.locator(f'table#incidents tr[data-incident="{number}"]')


def timeline(page: Page) -> Locator:
    return page.locator("ol#timeline > li[data-seq]")


def approve(page: Page, step_id: str, *, targets: str) -> None:
    """Click the step's Approve (one person is enough); it stops waiting."""
    item = click_approve(page, step_id, targets=targets)
    expect(item).not_to_have_attribute("data-state", "awaiting_approval")


def click_approve(page: Page, step_id: str, *, targets: str) -> Locator:
    """Click the waiting step's Approve; a disruptive step asks first, naming its targets.
    The step's item, which may still wait for a second person."""
    item = step(page, step_id)
    expect(item).to_have_attribute("data-state", "awaiting_approval")
    disruptive = "disruptive" in item.inner_text()
    button = item.locator('button[data-action="approve"]')
    if disruptive:
        button.click()
        dialog = page.locator("dialog#confirm")
        expect(dialog).to_be_visible()
        expect(dialog).to_contain_text(targets)
        press(page, dialog.locator('button[data-action="confirm"]'))
        expect(dialog).to_be_hidden()
    else:
        press(page, button)
    return item


def mark_done(page: Page, step_id: str, note: str) -> None:
    """A manual step: Done…, say what was done, Mark done."""
    item = step(page, step_id)
    expect(item).to_have_attribute("data-state", "awaiting_approval")
    item.locator('button[data-action="done"]').click()
    form = item.locator('form:has(button[data-action="done-submit"])')
    form.locator("textarea[name=note]").fill(note)
    press(page, form.locator('button[data-action="done-submit"]'))
    expect(item).to_have_attribute("data-state", "succeeded")


def skip(page: Page, step_id: str, reason: str = "", *, dependents: tuple[str, ...] = ()) -> None:
    """Skip the waiting step. One that later steps depend on opens a form listing them
    (`dependents`, their titles) and asking why: a blank reason is refused where the person
    is looking, then `reason` is given."""
    item = step(page, step_id)
    expect(item).to_have_attribute("data-state", "awaiting_approval")
    button = item.locator('button[data-action="skip"]')
    if not dependents:
        press(page, button)
    else:
        button.click()
        form = item.locator("form.skip-form")
        expect(form).to_be_visible()
        for title in dependents:
            expect(form.locator(".dependents")).to_contain_text(title)
        # Blank to the server: the browser's `required` lets spaces through.
        form.locator("textarea[name=note]").fill("   ")
        refused = press(page, form.locator('button[data-action="skip-submit"]'))
        assert "why" in refused.lower(), f"a blank reason to skip got {refused!r}"
        expect(item).to_have_attribute("data-state", "awaiting_approval")
        form = step(page, step_id).locator("form.skip-form")
        if not form.is_visible():
            step(page, step_id).locator('button[data-action="skip"]').click()
        form.locator("textarea[name=note]").fill(reason)
        press(page, form.locator('button[data-action="skip-submit"]'))
    expect(item).to_have_attribute("data-state", "skipped")


def propose_again(page: Page, step_id: str) -> None:
    """Propose a skipped (failed, expired) step again: it asks for a decision anew."""
    item = step(page, step_id)
    expect(item).to_have_attribute("data-state", "skipped")
    if page.locator(f'#folded li[data-step="{step_id}"]').count():
        page.locator("#folded > summary").click()  # the folded line opens on demand
    press(page, item.locator('button[data-action="repropose"]'))
    expect(step(page, step_id)).to_have_attribute("data-state", "awaiting_approval")


def page_second_line(page: Page) -> str:
    """The first approver of a two-person step pages the second line now; the feedback."""
    button = decision(page).locator('button[data-action="page-second"]')
    expect(button).to_be_visible()
    return press(page, button)


def resolve(page: Page, disposition: str) -> None:
    """Resolve the incident on the page with `disposition`; the flash says so."""
    page.locator('button[data-action="resolve"]').click()
    form = page.locator("form#resolve")
    expect(form).to_be_visible()
    form.locator("textarea[name=disposition]").fill(disposition)
    assert "resolved" in press(page, form.locator('button[data-action="resolve-submit"]'))
    expect(flash(page)).to_contain_text("resolved")
    expect(card(page)).to_have_attribute("data-status", "resolved")


def approve_then_cancel(page: Page, step_id: str, *, targets: str) -> None:
    """Click a disruptive step's Approve, check the dialog names the targets, cancel."""
    item = step(page, step_id)
    expect(item).to_have_attribute("data-state", "awaiting_approval")
    expect(item).to_contain_text("disruptive")
    posts: list[str] = []
    page.on("request", lambda r: posts.append(r.url) if r.method == "POST" else None)
    item.locator('button[data-action="approve"]').click()
    dialog = page.locator("dialog#confirm")
    expect(dialog).to_be_visible()
    expect(dialog).to_contain_text(targets)
    dialog.locator('button[data-action="cancel"]').click()
    expect(dialog).to_be_hidden()
    expect(item).to_have_attribute("data-state", "awaiting_approval")
    expect(item).to_contain_text("waiting for two different people to approve")
    assert posts == [], f"cancelling the confirmation still posted {posts}"


def form_action(page: Page, action: str) -> str:
    """The URL the form of a `button[data-action=...]` posts to."""
    url: str = page.locator(f'button[data-action="{action}"]').first.evaluate(
        "(b) => !b.form ? '' : b.hasAttribute('formaction') ? b.formAction : b.form.action"
    )
    assert url, f'button[data-action="{action}"] is not in a <form>; buttons must work without JS'
    return url


def assert_fits_the_screen(page: Page) -> None:
    """Nothing is wider than the screen: a phone user never scrolls sideways."""
    screen = (page.viewport_size or {"width": 0})["width"]
    width: int = page.evaluate("() => document.documentElement.scrollWidth")
    if width <= screen:
        return
    wide: list[str] = page.evaluate(
        """(screen) => [...document.querySelectorAll('body *')]
            .filter((el) => el.getBoundingClientRect().right > screen + 1)
            .filter((el) => ![...el.children].some(
                (child) => child.getBoundingClientRect().right > screen + 1))
            .slice(0, 3)
            .map((el) => `${Math.round(el.getBoundingClientRect().right)}px: `
                + el.outerHTML.slice(0, 200))""",
        screen,
    )
    raise AssertionError(f"{page.url} is {width}px wide on a {screen}px screen; widest: {wide}")


def mark_page(page: Page) -> None:
    """Tag this page's window; a reload or navigation would lose the tag."""
    page.evaluate("() => { window.__browserTestSamePage = true; }")


def assert_not_reloaded(page: Page) -> None:
    assert page.evaluate("() => window.__browserTestSamePage === true"), (
        f"{page.url} was reloaded or navigated away; the console should update it in place"
    )


def tamper_csrf(page: Page) -> int:
    """Replace the CSRF token everywhere the page keeps it; return how many places."""
    changed: int = page.evaluate(
        """() => {
            const fields = [...document.querySelectorAll('input[name="csrf"]')];
            fields.forEach((f) => { f.value = 'tampered-by-the-test'; });
            const metas = [...document.querySelectorAll('meta[name*="csrf" i]')];
            metas.forEach((m) => m.setAttribute('content', 'tampered-by-the-test'));
            const holders = [...document.querySelectorAll('[data-csrf]')];
            holders.forEach((h) => h.setAttribute('data-csrf', 'tampered-by-the-test'));
            return fields.length + metas.length + holders.length;
        }"""
    )
    return changed


def snap(page: Page, moment: str, *, focus: Locator | None = None) -> Path:
    """Save a screenshot to the artifacts, named by moment and viewport: the whole page, or
    with `focus` what the screen shows once that is scrolled into view (a phone's view)."""
    width = (page.viewport_size or {"width": 0})["width"]
    kind = "phone" if width <= PHONE_WIDTH else "desktop"
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / f"{re.sub(r'[^a-z0-9]+', '-', moment.lower())}-{kind}.png"
    if focus is not None:
        focus.scroll_into_view_if_needed()
    page.screenshot(path=str(path), full_page=focus is None)
    return path


def publish(page: Page) -> Path:
    """Save the header and the incident card (the README's picture) to the artifacts; copy
    it to docs/images/console-incident.png only when UPDATE_SCREENSHOTS=1 asks for it."""
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / "readme-console-incident.png"
    page.evaluate("() => window.scrollTo(0, 0)")
    box = card(page).bounding_box()
    assert box is not None, "the incident card is not on the page"
    width = (page.viewport_size or {"width": 1280})["width"]
    clip = {"x": 0, "y": 0, "width": width, "height": box["y"] + box["height"] + 16}
    page.screenshot(path=str(path), full_page=True, clip=clip)
    if os.environ.get("UPDATE_SCREENSHOTS") == "1":
        README_IMAGE.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, README_IMAGE)
    return path

"""The on-call engineer's night, in the browser: the demo's XID 79 on gpu-node-02 GPU 5.

On a phone, `oncall` watches the incident appear in the list, approves the cordon and the
drain, watches the drain reach "drained", opens and cancels the disruptive power cycle's
confirmation, then approves it, sees "approved by you, waiting for one more" and pages the
second line; a second person (`second`, on a desktop) has the incident page open the whole
time, sees every change arrive without reloading, finds in their list that a decision
waits for them, and gives the power cycle and the return to service their second
approvals. Once the runbook has nothing left to decide, `oncall` resolves with a
disposition and opens the postmortem draft; the simulator shows the node back in service
with all eight GPUs. Screenshots of both are saved at the moments that matter
(tests/browser/artifacts/). oncall's four viewing combinations look at the waiting cordon
(the docs' console-phone-light, console-phone-dark and console-desktop images), the
two-person moment and the end.
"""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from tests.browser.cluster import Simulator
from tests.browser.conftest import DemoOf, NewPage, ViewersOf
from tests.browser.console import (
    ARTIFACTS,
    approve,
    approve_then_cancel,
    assert_fits_the_screen,
    assert_not_reloaded,
    card,
    incident_rows,
    log_in,
    mark_page,
    open_incident,
    publish,
    resolve,
    snap,
    step,
    timeline,
)
from tests.browser.walking import Night, assert_settled, two, walk
from tests.browser.walking import approve as approval

NODE = "gpu-node-02"
DOCS = {
    ("phone", "light"): "console-phone-light.png",
    ("phone", "dark"): "console-phone-dark.png",
    ("desktop", "light"): "console-desktop.png",
}
"""The first screens of the waiting cordon that docs/console.md shows."""
DISPOSITION = "gpu-node-02 drained and power-cycled; GPU 5 back on the bus, diag -r 3 passed"

pytestmark = pytest.mark.timeout(300)
"""A walk waits for the bot's own minute of a node Ready, and looks at four views on the way."""


def snap_both(moment: str, phone: Page, desktop: Page, *, focus: str) -> None:
    """The desktop's whole page, and the phone's screen showing `focus` (a selector)."""
    snap(phone, moment, focus=phone.locator(focus))
    snap(desktop, moment)


def test_oncall_drains_power_cycles_and_returns_the_xid_node_from_a_phone_with_a_postmortem(
    demo_of: DemoOf, new_page: NewPage, viewers: ViewersOf
) -> None:
    # The alert fires 3 s after the first login (the demo waits for it): the list is open
    # before it arrives.
    demo = demo_of("xid79", delay="3s")
    phone = new_page(demo, phone=True)
    log_in(phone, demo, "oncall")
    assert incident_rows(phone).count() == 0, "the alert fired before the list was open"
    mark_page(phone)

    expect(incident_rows(phone)).to_have_count(1)  # arrives live
    assert_not_reloaded(phone)
    row = incident_rows(phone).first
    number = int(row.get_attribute("data-incident") or "")
    expect(row).to_contain_text("critical")
    assert_fits_the_screen(phone)
    paged = phone.locator("#paged").get_by_role("link", name=f"INC-{number}")
    expect(paged).to_be_visible()  # oncall is on call: level 1 pages them, live too
    open_incident(phone, demo, number)
    mark_page(phone)
    expect(card(phone)).to_have_attribute("data-status", "open")
    expect(card(phone)).to_contain_text(NODE)

    desktop = new_page(demo)
    log_in(desktop, demo, "second")
    desktop.goto(demo.at(f"/incidents/{number}"))
    mark_page(desktop)
    for page in (phone, desktop):
        expect(step(page, "cordon")).to_have_attribute("data-state", "awaiting_approval")
    snap_both("incident awaiting cordon", phone, desktop, focus='li[data-step="cordon"]')
    assert_fits_the_screen(phone)
    people = {"oncall": phone, "second": desktop}
    night = Night(demo, number, people, viewers(demo), docs={"first decision": DOCS})
    night.look("first decision")

    approve(phone, "cordon", targets=NODE)
    expect(step(phone, "cordon")).to_have_attribute("data-state", "succeeded")
    approve(phone, "drain", targets=NODE)

    for page in (phone, desktop):  # the drain's progress arrives in place on both
        drain = step(page, "drain")
        expect(drain).to_have_attribute("data-state", "succeeded")
        expect(drain).to_contain_text(f"{NODE} drained")
        approved = timeline(page).filter(has_text="step.approved").filter(has_text="k8s.drain")
        expect(approved).to_contain_text("oncall")
        assert_not_reloaded(page)
    snap_both("incident drained", phone, desktop, focus='li[data-step="drain"]')
    assert_fits_the_screen(phone)
    publish(desktop)
    # Next the runbook proposes the power cycle: two people, and a dialog naming the node.
    approve_then_cancel(phone, "power_cycle", targets=NODE)
    walk(
        night,
        [two("power_cycle"), approval("diag"), two("uncordon_after_power_cycle")],
        targets=NODE,
    )
    expect(step(phone, "diag")).to_contain_text("dcgmi diag -r 3 passed")
    assert_settled(phone)
    with Simulator(demo) as sim:  # back in service, the card back on the bus
        assert (sim.power(NODE), sim.ready(NODE), sim.cordoned(NODE)) == ("On", "True", False)
        assert sim.gpu_sensor(NODE, 5)["Status"]["State"] == "Enabled"
        assert sim.pods("ml")["trainer-1"] not in ("", NODE)  # drained, running elsewhere

    resolve(phone, DISPOSITION)
    for page in (phone, desktop):
        expect(card(page)).to_have_attribute("data-status", "resolved")
        expect(timeline(page).filter(has_text=DISPOSITION)).to_have_count(1)
        assert_not_reloaded(page)
    snap_both("incident resolved", phone, desktop, focus="#flash")
    assert_fits_the_screen(phone)
    night.look("resolved", decision=False)

    phone.locator("a#postmortem-link").click()
    expect(phone).to_have_url(demo.at(f"/incidents/{number}/postmortem"))
    draft = phone.locator("article#postmortem")
    expect(draft).to_contain_text(f"INC-{number}")
    expect(draft).to_contain_text(DISPOSITION)  # the timeline's "resolved" line
    snap(phone, "postmortem draft")

    with phone.expect_download() as download:
        phone.locator("a#postmortem-download").click()
    assert download.value.suggested_filename.endswith(".md")
    saved = ARTIFACTS / download.value.suggested_filename
    download.value.save_as(saved)
    markdown = saved.read_text(encoding="utf-8")
    assert f"# Postmortem: INC-{number}" in markdown
    assert DISPOSITION in markdown

    phone.goto(demo.url)  # resolved: off the active list and out of the paged banner
    expect(incident_rows(phone)).to_have_count(0)
    expect(paged).to_have_count(0)

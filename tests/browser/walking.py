"""Walking an emergency to its end in the console: the decisions its runbook asks for, in
order, each made by the person who would make it on a real night, on that person's page.

`on_call` opens the incident for both people. A `Decision` names a step and what is done
with it: approved (by one person, or by two for a two-person step: the second on their
own page once the first approval shows), marked done with a note (a manual step), or
skipped. `walk` waits for each step to ask (the step before it may take a minute: a node
must stay Ready that long before the bot trusts it), decides, and goes on;
`settle_and_resolve` holds the runbook to having nothing left to decide or run, resolves
the incident and checks that its log shows every decision by whom it was made.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from playwright.sync_api import Page, expect

from tests.browser import console
from tests.browser.cluster import Bot
from tests.browser.conftest import NewPage
from tests.browser.demo import Demo

ASKS_WITHIN_MS = 150_000
"""How long a step may take to be proposed: the step before it may hold a node Ready for
the bot's minute, or run dcgmi diag."""
FINISHED = ("succeeded", "skipped")


@dataclass(frozen=True)
class Night:
    """An incident of `demo` open in the console: `oncall` on a phone, `second` on a
    desktop."""

    demo: Demo
    number: int
    pages: dict[str, Page]

    @property
    def phone(self) -> Page:
        return self.pages["oncall"]

    def shows(self, step_id: str, text: str) -> None:
        """The step's item on the phone says `text` (arriving live, if it has not yet)."""
        expect(console.step(self.phone, step_id)).to_contain_text(text)


def on_call(demo: Demo, new_page: NewPage) -> Night:
    """`oncall` logs in on a phone, waits for the demo's alert to open an incident and opens
    it; `second` logs in on a desktop and opens it too."""
    phone = new_page(demo, phone=True)
    console.log_in(phone, demo, "oncall")
    number = console.first_incident(phone)
    console.open_incident(phone, demo, number)
    desktop = new_page(demo)
    console.log_in(desktop, demo, "second")
    desktop.goto(demo.at(f"/incidents/{number}"))
    expect(console.card(desktop)).to_be_visible()
    return Night(demo, number, {"oncall": phone, "second": desktop})


@dataclass(frozen=True)
class Decision:
    step: str
    do: Literal["approve", "done", "skip"]
    by: tuple[str, ...] = ("oncall",)
    note: str = ""


def approve(step: str, *by: str) -> Decision:
    return Decision(step, "approve", by or ("oncall",))


def two(step: str) -> Decision:
    """A two-person step: `oncall` approves, then `second` on their own page."""
    return Decision(step, "approve", ("oncall", "second"))


def done(step: str, note: str) -> Decision:
    return Decision(step, "done", note=note)


def skip(step: str) -> Decision:
    return Decision(step, "skip")


def walk(pages: Mapping[str, Page], decisions: Sequence[Decision], *, targets: str) -> None:
    """Make each decision in turn on the decider's page; `targets` is what a disruptive
    step's confirmation must name."""
    for decision in decisions:
        for count, person in enumerate(decision.by, 1):
            page = pages[person]
            item = console.step(page, decision.step)
            expect(item).to_have_attribute(
                "data-state", "awaiting_approval", timeout=ASKS_WITHIN_MS
            )
            if decision.do == "done":
                console.mark_done(page, decision.step, decision.note)
            elif decision.do == "skip":
                console.skip(page, decision.step)
            elif count < len(decision.by):
                console.click_approve(page, decision.step, targets=targets)
                waiting = f"approvals {count} of {len(decision.by)}"
                expect(console.step(pages[decision.by[count]], decision.step)).to_contain_text(
                    waiting
                )
            else:
                console.approve(page, decision.step, targets=targets)


def assert_settled(page: Page) -> None:
    """Every step has run or was skipped: nothing waits, runs or is still to come."""
    unfinished = console.steps_not_in(page, FINISHED)
    expect(unfinished).to_have_count(0, timeout=ASKS_WITHIN_MS)
    expect(page.locator("#card p.waiting")).to_have_count(0)


def assert_logged(log: Sequence[tuple[str, str, str]], decisions: Sequence[Decision]) -> None:
    """The incident's log (type, actor, summary) records every decision, by whom it was
    made: each approval by its person, each note, each skip."""
    for decision in decisions:
        named = re.compile(rf"\bstep {re.escape(decision.step)}\b")
        for person in decision.by:
            if decision.do == "approve":
                kinds, wanted = ("step.approval", "step.approved"), named
            elif decision.do == "done":
                kinds = None
                wanted = re.compile(re.escape(f"did step {decision.step}: {decision.note}"))
            else:
                kinds, wanted = None, re.compile(rf"skipped step {re.escape(decision.step)}\b")
            found = [
                entry
                for entry in log
                if entry[1] == person
                and (kinds is None or entry[0] in kinds)
                and wanted.search(entry[2])
            ]
            assert found, f"the log does not show {person}'s {decision.do} of {decision.step}"


def settle_and_resolve(night: Night, decisions: Sequence[Decision], disposition: str) -> None:
    """After the walk: nothing left to decide, resolved with `disposition` (which the other
    page shows too), and the log shows who decided what."""
    assert_settled(night.phone)
    console.resolve(night.phone, disposition)
    expect(console.timeline(night.pages["second"]).filter(has_text=disposition)).to_have_count(1)
    with Bot(night.demo) as bot:
        log = bot.log(night.number)
    assert_logged(log, decisions)
    assert ("incident.resolved", "oncall") in {(kind, actor) for kind, actor, _ in log}

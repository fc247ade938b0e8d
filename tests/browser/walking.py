"""Walking an emergency to its end in the console: the decisions its runbook asks for, in
order, each made by the person who would make it on a real night, on that person's page.

`on_call` opens the incident for both people. A `Decision` names a step and what is done
with it: approved (by one person, or by two for a two-person step: the second on their
own page once the first approval shows), marked done with a note (a manual step),
skipped (with a reason when later steps depend on it), or proposed again. `walk` waits for
each step to ask (the step before it may take a minute: a node must stay Ready that long
before the bot trusts it), decides, and goes on; `settle_and_resolve` holds the runbook to
having nothing left to decide or run, resolves the incident and checks that its log shows
every decision by whom it was made.

The two-person flow is checked from both sides at the walk's first two-person step: the
first approver's decision block says "approved by you, waiting for one more" and offers
"Page the second line now" instead of Approve (pressed: the feedback is in view, and the
second person is paged); the second person's list says a decision waits for them; they
approve on their own page. With `Night.viewers` the walk also looks at the incident in
the four viewing combinations (`viewing.Viewers`) at its first decision, at that
two-person moment, and once resolved.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from playwright.sync_api import Page, expect

from tests.browser import console
from tests.browser.cluster import Bot
from tests.browser.conftest import NewPage
from tests.browser.demo import Demo
from tests.browser.viewing import Screen, Theme, Viewers

ASKS_WITHIN_MS = 150_000
"""How long a step may take to be proposed: the step before it may hold a node Ready for
the bot's minute, or run dcgmi diag."""
FINISHED = ("succeeded", "skipped")


Docs = Mapping[tuple[Screen, Theme], str]
"""Which first screens of a look to publish to docs/images (UPDATE_SCREENSHOTS=1)."""


@dataclass
class Night:
    """An incident of `demo` open in the console: `oncall` on a phone, `second` on a
    desktop; `viewers`, when given, oncall's four viewing combinations."""

    demo: Demo
    number: int
    pages: dict[str, Page]
    viewers: Viewers | None = None
    docs: dict[str, Docs] = field(default_factory=dict)
    """moment -> the images a look at it publishes."""

    @property
    def phone(self) -> Page:
        return self.pages["oncall"]

    def look(self, moment: str, *, decision: bool = True) -> None:
        """The incident in the four combinations at `moment`, once (without viewers:
        nothing)."""
        if self.viewers is not None and moment not in self.viewers.looked:
            self.viewers.look(self.number, moment, decision=decision, docs=self.docs.get(moment))

    def shows(self, step_id: str, text: str) -> None:
        """The step's item on the phone says `text` (arriving live, if it has not yet)."""
        expect(console.step(self.phone, step_id)).to_contain_text(text)


def on_call(demo: Demo, new_page: NewPage, viewers: Viewers | None = None) -> Night:
    """`oncall` logs in on a phone (light theme), waits for the demo's alert to open an
    incident and opens it; `second` logs in on a desktop (dark theme) and opens it too."""
    phone = new_page(demo, phone=True)
    console.log_in(phone, demo, "oncall")
    number = console.first_incident(phone)
    console.open_incident(phone, demo, number)
    desktop = new_page(demo, theme="dark")  # the second line's feedback in the dark theme
    console.log_in(desktop, demo, "second")
    desktop.goto(demo.at(f"/incidents/{number}"))
    expect(console.card(desktop)).to_be_visible()
    return Night(demo, number, {"oncall": phone, "second": desktop}, viewers)


@dataclass(frozen=True)
class Decision:
    step: str
    do: Literal["approve", "done", "skip", "repropose"]
    by: tuple[str, ...] = ("oncall",)
    note: str = ""
    dependents: tuple[str, ...] = ()
    """A skip's: the titles of the later steps its form must list."""


def approve(step: str, *by: str) -> Decision:
    return Decision(step, "approve", by or ("oncall",))


def two(step: str) -> Decision:
    """A two-person step: `oncall` approves, then `second` on their own page."""
    return Decision(step, "approve", ("oncall", "second"))


def done(step: str, note: str) -> Decision:
    return Decision(step, "done", note=note)


def skip(step: str, reason: str = "", *dependents: str) -> Decision:
    """Skip; a step others depend on takes a `reason`, and its form lists `dependents`."""
    return Decision(step, "skip", note=reason, dependents=dependents)


def again(step: str) -> Decision:
    """Propose a skipped (failed, expired) step again."""
    return Decision(step, "repropose")


def walk(
    pages: Mapping[str, Page] | Night,
    decisions: Sequence[Decision],
    *,
    targets: str,
) -> None:
    """Make each decision in turn on the decider's page; `targets` is what a disruptive
    step's confirmation must name. Given a `Night`, its viewers look at the first decision
    and at the first two-person step."""
    night = pages if isinstance(pages, Night) else None
    people = night.pages if night is not None else pages
    both_sides = False
    for index, decision in enumerate(decisions):
        first = people[decision.by[0]]
        item = console.step(first, decision.step)
        wanted = "skipped" if decision.do == "repropose" else "awaiting_approval"
        expect(item).to_have_attribute("data-state", wanted, timeout=ASKS_WITHIN_MS)
        if index == 0 and night is not None:
            night.look("first decision")
        if decision.do == "done":
            console.mark_done(first, decision.step, decision.note)
        elif decision.do == "skip":
            console.skip(first, decision.step, decision.note, dependents=decision.dependents)
        elif decision.do == "repropose":
            console.propose_again(first, decision.step)
        elif len(decision.by) == 1:
            console.approve(first, decision.step, targets=targets)
        else:
            _two_people(people, decision, targets=targets, both_sides=not both_sides)
            if not both_sides and night is not None:
                night.look("two-person")
            both_sides = True
            second = people[decision.by[1]]
            console.approve(second, decision.step, targets=targets)


def _two_people(
    pages: Mapping[str, Page], decision: Decision, *, targets: str, both_sides: bool
) -> None:
    """The first approval of a two-person step, and what each side sees then; with
    `both_sides` also the first approver pages the second line and the second's list says
    a decision waits for them."""
    first, second = (pages[person] for person in decision.by)
    console.click_approve(first, decision.step, targets=targets)
    mine = console.decision(first)
    expect(mine).to_contain_text("approved by you, waiting for one more")
    expect(mine.locator('button[data-action="approve"]')).to_have_count(0)
    expect(console.step(second, decision.step)).to_contain_text(
        f"approved by {decision.by[0]}, waiting for one more"
    )
    if not both_sides:
        return
    paged = console.page_second_line(first)
    assert "paged" in paged, f"Page the second line now answered {paged!r}"
    expect(mine).to_contain_text("second line")
    # The second person's list, in another tab: their incident page stays as it is.
    number = int(second.url.rstrip("/").rsplit("/", 1)[-1])
    listing = second.context.new_page()
    try:
        listing.goto(second.url.split("/incidents/")[0] + "/")
        row = console.list_row(listing, number)
        expect(row).to_have_attribute("data-waiting", "you")
        expect(row).to_contain_text(decision.step)  # "one more approval waits for you: ..."
        expect(listing.locator(f'#paged [data-paged="{number}"]')).to_be_visible()
    finally:
        listing.close()


def assert_settled(page: Page) -> None:
    """Every step has run or was skipped: nothing waits, runs or is still to come."""
    unfinished = console.steps_not_in(page, FINISHED)
    expect(unfinished).to_have_count(0, timeout=ASKS_WITHIN_MS)
    expect(console.decision(page).locator("li[data-step]")).to_have_count(0)


def assert_logged(log: Sequence[tuple[str, str, str]], decisions: Sequence[Decision]) -> None:
    """The incident's log (type, actor, summary) records every decision, by whom it was
    made: each approval by its person, each note, each skip."""
    for decision in decisions:
        named = re.compile(rf"\bstep {re.escape(decision.step)}\b")
        for person in decision.by:
            if decision.do == "approve":
                kinds, wanted = ("step.approval", "step.approved"), named
            elif decision.do == "repropose":
                kinds, wanted = ("step.reproposed",), named
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
    night.look("resolved", decision=False)
    expect(console.timeline(night.pages["second"]).filter(has_text=disposition)).to_have_count(1)
    with Bot(night.demo) as bot:
        log = bot.log(night.number)
    assert_logged(log, decisions)
    assert ("incident.resolved", "oncall") in {(kind, actor) for kind, actor, _ in log}

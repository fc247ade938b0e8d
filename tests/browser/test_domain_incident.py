"""A hot row in the browser: `runbook-bot demo --scenario row-cooling` fails row a's air
conditioning; its 18 alerts (a BMC alarm per machine, one per GPU) are one incident for the
row, and the overheating runbook takes its row branch.

`oncall` on a phone calls the facility, cordons the row with one approval naming the count
(the card shows the two machines as counts and a grid, not a line each), skips shedding
load, and skips the drain: the skip form lists the steps that depend on it, a blank reason
is refused where the finger is, a reason is taken. The drain is proposed again (the
temperatures kept rising after all), skipped again with a reason, the load is given back
and the row returned to service with a second approval naming the count; resolved. The
four viewing combinations look at the first decision and at the end; the desktop view of
the cordoned row is docs/images/console-domain.png.
"""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.browser import walking
from tests.browser.cluster import Simulator
from tests.browser.conftest import DemoOf, NewPage, ViewersOf
from tests.browser.console import card, step
from tests.browser.walking import (
    ASKS_WITHIN_MS,
    again,
    approve,
    done,
    settle_and_resolve,
    skip,
    walk,
)

ROW = ("gpu-node-01", "gpu-node-02")
DRAIN_DEPENDENTS = (
    "Shut the drained machines down (ACPI soft off), four at a time",
    "Cooling is back - power the row on in batches",
    "Return the row to service (uncordon)",
)

pytestmark = pytest.mark.timeout(240)
"""A walk waits for the bot's own minute of a node Ready, and looks at four views on the way."""


def test_a_hot_row_is_one_incident_walked_with_a_reasoned_skip_proposed_again_and_returned(
    demo_of: DemoOf, new_page: NewPage, viewers: ViewersOf
) -> None:
    demo = demo_of("row-cooling")
    night = walking.on_call(demo, new_page, viewers(demo))
    night.docs["row cordoned"] = {("desktop", "light"): "console-domain.png"}
    expect(card(night.phone)).to_contain_text("row/a")
    expect(night.phone.locator("#status-line")).to_contain_text("2 nodes")
    # The node branch (one machine's fans) was skipped; the row's reads ran unattended.
    expect(step(night.phone, "fans")).to_have_attribute("data-state", "not_reached")
    expect(step(night.phone, "row_temperatures")).to_have_attribute("data-state", "succeeded")

    walk(
        night,
        [
            done("facility", "facility on it: the CRAC unit of row a tripped, ETA 40 min"),
            approve("row_cordon"),
        ],
        targets="row/a",
    )
    cordoned = step(night.phone, "row_cordon")
    expect(cordoned).to_have_attribute("data-state", "succeeded")
    # Counts and a grid for the node set, never a line per node.
    expect(cordoned.locator("pre.grid")).to_have_text("■■")
    asks = step(night.phone, "stop_low_priority")
    expect(asks).to_have_attribute("data-state", "awaiting_approval", timeout=ASKS_WITHIN_MS)
    night.look("row cordoned")

    decisions = [
        skip("stop_low_priority"),  # only core jobs on row a: nothing to shed
        skip(
            "row_drain",
            "inlets falling since the facility reset the CRAC; no need to power off",
            *DRAIN_DEPENDENTS,
        ),
        again("row_drain"),  # the inlets climbed again after all
        skip("row_drain", "the second CRAC unit came up; inlets back under 30 °C", "Shut the"),
        done("watch_cooling", "inlets at 24 °C for 20 min; low-priority jobs restarted"),
        approve("row_uncordon"),
    ]
    walk(night, decisions, targets="row/a")
    settle_and_resolve(night, decisions, "row a's CRAC unit reset; the row is back in service")

    with Simulator(demo) as sim:
        assert [sim.cordoned(node) for node in ROW] == [False, False]  # back in service
        assert [sim.power(node) for node in ROW] == ["On", "On"]  # never powered off

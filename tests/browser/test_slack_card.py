"""The Slack card as a phone shows it: the bot's Block Kit (`blocks.card`) rendered to
Slack-like HTML (`tests/browser/blockkit.py`) and measured in Chromium at 390x844 and
1280x800. The waiting decision's buttons are on the first screen; a domain incident's card
is a grid and counts, not a list of nodes; the two-person wait names the second line and
offers to page it. `UPDATE_SCREENSHOTS=1` copies the pictures to docs/images/slack-card*.png.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page

from bot.chat.slack import blocks
from bot.chat.views import CardView, EachView, EscalationView, SecondLineView, StepView
from tests.browser import blockkit
from tests.browser.conftest import DESKTOP, PHONE

ARTIFACTS = Path(__file__).parent / "artifacts"
IMAGES = Path(__file__).parents[2] / "docs" / "images"
OPENED = datetime(2026, 11, 30, 3, 12, 40, tzinfo=UTC)
NOW = OPENED + timedelta(minutes=4, seconds=20)
NAMES = {"UALICE": "alice", "UBOB": "bob"}
FIRST_SCREEN = 844


def done(step: str, title: str, action: str, summary: str) -> StepView:
    return StepView(
        step, title, "succeeded", "action", run_id=1, action=action, risk="read", summary=summary
    )


def skipped(step: str, title: str, branch: str) -> StepView:
    when = f'steps.classify.result.fault_class == "{branch}"'
    return StepView(
        step, title, "skipped", "manual", run_id=2, summary=f"skipped: `when: {when}` is false"
    )


def later(step: str, title: str) -> StepView:
    return StepView(step, title, "not_reached", "action")


def xid_card(**changes: object) -> CardView:
    """The demo's XID 79: three reads done, four branches skipped, the cordon waiting."""
    steps = (
        done(
            "classify",
            "Classify the XID",
            "gpu.classify_xid",
            "XID 79: GPU fell off the bus (hardware)",
        ),
        done(
            "history",
            "Faults on this GPU in the last 7 days",
            "gpu.fault_history",
            "1 fault in 7 days",
        ),
        done("snapshot", "Snapshot the node", "gpu.diagnose", "8 GPUs, GPU 5 missing"),
        skipped("notify_owner", "Tell the job owner", "application"),
        skipped("app_history", "Faults on this GPU in the last 24 h", "application"),
        skipped("app_repeat", "Repeated on this GPU - plan diagnostics", "application"),
        skipped("record_trend", "Record it and watch the ECC trend", "informational"),
        StepView(
            "cordon",
            "Cordon the node",
            "awaiting_approval",
            "action",
            run_id=8,
            action="k8s.cordon",
            risk="change",
            params={"node": "gpu-node-02", "reason": "XID 79 on GPU 5 (hardware)"},
            approvals_required=1,
            expires_at=NOW + timedelta(minutes=11),
            targets=("gpu-node-02",),
            dependents=("drain", "reset", "power_cycle", "wait_ready", "diag", "uncordon"),
            dependent_titles=(
                "Drain the node",
                "Reset GPU 5",
                "Power cycle the node",
                "Wait for the node to be Ready",
                "Run dcgmi diag",
                "Uncordon the node",
            ),
        ),
        later("drain", "Drain the node"),
        later("reset", "Reset GPU 5"),
        later("power_cycle", "Power cycle the node"),
        later("diag", "Run dcgmi diag"),
        later("uncordon", "Uncordon the node"),
    )
    view = CardView(
        number=7,
        ref="INC-7",
        title="GPU 5 XID 79 on gpu-node-02",
        severity="critical",
        status="open",
        opened_at=OPENED,
        now=NOW,
        facts={"node": "gpu-node-02", "gpu": "5", "xid": "79", "uuid": "GPU-5f0e…a41c"},
        runbook="gpu-xid v1",
        steps=steps,
        alerts_firing=1,
        alerts_total=1,
        alert_names=("GPUXIDError",),
        nodes=("gpu-node-02",),
        url="https://runbook-bot.example.com/incidents/7",
        escalation=EscalationView(
            level=1,
            levels=3,
            paged_at=OPENED,
            next_kind="level",
            next_at=OPENED + timedelta(minutes=15),
            next_level=2,
        ),
    )
    return replace(view, **changes)  # type: ignore[arg-type]


def two_person_card() -> CardView:
    """Alice approved the power cycle; it needs one more, and Bob (the second line) was paged."""
    view = xid_card()
    steps = tuple(
        StepView(
            "power_cycle",
            "Power cycle the node",
            "awaiting_approval",
            "action",
            run_id=11,
            action="bmc.power_cycle",
            risk="disruptive",
            params={"node": "gpu-node-02"},
            approvals=1,
            approvals_required=2,
            approvers=("slack:UALICE",),
            expires_at=NOW + timedelta(minutes=9),
            targets=("gpu-node-02",),
            dependents=("wait_ready", "diag"),
            dependent_titles=("Wait for Ready", "Run dcgmi diag"),
        )
        if s.step == "cordon"
        else s
        for s in view.steps
    )
    second = SecondLineView(names=("bob",), level=2, paged_at=NOW - timedelta(seconds=47))
    return xid_card(
        steps=steps,
        second_line=second,
        status="acknowledged",
        acknowledged_by="slack:UALICE",
        owner="slack:UALICE",
    )


def domain_card() -> CardView:
    """A hot row: 32 nodes of row/a, one incident, its cordon running over the 32."""
    nodes = tuple(f"gpu-a-{i:02d}" for i in range(32))
    states = ("succeeded",) * 19 + ("failed",) + ("running",) * 4 + ("left",) * 8
    cordon = StepView(
        "cordon",
        "Cordon the hot row",
        "running",
        "action",
        run_id=21,
        action="k8s.cordon",
        risk="change",
        approvals=1,
        approvals_required=1,
        approvers=("slack:UALICE",),
        each=EachView(
            set="32 nodes of row/a",
            total=32,
            succeeded=19,
            running=4,
            failed=1,
            left=8,
            failed_nodes=("gpu-a-19",),
            nodes=nodes,
            count=32,
            states=states,
        ),
    )
    facility = StepView(
        "facility", "Call the facility about the row's cooling", "not_reached", "manual"
    )
    return xid_card(
        title="Overheating: 32 nodes of row/a",
        domain="row/a",
        nodes=nodes,
        steps=(cordon, facility),
        facts={},
        runbook="overheating v1",
        severity="warning",
        status="acknowledged",
        acknowledged_by="slack:UALICE",
        owner="slack:UALICE",
        alerts_firing=32,
        alerts_total=32,
        alert_names=("GPUTemperatureHigh",),
    )


Show = Callable[..., Page]
"""(view, *, phone) -> a page showing the view's card as Slack would."""


@pytest.fixture
def show(browser: Browser) -> Iterator[Show]:
    contexts = []

    def open_page(view: CardView, *, phone: bool) -> Page:
        context = browser.new_context(**(PHONE if phone else DESKTOP), locale="en-US")
        contexts.append(context)
        page = context.new_page()
        _, rendered = blocks.card(view)
        page.set_content(blockkit.page(rendered, names=NAMES, title=view.ref))
        return page

    yield open_page
    for context in contexts:
        context.close()


def bottom(page: Page, selector: str) -> float:
    box = page.locator(selector).bounding_box()
    assert box is not None, f"{selector} is not on the page"
    return box["y"] + box["height"]


def photograph(page: Page, name: str, *, docs: bool = True) -> Path:
    """The page to the artifacts; with UPDATE_SCREENSHOTS=1 also to docs/images (the
    pictures docs/slack.md shows)."""
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    if docs and os.environ.get("UPDATE_SCREENSHOTS") == "1":
        shutil.copyfile(path, IMAGES / f"{name}.png")
    return path


@pytest.mark.parametrize("phone", [True, False], ids=["phone", "desktop"])
def test_the_waiting_decision_and_its_buttons_are_on_the_first_screen(
    show: Show, phone: bool
) -> None:
    page = show(xid_card(), phone=phone)

    decision = page.locator("[data-block=section]", has_text="Waiting for a decision")
    assert "Cordon the node" in decision.inner_text()
    assert "Skipping it also skips: Drain the node, Reset GPU 5" in decision.inner_text()
    assert bottom(page, "button[data-action='step.approve']") <= FIRST_SCREEN
    assert bottom(page, "button[data-action='step.skip_why']") <= FIRST_SCREEN
    text = page.inner_text("body")
    assert "4 steps skipped: application/informational branches · 5 not reached yet" in text
    # The skipped branches are one line, not four blocks above the decision.
    assert text.index("Waiting for a decision") < text.index("4 steps skipped")
    photograph(page, "slack-card" if phone else "slack-card-desktop", docs=phone)


def test_the_first_approver_reads_whom_they_wait_for_and_can_page_them(show: Show) -> None:
    page = show(two_person_card(), phone=True)

    decision = page.locator("[data-block=section]", has_text="Waiting for a decision")
    assert (
        "approved by @alice, waiting for one more (second line: bob, paged 03:16:13 UTC)"
        in decision.inner_text()
    )
    assert bottom(page, "button[data-action='incident.page_second']") <= FIRST_SCREEN
    assert page.locator("button[data-action='step.approve']").inner_text() == "Approve"
    photograph(page, "slack-card-two-person")


def test_a_domain_card_is_a_grid_and_counts_never_a_line_per_node(show: Show) -> None:
    page = show(domain_card(), phone=True)

    text = page.inner_text("body")
    assert "row/a · 32 nodes" in text
    assert "Running: Cordon the hot row" in text
    assert "done 19 · running 4 · failed 1 · left 8" in text
    grid = page.locator("pre").inner_text().split("\n")
    assert grid == ["■" * 16, "■■■✖▶▶▶▶□□□□□□□□"]
    named = [n for n in (f"gpu-a-{i:02d}" for i in range(32)) if n in text]
    assert named == ["gpu-a-19"], "only the failed node is named"
    assert bottom(page, "button[data-action='step.stop']") <= FIRST_SCREEN
    photograph(page, "slack-card-domain")

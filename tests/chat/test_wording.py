"""The words both surfaces use: every step state reads right (a running step never says
what it waited for, a manual step waits for someone to do it, nothing is said twice), the
status line, the folded line, the two-person wait and a domain step's grid."""

from __future__ import annotations

import re
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from bot.chat import wording
from bot.chat.views import CardView, EachView, SecondLineView, StepView

OPENED = datetime(2026, 11, 30, 3, 0, 12, tzinfo=UTC)
NOW = OPENED + timedelta(minutes=42)

STALE = "k8s.cordon node=gpu-node-02: needs one person before 19:26 UTC"
"""What the engine wrote when it proposed the step: stale once the step runs."""


def step(state: str, **changes: object) -> StepView:
    base = StepView(
        step="cordon",
        title="Cordon the node",
        state=state,
        kind="action",
        run_id=7,
        action="k8s.cordon",
        risk="change",
        params={"node": "gpu-node-02"},
        approvals_required=1,
        summary=STALE,
    )
    return replace(base, **changes)  # type: ignore[arg-type]


def doubled(text: str) -> list[str]:
    """Words said twice in a row (`approved (approved)`, `skipped: skipped`)."""
    words = re.findall(r"[a-z]+", text.lower())
    return [a for a, b in zip(words, words[1:], strict=False) if a == b]


ALL_STATES = (
    "proposed",
    "awaiting_approval",
    "approved",
    "running",
    "succeeded",
    "failed",
    "timed_out",
    "skipped",
    "cancelled",
    "expired",
    "interrupted",
    "not_reached",
)


@pytest.mark.parametrize("state", ALL_STATES)
def test_every_state_has_words_without_doubling_or_underscores(state: str) -> None:
    summaries = {
        "succeeded": "succeeded: cordoned gpu-node-02",
        "failed": "failed: the API server refused (403)",
        "timed_out": "timed out: no result within 2m",
        "skipped": 'skipped: `when: steps.classify.result.fault_class == "application"` is false',
        "cancelled": "cancelled: INC-7 resolved by alice",
        "expired": "no approval in time",
        "interrupted": "interrupted: worker w1 stopped renewing its lease",
    }
    words = wording.step_state(step(state, summary=summaries.get(state, STALE)), NOW)
    assert words.strip() and "_" not in words.split(":")[0], words
    assert doubled(words) == [], words


@pytest.mark.parametrize("state", ["approved", "running", "succeeded", "skipped", "not_reached"])
def test_stale_proposal_text_is_gone_once_the_step_moves_on(state: str) -> None:
    summary = STALE if state in ("approved", "running") else "skipped: nobody needed it"
    words = wording.step_state(step(state, summary=summary, approvers=("alice",)), NOW)
    assert "needs one person" not in words and "before 19:26" not in words, words


def test_running_step_says_it_runs_and_a_domain_step_counts_its_nodes() -> None:
    assert wording.step_state(step("running"), NOW) == "running"
    each = EachView(set="32 nodes of row/a", total=32, succeeded=12, running=4, failed=1, left=15)
    assert wording.step_state(step("running", each=each), NOW) == (
        "running: done 12 · running 4 · failed 1 · left 15"
    )


def test_approved_step_names_who_approved_once() -> None:
    words = wording.step_state(step("approved", approvers=("alice",), summary="approved"), NOW)
    assert words == "approved by alice, starting"
    engine = "(node=gpu-node-02, reason=XID on gpu-node-02): approved by alice"
    approved = step("approved", approvers=("alice",), summary=engine)
    assert wording.step_state(approved, NOW, who=str.title) == "approved by Alice, starting"
    assert wording.step_state(replace(approved, state="running"), NOW) == "running"


def test_manual_step_waits_for_someone_to_do_it_not_for_approval() -> None:
    manual = step("awaiting_approval", kind="manual", action=None, risk=None)
    words = wording.step_state(manual, NOW)
    assert words == "waiting for someone to do it and mark it done"
    assert "approval" not in words


def test_awaiting_step_counts_people_and_says_when_it_expires() -> None:
    one = step("awaiting_approval", expires_at=NOW + timedelta(minutes=12))
    assert wording.step_state(one, NOW) == (
        "waiting for one person to approve (expires in 12m, 03:54 UTC)"
    )
    two = step("awaiting_approval", approvals_required=2)
    assert wording.step_state(two, NOW) == "waiting for two different people to approve"
    half = replace(two, approvals=1, approvers=("alice",))
    assert wording.step_state(half, NOW, who=str.title) == (
        "approved by Alice, waiting for one more"
    )
    late = replace(one, expires_at=NOW - timedelta(seconds=1))
    assert wording.step_state(late, NOW).endswith("(expired)")


def test_summary_repeating_the_state_is_said_once() -> None:
    assert wording.step_state(step("skipped", summary="skipped: skipped"), NOW) == "skipped"
    assert wording.step_state(step("succeeded", summary="done"), NOW) == "done"
    assert wording.step_state(step("failed", summary="failed (failed)"), NOW) == "failed"
    assert wording.step_state(step("expired", summary=""), NOW) == (
        "expired: nobody approved it in time"
    )
    assert wording.step_state(step("not_reached", summary=""), NOW) == "not reached yet"


def card(**changes: object) -> CardView:
    base = CardView(
        number=7,
        ref="INC-7",
        title="GPU 5 XID 79 (fell off the bus)",
        severity="critical",
        status="open",
        opened_at=OPENED,
        now=NOW,
        nodes=("gpu-node-02",),
    )
    return replace(base, **changes)  # type: ignore[arg-type]


def test_status_line_says_what_where_since_when_and_who_owns_it() -> None:
    assert wording.status_line(card()) == (
        "GPU 5 XID 79 (fell off the bus) · on gpu-node-02 · since 03:00:12 UTC (42m) · no owner"
    )
    owned = card(title="XID 79 on gpu-node-02", owner="alice")
    assert wording.status_line(owned, who=str.upper) == (
        "XID 79 on gpu-node-02 · since 03:00:12 UTC (42m) · owner ALICE"
    )


def test_status_line_does_not_name_a_node_the_title_names() -> None:
    titled = card(title="gpu-node-02 GPU 5 GPUXIDError")
    assert wording.status_line(titled) == (
        "gpu-node-02 GPU 5 GPUXIDError · since 03:00:12 UTC (42m) · no owner"
    )
    assert wording.status_line(titled, title=False) == "since 03:00:12 UTC (42m) · no owner"


def test_status_line_of_a_domain_counts_nodes_and_of_a_resolved_one_says_so() -> None:
    nodes = tuple(f"a-{i:02d}" for i in range(1, 33))
    hot = card(title="Hot row", domain="row/a", nodes=nodes)
    assert wording.status_line(hot) == (
        "Hot row · row/a · 32 nodes · since 03:00:12 UTC (42m) · no owner"
    )
    titled = card(title="Overheating: 2 nodes of row/a", domain="row/a", nodes=nodes[:2])
    assert wording.status_line(titled) == (
        "Overheating: 2 nodes of row/a · since 03:00:12 UTC (42m) · no owner"
    )
    # Without the title (the surface's header has it) the line keeps the domain's count.
    assert wording.status_line(titled, title=False).startswith("row/a · 2 nodes · since")
    done = card(status="resolved", owner="bob")
    assert wording.status_line(done).endswith("since 03:00:12 UTC · resolved · owner bob")


def skipped(step_id: str, value: str) -> StepView:
    return StepView(
        step=step_id,
        title=step_id.replace("_", " "),
        state="skipped",
        kind="manual",
        run_id=1,
        summary=f'skipped: `when: steps.classify.result.fault_class == "{value}"` is false',
    )


def test_folded_line_names_the_branches_skipped_and_counts_the_rest() -> None:
    steps = (
        skipped("notify_owner", "application"),
        skipped("app_history", "application"),
        skipped("app_repeat", "application"),
        skipped("record_trend", "informational"),
        step("not_reached"),
        step("not_reached"),
    )
    assert wording.folded_line(steps) == (
        "4 steps skipped: application/informational branches · 2 not reached yet"
    )
    assert wording.folded_line(()) is None
    by_hand = replace(skipped("drain", "x"), title="Drain the node", summary="skipped: no time")
    assert wording.folded_line((by_hand,)) == "1 step skipped: Drain the node"


def test_folded_steps_of_a_card_are_the_skipped_and_not_reached() -> None:
    steps = (
        step("succeeded", step="classify"),
        skipped("notify_owner", "application"),
        step("awaiting_approval", step="cordon"),
        step("running", step="snapshot"),
        step("not_reached", step="drain"),
    )
    view = card(steps=steps)
    assert view.decision is steps[2]
    assert view.running_step is steps[3]
    assert [s.step for s in view.folded] == ["notify_owner", "drain"]
    assert [s.step for s in view.history] == ["classify"]
    assert card(steps=steps, status="resolved").decision is None


def test_two_person_wait_says_who_approved_and_who_the_second_line_is() -> None:
    power = step(
        "awaiting_approval",
        step="power_cycle",
        approvals=1,
        approvals_required=2,
        approvers=("alice",),
    )
    bob = SecondLineView(names=("Bob",), level=2, paged_at=datetime(2026, 11, 30, 3, 14, 7))
    assert wording.waiting_for_second(power, bob, "alice") == (
        "approved by you, waiting for one more (second line: Bob, paged 03:14:07 UTC)"
    )
    assert wording.waiting_for_second(power, bob, None, who=str.title) == (
        "approved by Alice, waiting for one more (second line: Bob, paged 03:14:07 UTC)"
    )
    quiet = SecondLineView(names=("Bob", "Carol"), level=2)
    assert wording.waiting_for_second(power, quiet, "carol") == (
        "approved by alice, waiting for one more (second line: Bob and Carol, not paged yet)"
    )
    assert wording.waiting_for_second(power, None, "alice") == (
        "approved by you, waiting for one more"
    )
    view = card(steps=(power,))
    assert view.waiting_for("alice") == "second"
    assert view.waiting_for("bob") == "you"
    assert card().waiting_for("bob") == "none"


def test_grid_draws_one_mark_a_node_sixteen_to_a_row() -> None:
    states = ("succeeded",) * 12 + ("running",) * 4 + ("failed",) + ("left",) * 15
    each = EachView(
        set="32 nodes of row/a",
        total=32,
        succeeded=12,
        running=4,
        failed=1,
        left=15,
        nodes=tuple(f"a-{i:02d}" for i in range(1, 33)),
        states=states,
    )
    assert wording.grid(each) == "■" * 12 + "▶" * 4 + "\n" + "✖" + "□" * 15
    counted_only = replace(each, states=())
    assert wording.grid(counted_only) == wording.grid(each)


def test_grid_of_a_thousand_nodes_stays_a_few_rows_and_keeps_a_failure_visible() -> None:
    states = ("succeeded",) * 999 + ("failed",)
    each = EachView(set="1000 nodes", total=1000, succeeded=999, failed=1, states=states)
    rows = wording.grid(each).split("\n")
    assert len(rows) <= wording.GRID_CELLS // wording.GRID_WIDTH
    assert "✖" in rows[-1]
    assert sum(row.count("✖") for row in rows) == 1


def test_propose_again_is_offered_before_any_open_step_never_for_a_false_condition() -> None:
    steps = (
        step("failed", step="drain", summary="PDB blocks eviction"),
        skipped("notify_owner", "application"),
        step("skipped", step="cordon", summary="skipped by alice: out of service"),
        step("awaiting_approval", step="reset"),
        step("expired", step="power_cycle", summary="decided again in its turn"),
    )
    assert [s.step for s in card(steps=steps).proposable_again] == ["drain", "cordon"]
    assert not step("not_reached", run_id=None).reproposable
    assert step("running").reproposable is False


def test_running_step_keeps_a_fresh_summary_and_drops_a_stale_one() -> None:
    assert wording.step_state(step("running", summary="drained 3 of 10 pods"), NOW) == (
        "running — drained 3 of 10 pods"
    )
    auto = step("approved", summary="k8s.node_status node=n1: runs automatically (read risk)")
    assert wording.step_state(auto, NOW) == "starting"

"""Block Kit rendering: cards, thread posts, the resolve modal and lists stay readable,
inside every Slack limit, and safe from alert text that tries to mention or link."""

from __future__ import annotations

import re
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bot.chat.slack import blocks, mrkdwn
from bot.chat.slack.blocks import escape
from bot.chat.views import CardView, EachView, LogLine, SecondLineView, StepView

OPENED = datetime(2026, 11, 30, 3, 0, tzinfo=UTC)
NOW = OPENED + timedelta(minutes=42)

# --- limits -------------------------------------------------------------------------------

TEXT_OBJECT = 3000
LIMITS = {
    "message_blocks": 50,
    "header": 150,
    "section_text": 3000,
    "fields": 10,
    "field": 2000,
    "actions_elements": 25,
    "context_elements": 10,
    "button_text": 75,
    "action_id": 255,
    "block_id": 255,
    "value": 2000,
    "confirm_title": 100,
    "confirm_text": 300,
    "confirm_button": 30,
}


def _text(obj: Any, limit: int, *, plain_only: bool = False) -> None:
    assert isinstance(obj, dict), obj
    assert obj["type"] in (("plain_text",) if plain_only else ("plain_text", "mrkdwn")), obj
    text = obj["text"]
    assert isinstance(text, str)
    assert 1 <= len(text) <= limit, (len(text), limit, text[:80])
    assert text.strip(), "Slack refuses blank text"


def _element(element: dict[str, Any]) -> None:
    if element["type"] == "button":
        _text(element["text"], LIMITS["button_text"], plain_only=True)
        assert len(element["action_id"]) <= LIMITS["action_id"]
        if "value" in element:
            assert len(element["value"]) <= LIMITS["value"]
        if "confirm" in element:
            confirm = element["confirm"]
            _text(confirm["title"], LIMITS["confirm_title"], plain_only=True)
            _text(confirm["text"], LIMITS["confirm_text"])
            _text(confirm["confirm"], LIMITS["confirm_button"], plain_only=True)
            _text(confirm["deny"], LIMITS["confirm_button"], plain_only=True)
    elif element["type"] in ("plain_text", "mrkdwn"):
        _text(element, TEXT_OBJECT)
    else:
        assert len(element.get("action_id", "")) <= LIMITS["action_id"]


def assert_within_limits(message: list[dict[str, Any]]) -> None:
    """Walk a message's blocks and check every Block Kit limit the renderer promises."""
    assert 1 <= len(message) <= LIMITS["message_blocks"], len(message)
    block_ids = [block["block_id"] for block in message if "block_id" in block]
    assert len(block_ids) == len(set(block_ids)), "block_id must be unique in a message"
    for block in message:
        assert len(block.get("block_id", "")) <= LIMITS["block_id"]
        kind = block["type"]
        if kind == "header":
            _text(block["text"], LIMITS["header"], plain_only=True)
        elif kind == "section":
            assert "text" in block or "fields" in block
            if "text" in block:
                _text(block["text"], LIMITS["section_text"])
            fields = block.get("fields", [])
            assert len(fields) <= LIMITS["fields"]
            for field in fields:
                _text(field, LIMITS["field"])
            if "accessory" in block:
                _element(block["accessory"])
        elif kind == "actions":
            elements = block["elements"]
            assert 1 <= len(elements) <= LIMITS["actions_elements"]
            action_ids = [element["action_id"] for element in elements]
            assert len(action_ids) == len(set(action_ids)), "action_id must be unique in a block"
            for element in elements:
                _element(element)
        elif kind == "context":
            assert 1 <= len(block["elements"]) <= LIMITS["context_elements"]
            for element in block["elements"]:
                _element(element)
        elif kind == "input":
            _text(block["label"], 2000, plain_only=True)
            _element(block["element"])
        else:
            assert kind == "divider", kind


_OURS = re.compile(r"<@[UW][A-Z0-9]+>|<https?://[^\s<>|&]+\|open in console>")
_ENTITY = re.compile(r"&(amp|lt|gt);")


def assert_no_markup_injection(text: str) -> None:
    """Only the renderer's own mentions and console link may use `<...>`; `&` is an entity."""
    rest = _ENTITY.sub("", _OURS.sub("", text))
    assert "<" not in rest and ">" not in rest and "&" not in rest, text


def mrkdwn_texts(message: list[dict[str, Any]]) -> list[str]:
    """Every mrkdwn text in a message: the strings Slack parses for mentions and links."""
    found: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if node.get("type") == "mrkdwn":
                found.append(node["text"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(message)
    return found


def buttons(message: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        element
        for block in message
        if block["type"] == "actions"
        for element in block["elements"]
        if element["type"] == "button"
    ]


# --- fixtures -----------------------------------------------------------------------------


def xid_card(**changes: Any) -> CardView:
    """INC-7: GPU 5 on gpu-node-02 reported XID 79 (fell off the bus)."""
    steps = (
        StepView(
            step="diagnose",
            title="Read nvidia-smi and dmesg",
            state="succeeded",
            kind="action",
            run_id=101,
            action="gpu.diagnose",
            risk="read",
            params={"node": "gpu-node-02"},
            summary="XID 79 on GPU 5 (00000000:9A:00.0)",
        ),
        StepView(
            step="cordon",
            title="Cordon gpu-node-02",
            state="succeeded",
            kind="action",
            run_id=102,
            action="k8s.cordon",
            risk="change",
            params={"node": "gpu-node-02"},
            approvals=1,
            approvals_required=1,
            approvers=("slack:UBOB0001",),
            summary="cordoned",
        ),
        StepView(
            step="drain",
            title="Drain gpu-node-02",
            state="failed",
            kind="action",
            run_id=103,
            action="k8s.drain",
            risk="change",
            params={"node": "gpu-node-02", "timeout": "10m"},
            summary="PDB blocks eviction of train-7b-0",
        ),
        StepView(
            step="power_cycle",
            title="Power cycle gpu-node-02",
            state="awaiting_approval",
            kind="action",
            run_id=104,
            action="bmc.power_cycle",
            risk="disruptive",
            params={"node": "gpu-node-02", "bmc": "10.0.0.12"},
            approvals=1,
            approvals_required=2,
            approvers=("slack:UALICE01",),
            expires_at=NOW + timedelta(minutes=12),
            summary="waiting for a second approver",
            targets=("gpu-node-02 (BMC 10.0.0.12)",),
        ),
        StepView(
            step="tell_users",
            title="Tell the training team",
            state="skipped",
            kind="manual",
            run_id=105,
        ),
        StepView(step="verify", title="Verify GPUs", state="not_reached", kind="action"),
    )
    view = CardView(
        number=7,
        ref="INC-7",
        title="GPU 5 XID 79 on gpu-node-02",
        severity="critical",
        status="open",
        opened_at=OPENED,
        now=NOW,
        facts={"node": "gpu-node-02", "gpu": "5", "xid": "79"},
        runbook="gpu-xid v3",
        steps=steps,
        alerts_firing=1,
        alerts_total=2,
        alert_names=("GpuXidError", "GpuFellOffBus"),
        nodes=("gpu-node-02",),
        url="https://bot.example.com/incidents/7",
    )
    return replace(view, **changes)


def step(index: int, state: str = "not_reached", **changes: Any) -> StepView:
    base = StepView(
        step=f"s{index}",
        title=f"Step {index}: check GPU {index % 8} on gpu-node-{index:02d} " + "x" * 80,
        state=state,
        kind="action",
        run_id=1000 + index,
        action="gpu.reset",
        risk="disruptive",
        params={"node": f"gpu-node-{index:02d}", "gpu": index % 8, "note": "n" * 300},
        approvals_required=2,
        summary="s" * 500,
        targets=tuple(f"gpu-node-{n:02d} GPU {g}" for n in range(3) for g in range(8)),
    )
    return replace(base, **changes)


def section_lines(message: list[dict[str, Any]]) -> list[str]:
    return [
        line
        for block in message
        if block["type"] == "section" and "text" in block
        for line in block["text"]["text"].split("\n")
    ]


# --- the card -------------------------------------------------------------------------------


def test_xid_card_leads_with_the_decision_then_facts_then_the_rest_in_one_line() -> None:
    text, message = blocks.card(xid_card())

    assert text == (
        "🔴 INC-7 critical: GPU 5 XID 79 on gpu-node-02 (open) · waiting for a decision: "
        "Power cycle gpu-node-02"
    )
    assert [block["type"] for block in message] == [
        "header",
        "context",
        "section",
        "actions",
        "section",
        "context",
        "actions",
        "actions",
    ]
    assert message[0]["text"]["text"] == "🔴 INC-7 critical: GPU 5 XID 79 on gpu-node-02"
    status = message[1]["elements"][0]["text"]
    # The header names the node already: the status line does not say it again.
    assert status == (
        "*Open* · since 03:00:00 UTC (42m) · no owner · 🔔 1/2 alerts firing: GpuXidError, "
        "GpuFellOffBus · <https://bot.example.com/incidents/7|open in console>"
    )
    assert message[2]["text"]["text"] == (
        "⏳ *Waiting for a decision: Power cycle gpu-node-02*\n"
        "`bmc.power_cycle` node=gpu-node-02, bmc=10.0.0.12 · disruptive: two people\n"
        "approved by <@UALICE01>, waiting for one more\n"
        "expires in 12m"
    )
    assert message[3]["block_id"] == "step:104"
    assert [field["text"] for field in message[4]["fields"]] == [
        "*node*\ngpu-node-02",
        "*gpu*\n5",
        "*xid*\n79",
    ]
    rest = [element["text"] for element in message[5]["elements"]]
    assert rest == [
        "📖 gpu-xid v3: ✅ Read nvidia-smi and dmesg · ✅ Cordon gpu-node-02 · "
        "❌ Drain gpu-node-02 (failed: PDB blocks eviction of train-7b-0)",
        "⏭ 1 step skipped: Tell the training team · 1 not reached yet",
        "🧵 the full log is in the thread",
    ]
    # The failed drain may be proposed again; the skipped step after the waiting one is
    # decided again in its turn.
    assert [(b["action_id"], b["text"]["text"]) for b in message[6]["elements"]] == [
        ("step.repropose", "Propose again: Drain gpu-node-02"),
    ]
    assert [b["action_id"] for b in message[7]["elements"]] == [
        "incident.ack",
        "incident.own",
        "incident.resolve",
    ]
    assert_within_limits(message)


def test_every_button_value_is_an_id_never_parameters() -> None:
    view = xid_card(steps=(*xid_card().steps, step(1, "awaiting_approval", risk="change")))
    _, message = blocks.card(view)

    values = [button["value"] for button in buttons(message)]
    assert len(values) == 6
    assert {int(value) for value in values} == {104, 103, 7}
    assert not any("gpu-node" in value or "=" in value for value in values)


def test_disruptive_approve_is_danger_and_confirms_the_exact_targets() -> None:
    _, message = blocks.card(xid_card())

    approve, skip = next(b for b in message if b.get("block_id") == "step:104")["elements"]
    assert (approve["action_id"], approve["style"], approve["value"]) == (
        "step.approve",
        "danger",
        "104",
    )
    confirm = approve["confirm"]
    assert confirm["title"]["text"] == "Power cycle gpu-node-02: gpu-node-02 (BMC 10.0.0.12)?"
    assert confirm["text"]["text"] == (
        "bmc.power_cycle on gpu-node-02 (BMC 10.0.0.12). Disruptive: approval 2 of 2."
    )
    assert (confirm["confirm"]["text"], confirm["deny"]["text"]) == ("Yes, approve", "Cancel")
    assert (skip["action_id"], skip["value"], "confirm" in skip) == ("step.skip", "104", False)


def test_change_step_approves_in_one_tap_and_a_later_waiting_step_waits_its_turn() -> None:
    change = step(1, "awaiting_approval", risk="change", approvals_required=1)
    manual = StepView(
        step="call", title="Call the vendor", state="awaiting_approval", kind="manual", run_id=9
    )
    _, message = blocks.card(xid_card(steps=(change, manual)))

    by_block = {b["block_id"]: b["elements"] for b in message if b["type"] == "actions"}
    assert set(by_block) == {"step:1001", "incident:7"}, "one decision at a time"
    approve, _ = by_block["step:1001"]
    assert (approve["text"]["text"], approve["style"], "confirm" in approve) == (
        "Approve",
        "primary",
        False,
    )
    rest = next(b for b in message if b["type"] == "context" and "📖" in str(b))
    assert "⏳ Call the vendor (waiting for someone to do it and mark it done)" in str(rest)
    assert_within_limits(message)


def test_manual_step_is_done_or_skipped_and_shows_what_to_do() -> None:
    manual = StepView(
        step="call",
        title="Call the vendor",
        state="awaiting_approval",
        kind="manual",
        run_id=9,
        summary="Open a case with the vendor <!here>",
    )
    _, message = blocks.card(xid_card(steps=(manual,)))

    decision = next(b for b in message if b["type"] == "section" and "⏳" in str(b))
    assert decision["text"]["text"] == (
        "⏳ *Waiting for a decision: Call the vendor*\n"
        "waiting for someone to do it and mark it done\n"
        "📋 Open a case with the vendor &lt;!here&gt;"
    )
    by_block = {b["block_id"]: b["elements"] for b in message if b["type"] == "actions"}
    assert [(b["action_id"], b["text"]["text"]) for b in by_block["step:9"]] == [
        ("step.done", "Done"),
        ("step.skip", "Skip"),
    ]


def test_skip_of_a_step_others_depend_on_asks_why_and_says_what_it_also_skips() -> None:
    cordon = StepView(
        step="cordon",
        title="Cordon the node",
        state="awaiting_approval",
        kind="action",
        run_id=21,
        action="k8s.cordon",
        risk="change",
        params={"node": "gpu-node-02"},
        approvals_required=1,
        dependents=("drain", "reset", "power_cycle"),
        dependent_titles=("Drain the node", "Reset the GPU", "Power cycle the node"),
    )
    _, message = blocks.card(xid_card(steps=(cordon,)))

    decision = next(b for b in message if b["type"] == "section" and "⏳" in str(b))
    assert decision["text"]["text"].endswith(
        "Skipping it also skips: Drain the node, Reset the GPU, Power cycle the node"
    )
    actions = next(b for b in message if b.get("block_id") == "step:21")["elements"]
    assert [(b["action_id"], b["text"]["text"]) for b in actions] == [
        ("step.approve", "Approve"),
        ("step.skip_why", "Skip…"),
    ]
    modal = blocks.skip_modal(21, cordon.title, cordon.dependent_titles)
    assert (modal["callback_id"], modal["private_metadata"]) == ("step.skip", "21")
    assert modal["blocks"][0]["text"]["text"] == (
        "*Skip Cordon the node?*\nThis also skips 3 later steps that need it: Drain the node, "
        "Reset the GPU, Power cycle the node."
    )
    assert (modal["blocks"][1]["block_id"], modal["blocks"][1]["optional"]) == ("note", False)
    assert len(modal["title"]["text"]) <= mrkdwn.MODAL_TITLE
    assert_within_limits(modal["blocks"])


def test_two_person_step_names_the_second_line_and_offers_to_page_it_now() -> None:
    power = replace(xid_card().steps[3], summary="")
    second = SecondLineView(names=("Bob",), level=2, paged_at=datetime(2026, 11, 30, 3, 14, 7))
    _, message = blocks.card(xid_card(steps=(power,), second_line=second))

    decision = next(b for b in message if b["type"] == "section" and "⏳" in str(b))
    assert (
        "approved by <@UALICE01>, waiting for one more (second line: Bob, paged 03:14:07 UTC)"
        in decision["text"]["text"]
    )
    actions = next(b for b in message if b.get("block_id") == "step:104")["elements"]
    assert [(b["action_id"], b["value"]) for b in actions] == [
        ("step.approve", "104"),
        ("step.skip", "104"),
        ("incident.page_second", "7"),
    ]
    assert actions[2]["text"]["text"] == "Page the second line now"
    nobody = replace(power, approvals=0, approvers=())
    _, fresh = blocks.card(xid_card(steps=(nobody,), second_line=second))
    assert "incident.page_second" not in str(fresh), "nobody approved yet: nothing to page for"


def test_running_domain_step_shows_counts_and_a_grid_never_a_line_per_node() -> None:
    nodes = tuple(f"a-{i:02d}" for i in range(1, 33))
    states = ("succeeded",) * 12 + ("running",) * 4 + ("failed",) + ("left",) * 15
    drain = StepView(
        step="drain",
        title="Drain the row",
        state="running",
        kind="action",
        run_id=31,
        action="k8s.drain",
        risk="change",
        each=EachView(
            set="32 nodes of row/a",
            total=32,
            succeeded=12,
            running=4,
            failed=1,
            left=15,
            failed_nodes=("a-17",),
            nodes=nodes,
            count=32,
            states=states,
        ),
        summary="k8s.drain on 32 nodes of row/a: needs one person naming the count (32) "
        "before 03:20 UTC",
    )
    view = xid_card(steps=(drain,), domain="row/a", nodes=nodes, title="Hot row a")
    _, message = blocks.card(view)

    running = next(b for b in message if b["type"] == "section" and "🔄" in str(b))
    assert running["text"]["text"] == (
        "🔄 *Running: Drain the row*\n"
        "`k8s.drain` on 32 nodes of row/a · a change\n"
        "done 12 · running 4 · failed 1 · left 15\n"
        "```■■■■■■■■■■■■▶▶▶▶\n✖□□□□□□□□□□□□□□□```\n"
        "■ done · ▶ running · ✖ failed · □ left\n"
        "failed: a-17"
    )
    assert "needs one person" not in str(message)
    status = message[1]["elements"][0]["text"]
    assert "row/a · 32 nodes" in status and "a-05" not in str(message)
    assert [b["action_id"] for b in buttons(message)][0] == "step.stop"
    assert_within_limits(message)


def test_acknowledge_is_offered_only_while_open() -> None:
    _, message = blocks.card(
        xid_card(status="acknowledged", acknowledged_by="slack:UALICE01", owner="bob")
    )

    incident = next(b for b in message if b.get("block_id") == "incident:7")
    assert [b["action_id"] for b in incident["elements"]] == ["incident.own", "incident.resolve"]
    status = message[1]["elements"][0]["text"]
    assert "owner bob" in status and "acked by <@UALICE01>" in status


def test_resolved_card_has_no_buttons_and_says_when_and_how() -> None:
    view = xid_card(
        status="resolved",
        resolved_at=OPENED + timedelta(hours=3, minutes=5),
        disposition="Replaced GPU 5 & returned node",
        owner="slack:UALICE01",
    )
    text, message = blocks.card(view)

    assert text.endswith("(resolved)")
    assert buttons(message) == []
    assert message[-1]["text"]["text"] == (
        "✅ *Resolved* at 2026-11-30 06:05 UTC, 3h 05m after it opened · owner <@UALICE01>\n"
        "*Disposition:* Replaced GPU 5 &amp; returned node"
    )


def test_card_without_runbook_says_so() -> None:
    _, message = blocks.card(xid_card(runbook=None, steps=(), facts={}))

    assert [b["type"] for b in message] == ["header", "context", "context", "actions"]
    assert "No runbook matched" in message[2]["elements"][0]["text"]


def test_huge_incident_stays_within_every_limit_and_keeps_the_decision_first() -> None:
    view = xid_card(
        title="GPU fell off the bus " * 20,
        facts={f"gpu{i}": f"XID 79 at 00000000:{i:02X}:00.0 " * 30 for i in range(64)},
        alert_names=tuple(f"GpuXid{i}AlertWithAVeryLongName" for i in range(40)),
        nodes=tuple(f"gpu-node-{i:02d}" for i in range(64)),
        alerts_firing=40,
        alerts_total=64,
        steps=tuple(
            step(i, "awaiting_approval" if i in (3, 4) else "succeeded") for i in range(35)
        ),
    )
    text, message = blocks.card(view)

    assert_within_limits(message)
    assert len(text) <= 400
    assert message[3]["block_id"] == "step:1003", "the decision's buttons come fourth"
    facts = next(b for b in message if "fields" in b)
    assert len(facts["fields"]) == 10 and "*55 more*" in facts["fields"][-1]["text"]
    status = message[1]["elements"][0]["text"]
    assert "and 3" in status and "more" in status
    assert {b["block_id"] for b in message if b["type"] == "actions"} == {
        "step:1003",
        "incident:7",
    }


def test_runbook_with_sixty_waiting_steps_shows_one_decision_in_a_short_card() -> None:
    view = xid_card(steps=tuple(step(i, "awaiting_approval") for i in range(60)))
    _, message = blocks.card(view)

    assert_within_limits(message)
    assert len(message) <= 10
    shown = [b["block_id"] for b in message if b.get("block_id", "").startswith("step:")]
    assert shown == ["step:1000"]
    assert message[-1]["block_id"] == "incident:7"


INJECTIONS = ("<!channel>", "<https://evil.example|click>", "AT&T", "<@U999>", "a\n> quote")


@pytest.mark.parametrize("evil", INJECTIONS)
def test_alert_text_cannot_mention_link_or_break_lines(evil: str) -> None:
    awaiting = replace(
        xid_card().steps[3],
        title=evil,
        summary=evil,
        params={"node": evil},
        targets=(evil,),
        approvers=(evil, "slack:U1><!channel>"),
    )
    view = xid_card(
        title=evil,
        facts={evil: evil},
        alert_names=(evil,),
        nodes=(evil,),
        owner=evil,
        acknowledged_by="slack:UX|<!here>",
        steps=(awaiting,),
    )
    text, message = blocks.card(view)
    post = blocks.thread_message([LogLine(1, NOW, evil, "alert.fired", evil)])

    for rendered in [text, *mrkdwn_texts(message), post.text, *mrkdwn_texts(post.blocks)]:
        assert_no_markup_injection(rendered)
    # The header is plain_text, which Slack never parses: shown as typed, harmless.
    assert message[0]["text"]["type"] == "plain_text"
    assert escape(evil.replace("\n", " ")) in text
    assert_within_limits(message)


def test_escaped_text_is_clipped_between_entities_never_inside_one() -> None:
    for width in range(1, 7):
        line = LogLine(1, NOW, "alice", "note", "x" * width + "&" * 5000)
        text = blocks.thread_message([line]).blocks[0]["text"]["text"]

        assert len(text) <= 3000 and text.endswith("&amp;…")
        assert_no_markup_injection(text)


# --- elapsed time --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("delta", "shown"),
    [
        (timedelta(seconds=-5), "0s"),
        (timedelta(seconds=45), "45s"),
        (timedelta(minutes=42, seconds=59), "42m"),
        (timedelta(hours=3, minutes=5), "3h 05m"),
        (timedelta(hours=23, minutes=59), "23h 59m"),
        (timedelta(days=2, hours=4, minutes=30), "2d 04h"),
    ],
)
def test_elapsed_reads_at_a_glance(delta: timedelta, shown: str) -> None:
    assert blocks.elapsed(delta) == shown


# --- thread posts -----------------------------------------------------------------------------


def test_thread_posts_carry_200_long_entries_in_order_without_losing_any() -> None:
    entries = [
        LogLine(
            seq=i,
            at=OPENED + timedelta(seconds=i),
            actor="runbook-bot",
            type="step.output",
            summary=f"entry {i:03d} " + "<ok & fine> " * 120,
        )
        for i in range(200)
    ]
    remaining: list[LogLine] = entries
    seen: list[str] = []
    posts = 0
    while remaining:
        post = blocks.thread_message(remaining)
        assert post.consumed >= 1
        assert_within_limits(post.blocks)
        seen.extend(section_lines(post.blocks))
        remaining = remaining[post.consumed :]
        posts += 1

    assert posts > 1
    expected = [
        f"03:{i // 60:02d}:{i % 60:02d} runbook-bot — entry {i:03d} "
        + " ".join(["&lt;ok &amp; fine&gt;"] * 120)
        for i in range(200)
    ]
    assert seen == expected


def test_thread_post_mentions_the_actor_never_an_id_in_the_summary_in_utc() -> None:
    from datetime import timezone

    tokyo = timezone(timedelta(hours=9))
    line = LogLine(
        seq=3,
        at=datetime(2026, 11, 30, 13, 4, 5, tzinfo=tokyo),
        actor="slack:U0123ABC",
        type="step.approved",
        summary="approved power cycle (1/2), asked slack:U0456DEF & <!here>",
    )
    text, message, consumed = blocks.thread_message([line])

    assert consumed == 1
    assert message[0]["text"]["text"] == (
        "04:04:05 <@U0123ABC> — approved power cycle (1/2), asked slack:U0456DEF &amp; "
        "&lt;!here&gt;"
    )
    assert text == message[0]["text"]["text"]


def test_thread_message_of_nothing_consumes_nothing() -> None:
    assert blocks.thread_message([]) == blocks.ThreadPost("", [], 0)


def test_huge_entries_are_clipped_to_a_section_and_still_sent() -> None:
    post = blocks.thread_message([LogLine(1, NOW, "alice", "note", "x" * 10_000)] * 10)

    assert 1 <= post.consumed < 10
    assert_within_limits(post.blocks)
    assert len(post.blocks) == post.consumed
    assert all(block["text"]["text"].endswith("x…") for block in post.blocks)


# --- modal, list, ephemeral --------------------------------------------------------------------


@pytest.mark.parametrize(("severity", "optional"), [("critical", False), ("warning", True)])
def test_resolve_modal_requires_a_disposition_only_for_critical(
    severity: str, optional: bool
) -> None:
    modal = blocks.resolve_modal(xid_card(severity=severity, ref="INC-123456789012345"))

    assert (modal["type"], modal["callback_id"], modal["private_metadata"]) == (
        "modal",
        "incident.resolve",
        "7",
    )
    assert len(modal["title"]["text"]) <= 24
    field = modal["blocks"][1]
    assert (field["block_id"], field["element"]["action_id"], field["optional"]) == (
        "disposition",
        "text",
        optional,
    )
    assert field["element"]["type"] == "plain_text_input" and field["element"]["multiline"]
    assert_within_limits(modal["blocks"])


def test_done_modal_carries_the_run_id_and_asks_for_a_note() -> None:
    modal = blocks.done_modal(105, "tell_users", "call slack:U0123ABC <!here>")

    assert (modal["callback_id"], modal["private_metadata"]) == ("step.done", "105")
    field = modal["blocks"][1]
    assert (field["block_id"], field["element"]["action_id"], field["optional"]) == (
        "note",
        "text",
        False,
    )
    # A summary is text (a runbook's, with alert values in it): no id in it is a mention.
    assert modal["blocks"][0]["text"]["text"] == "*tell_users*\ncall slack:U0123ABC &lt;!here&gt;"
    assert_within_limits(modal["blocks"])


def test_incident_list_shows_one_line_each_and_counts_the_rest() -> None:
    views = [
        xid_card(number=i, ref=f"INC-{i}", title=f"<!channel> node {i}", severity="warning")
        for i in range(1, 61)
    ]
    text, message = blocks.incident_list(views)

    assert_within_limits(message)
    assert len(message) == 50
    assert message[0]["text"]["text"] == (
        "🟠 *INC-1* warning · open · &lt;!channel&gt; node 1 · 42m"
        " · ⏳ decision waiting: Power cycle gpu-node-02"
    )
    assert message[-1]["text"]["text"] == "… and 11 more"
    assert text.startswith("60 incidents: INC-1, INC-2")
    assert blocks.incident_list([]) == ("No incidents.", [mrkdwn.section("No incidents.")])


def test_ephemeral_refusal_is_escaped() -> None:
    text, message = blocks.ephemeral("you need the responder role <!channel> & more")

    assert text == "you need the responder role &lt;!channel&gt; &amp; more"
    assert message[0]["text"]["text"] == text
    assert_within_limits(message)


# --- property --------------------------------------------------------------------------------

anything = st.text(max_size=4000)


@settings(max_examples=60, deadline=None)
@given(
    title=anything,
    facts=st.dictionaries(st.text(max_size=300), anything, max_size=14),
    summaries=st.lists(anything, min_size=1, max_size=40),
    actor=st.text(max_size=100),
    awaiting=st.sets(st.integers(0, 39), max_size=30),
)
def test_any_text_stays_within_limits_and_escaped(
    title: str, facts: dict[str, str], summaries: list[str], actor: str, awaiting: set[int]
) -> None:
    steps = tuple(
        step(
            i,
            "awaiting_approval" if i in awaiting else "running",
            title=summary[:500],
            summary=summary,
            params={"x": summary},
            targets=(summary,),
            approvers=(actor,),
            approvals=1,
            dependents=("later",),
            dependent_titles=(summary,),
        )
        for i, summary in enumerate(summaries)
    )
    second = SecondLineView(names=(actor, title[:100]), level=2, paged_at=NOW)
    view = xid_card(
        title=title,
        facts=facts,
        steps=steps,
        owner=actor,
        alert_names=(title,),
        second_line=second,
    )
    text, message = blocks.card(view)
    lines = [LogLine(i, NOW, actor, "note", summary) for i, summary in enumerate(summaries)]
    post = blocks.thread_message(lines)

    assert_within_limits(message)
    assert_within_limits(post.blocks)
    assert 1 <= post.consumed <= len(lines)
    assert_within_limits(blocks.resolve_modal(view)["blocks"])
    for rendered in [text, *mrkdwn_texts(message), post.text, *mrkdwn_texts(post.blocks)]:
        assert_no_markup_injection(rendered)


@pytest.mark.parametrize("evil", INJECTIONS)
def test_second_line_names_and_dependent_titles_cannot_mention_or_link(evil: str) -> None:
    waiting = replace(
        xid_card().steps[3],
        dependents=("drain",),
        dependent_titles=(evil,),
        approvers=("slack:UALICE01",),
    )
    second = SecondLineView(names=(evil, "slack:U0CEO12345"), level=2, paged_at=NOW)
    _, message = blocks.card(xid_card(steps=(waiting,), second_line=second))

    texts = mrkdwn_texts(message)
    for rendered in texts:
        assert_no_markup_injection(rendered)
    assert any("<@UALICE01>" in text for text in texts), "the approver is still mentioned"
    assert not any("<@U0CEO12345>" in text for text in texts), "a name never mentions"
    modal = blocks.skip_modal(104, evil, (evil,))
    for rendered in mrkdwn_texts(modal["blocks"]):
        assert_no_markup_injection(rendered)

"""The shipped node-down runbook end to end: a NotReady node, looked at through its BMC
first, cordoned, brought back (power cycle by two people when hung, power on when off),
diagnosed at level 3 and returned only after the burn-in is marked done. A first read
that contradicts the alert is read again before anything is decided; a BMC that refuses
the bot's login holds back only the power steps, until its credentials are fixed."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from bot.chat import cards
from bot.chat.slack import blocks
from tests.runbooks.drive import Drive
from tests.sim.waiting import eventually

NODE = "gpu-node-02"
OUT_OF_SERVICE = "node.kubernetes.io/out-of-service"

pytestmark = [pytest.mark.timeout(120), pytest.mark.parametrize("backend", ["sqlite"])]


def _fire(drive: Drive) -> int:
    return drive.fire(alertname="KubeNodeNotReady", host=NODE, node=NODE)


def _bmc_first(drive: Drive, number: int, power: str) -> None:
    """The node's status, the BMC's power state and its SEL ran without people, before
    anything changed the node."""
    rows = drive.rows(number)
    for step in ("node_status", "power", "sel"):
        assert (rows[step].state, rows[step].actor, rows[step].approvals_required) == (
            "succeeded",
            "runbook-bot",
            0,
        ), step
    results = drive.results(number)
    assert results["node_status"]["ready"] != "True"
    assert results["power"]["power"] == power
    assert rows["bmc_only"].state == "skipped"
    assert drive.waiting(number) == ("cordon", 1)
    assert not drive.node(NODE).unschedulable


def _recover_and_return(drive: Drive, number: int, demanded: dict[str, int]) -> None:
    """From the node Ready again: drain, diag level 3, burn-in, uncordon by two people."""
    assert drive.waiting(number) == ("vendor", 0)
    drive.skip(number, "vendor", "alice", "first crash of this machine")
    assert drive.follow(number, {"drain": ("bob",), "diag": ("carol",)}) == ["drain", "diag"]
    rows = drive.rows(number)
    assert rows["diag"].params["level"] == 3 and drive.results(number)["diag"]["passed"]
    assert rows["diag_failed"].state == "skipped"
    assert drive.waiting(number) == ("burn_in", 0)
    assert rows["uncordon"].state == "not_reached"  # not before the burn-in
    assert drive.node(NODE).unschedulable

    drive.done(number, "burn_in", "carol", "2 h of gpu-burn, no XID, temperatures flat")
    assert drive.waiting(number) == ("uncordon", 2)
    drive.approve(number, "uncordon", "alice")
    assert drive.node(NODE).unschedulable  # one person is not enough
    drive.approve(number, "uncordon", "bob")

    node = drive.node(NODE)
    assert node.ready and not node.unschedulable
    assert drive.types(number)[-1] == "runbook.finished"
    assert drive.demanded(number) == demanded
    assert drive.verified(number)


def test_a_hung_node_is_power_cycled_by_two_people_diagnosed_and_burnt_in_before_return(
    drive: Drive,
) -> None:
    drive.sim.cluster.set_node_ready(NODE, False)  # the kubelet stopped; the power is on
    number = _fire(drive)
    _bmc_first(drive, number, power="on")

    drive.approve(number, "cordon", "alice")
    assert drive.node(NODE).unschedulable
    states = drive.states(number)
    assert states["pods"] == "succeeded" and states["out_of_service"] == "skipped"
    assert drive.waiting(number) == ("checkpoints", 0)
    drive.done(number, "checkpoints", "bob", "trainer resumed on gpu-node-04 from step 41000")
    assert drive.states(number)["power_on"] == "skipped"
    assert drive.waiting(number) == ("power_cycle", 2)

    drive.approve(number, "power_cycle", "alice")
    assert drive.cycles(NODE) == 0 and not drive.node(NODE).ready
    drive.approve(number, "power_cycle", "bob")

    assert drive.cycles(NODE) == 1
    assert drive.states(number)["wait_ready"] == "succeeded" and drive.node(NODE).ready
    _recover_and_return(
        drive,
        number,
        {
            "node_status": 0,
            "power": 0,
            "sel": 0,
            "cordon": 1,
            "pods": 0,
            "power_cycle": 2,
            "wait_ready": 0,
            "drain": 1,
            "diag": 1,
            "uncordon": 2,
        },
    )


def test_a_powered_off_node_is_marked_out_of_service_by_two_people_and_powered_on(
    drive: Drive,
) -> None:
    drive.sim.cluster.power(NODE, "ForceOff")
    eventually(lambda: not drive.node(NODE).ready, what=f"{NODE} to go NotReady")
    number = _fire(drive)
    _bmc_first(drive, number, power="off")

    drive.approve(number, "cordon", "alice")
    assert drive.waiting(number) == ("out_of_service", 2)
    drive.approve(number, "out_of_service", "alice", "carol")
    assert any(t["key"] == OUT_OF_SERVICE for t in drive.node(NODE).taints)
    drive.done(number, "checkpoints", "bob", "trainer resumed from step 41000")
    assert drive.waiting(number) == ("remove_out_of_service", 1)
    drive.approve(number, "remove_out_of_service", "bob")
    assert not any(t["key"] == OUT_OF_SERVICE for t in drive.node(NODE).taints)

    assert drive.states(number)["power_cycle"] == "not_reached"
    assert drive.waiting(number) == ("power_on", 1)
    drive.approve(number, "power_on", "carol")

    states = drive.states(number)
    assert states["power_cycle"] == "skipped" and states["wait_ready"] == "succeeded"
    assert drive.node(NODE).ready and drive.cycles(NODE) == 1
    _recover_and_return(
        drive,
        number,
        {
            "node_status": 0,
            "power": 0,
            "sel": 0,
            "cordon": 1,
            "pods": 0,
            "out_of_service": 2,
            "remove_out_of_service": 1,
            "power_on": 1,
            "wait_ready": 0,
            "drain": 1,
            "diag": 1,
            "uncordon": 2,
        },
    )


def _later(drive: Drive, seconds: float) -> None:
    """Move the incident's clock on (a re-read comes due), then let the worker work."""
    drive.rig.clock.advance(timedelta(seconds=seconds))
    drive.settle()


def _card_lines(drive: Drive, number: int) -> str:
    """The card's text as Slack shows it."""
    with drive.rig.db.session() as session:
        view = cards.card(session, number, drive.rig.clock.now())
    _, rendered = blocks.card(view)
    texts = [str(block.get("text", {}).get("text", "")) for block in rendered]
    texts += [
        str(element.get("text", ""))
        for block in rendered
        if block["type"] == "context"
        for element in block["elements"]
    ]
    return "\n".join(texts)


def test_a_not_ready_alert_read_before_the_node_went_down_is_read_again_then_worked(
    drive: Drive,
) -> None:
    # Alertmanager's alert is ahead of what the API shows: the node still reads Ready.
    number = _fire(drive)
    runs = drive.rig.all_runs(number, "node_status")
    assert [(r.attempt, r.state) for r in runs] == [(1, "succeeded"), (2, "approved")]
    assert runs[0].result is not None and runs[0].result["ready"] == "True"
    reached = {step for step, state in drive.states(number).items() if state != "not_reached"}
    assert reached == {"node_status"}  # nothing is decided on that read
    assert "did not show the node NotReady, as the alert says" in _card_lines(drive, number)

    drive.sim.cluster.power(NODE, "ForceOff")  # now it goes down
    eventually(lambda: not drive.node(NODE).ready, what=f"{NODE} to go NotReady")
    _later(drive, 30)

    runs = drive.rig.all_runs(number, "node_status")
    assert [(r.attempt, r.state) for r in runs] == [(1, "succeeded"), (2, "succeeded")]
    assert drive.results(number)["node_status"]["ready"] != "True"
    assert drive.results(number)["power"]["power"] == "off"
    assert "step.unexpected" not in drive.types(number)
    reread = next(e for e in drive.rig.log(number) if e.data.get("reread_of") == runs[0].id)
    assert f"({NODE}: Ready=True" in reread.summary
    assert drive.waiting(number) == ("cordon", 1)

    drive.approve(number, "cordon", "alice")
    assert drive.waiting(number) == ("out_of_service", 2)
    drive.skip(number, "out_of_service", "alice", "no StatefulSets on it")
    drive.done(number, "checkpoints", "bob", "trainer resumed from step 41000")
    assert drive.waiting(number) == ("power_on", 1)
    drive.approve(number, "power_on", "carol")
    assert drive.node(NODE).ready and drive.cycles(NODE) == 1


def test_a_not_ready_alert_on_a_node_that_stays_ready_is_worked_as_down_saying_what_it_saw(
    drive: Drive,
) -> None:
    number = _fire(drive)
    for _ in range(3):
        _later(drive, 30)

    runs = drive.rig.all_runs(number, "node_status")
    assert [r.state for r in runs] == ["succeeded"] * 4
    summary = drive.rows(number)["node_status"].summary
    assert summary.startswith(f"{NODE}: Ready=True")
    assert (
        " — expected the node NotReady, as the alert says, but 4 reads over 1m30s did not "
        "show it" in summary
    )
    assert drive.types(number).count("step.unexpected") == 1
    assert "4 reads over 1m30s did not show it" in _card_lines(drive, number)
    # The alert is believed: a flapping node is taken out like a down one.
    assert drive.results(number)["power"]["power"] == "on"
    assert drive.waiting(number) == ("cordon", 1)
    assert drive.rows(number)["cordon"].params["reason"] == "node down: KubeNodeNotReady"


def test_a_bmc_alert_on_a_ready_node_whose_bmc_answers_says_so_and_touches_nothing(
    drive: Drive,
) -> None:
    number = drive.fire(alertname="BMCUnreachable", host=NODE, node=NODE)

    assert [r.attempt for r in drive.rig.all_runs(number, "node_status")] == [1]
    assert drive.waiting(number) == ("bmc_only", 0)
    drive.done(number, "bmc_only", "alice", "exporter's scrape timed out; raised it")

    states = drive.states(number)
    assert states["cordon"] == "skipped" and states["bmc_unreachable"] == "skipped"
    assert not drive.node(NODE).unschedulable and drive.cycles(NODE) == 0
    assert drive.types(number)[-1] == "runbook.finished"


def test_a_wrong_bmc_password_holds_back_only_the_power_steps_until_it_is_fixed(
    drive: Drive,
) -> None:
    password = drive.rig.settings.bmc.credentials["default"].password_file
    assert isinstance(password, Path)
    right = password.read_text(encoding="utf-8")
    password.write_text("Wrong-Pw-0d41\n", encoding="utf-8")
    drive.sim.cluster.set_node_ready(NODE, False)  # hung, the power on
    number = _fire(drive)

    rows, results = drive.rows(number), drive.results(number)
    assert (rows["power"].state, results["power"]["error"]) == ("failed", "credentials")
    assert "refused the login of credentials profile 'default'" in rows["power"].summary
    assert rows["sel"].state == "failed" and rows["bmc_only"].state == "skipped"
    assert "step.not_retried" in drive.types(number)  # a refused login is not retried
    card = _card_lines(drive, number)
    assert "refused the login of credentials profile 'default'" in card
    # The cordon and the workload steps are not held back.
    assert drive.waiting(number) == ("cordon", 1)
    drive.approve(number, "cordon", "alice")
    assert drive.node(NODE).unschedulable
    drive.done(number, "checkpoints", "bob", "trainer resumed on gpu-node-04")
    # The power waits for the credentials.
    assert drive.waiting(number) == ("bmc_credentials", 0)
    assert "Fix the BMC credentials" in _card_lines(drive, number)
    states = drive.states(number)
    assert states["power_on"] == states["power_cycle"] == "not_reached"

    password.write_text(right, encoding="utf-8")
    drive.done(number, "bmc_credentials", "carol", "rotated the Secret to the BMC's password")

    states = drive.states(number)
    assert (
        states["power_again"] == "succeeded"
        and drive.results(number)["power_again"]["power"] == "on"
    )
    assert states["bmc_unreachable"] == "skipped" and states["power_on"] == "skipped"
    assert drive.waiting(number) == ("power_cycle", 2)
    drive.approve(number, "power_cycle", "alice", "bob")
    assert drive.cycles(NODE) == 1 and drive.states(number)["wait_ready"] == "succeeded"
    _recover_and_return(
        drive,
        number,
        {
            "node_status": 0,
            "power": 0,
            "sel": 0,
            "cordon": 1,
            "pods": 0,
            "power_again": 0,
            "power_cycle": 2,
            "wait_ready": 0,
            "drain": 1,
            "diag": 1,
            "uncordon": 2,
        },
    )

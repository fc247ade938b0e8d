"""`runbook-bot action` shows how far a long action is, run in-process against the
simulated cluster: a drain counts the pods left, a power cycle shows the BMC's power
states as they change; one line per change on a pipe, a live line with FORCE_COLOR."""

from __future__ import annotations

import re

import pytest

from bot.cli import main
from bot.sim import SimHandle
from tests.bmc.conftest import cordon
from tests.cli.conftest import ANSI, plain

LEFT = re.compile(r"^\.\.\. (\d+) pods left: (\d+)/(\d+) evicted")


def test_a_piped_drain_prints_the_pods_left_as_they_leave(
    on_crowded: SimHandle, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["action", "k8s.drain", "node=gpu-node-01", "grace_period=0"])

    out, err = capsys.readouterr()
    assert code == 0, out + err
    assert out.startswith("gpu-node-01 drained: evicted 12 pods")
    counts = [LEFT.match(line) for line in err.splitlines()]
    left = [int(found[1]) for found in counts if found]
    assert left[0] == 12 and left[-1] == 0, err
    assert left == sorted(left, reverse=True), "only ever fewer pods left"
    assert len(set(left)) >= 3, "one line per change, not one at the end"
    assert all(int(f[1]) + int(f[2]) == int(f[3]) == 12 for f in counts if f)
    assert "... gpu-node-01 cordoned" in err.splitlines()
    assert not ANSI.search(out + err)
    assert on_crowded.cluster.snapshot().pods_on("gpu-node-01") == set()


def test_a_drain_on_a_terminal_draws_a_bar_of_pods_left(
    on_crowded: SimHandle, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FORCE_COLOR", "1")
    monkeypatch.setenv("COLUMNS", "100")

    code = main(["action", "k8s.drain", "node=gpu-node-01", "grace_period=0"])

    out, err = capsys.readouterr()
    assert code == 0, out + err
    assert "\x1b[?25l" in err  # the live line hides the cursor while it draws
    shown = plain(err)
    assert "k8s.drain gpu-node-01" in shown
    assert "12/12" in shown and "0 pods left" in shown
    assert LEFT.search(shown) is None  # no line per change: the bar moves instead
    assert plain(out).startswith("gpu-node-01 drained: evicted 12 pods")


def test_a_power_cycle_shows_the_bmcs_power_state_off_then_on(
    on_bmcs: SimHandle, capsys: pytest.CaptureFixture[str]
) -> None:
    cordon(on_bmcs, "gpu-node-02")  # as a runbook does before powering it off

    code = main(["action", "bmc.power_cycle", "node=gpu-node-02"])

    out, err = capsys.readouterr()
    assert code == 0, out + err
    said = [line for line in err.splitlines() if line.endswith(")") and "says its BMC" in line]
    assert said[-1].startswith("... gpu-node-02 is powered on, says its BMC ("), err
    states = said[-1].rpartition("(")[2].rstrip(")").split(" → ")
    assert states[-1] == "on" and {"off", "powering off"} & set(states[:-1]), err
    assert len(said) == len(states), "one line per change of state"
    assert "powered on (power cycle confirmed by the BMC" in out
    assert on_bmcs.cluster.machine("gpu-node-02").resets == 1


def test_a_power_cycle_on_a_terminal_keeps_one_status_line_of_the_states(
    on_bmcs: SimHandle, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    cordon(on_bmcs, "gpu-node-02")
    monkeypatch.setenv("FORCE_COLOR", "1")

    code = main(["action", "bmc.power_cycle", "node=gpu-node-02"])

    out, err = capsys.readouterr()
    assert code == 0, out + err
    assert "\x1b[?25l" in err  # a live line
    last = plain(err).replace("\r", "\n").splitlines()
    final = [line for line in last if "bmc.power_cycle gpu-node-02" in line][-1]
    assert final.rstrip().endswith("→ on") and "off" in final, final
    assert "says its BMC" not in plain(err)  # no line per change on a terminal

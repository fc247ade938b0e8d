"""The circuit breaker per domain and globally (issue 20): a step over many nodes whose
approval named its count ("cordon 32 nodes of row/a") takes those nodes out of service
past the per-action bound of three, within the global cap; past the cap only an admin
override naming enough nodes goes through, and it is recorded.

An 80-GPU-node simulated fleet (gpu-node-01..80) through the real client; the first 40
nodes stand for row/a. The per-action bound is min(3, 10% of 80) = 3; the global cap is
min(64, 50% of 80) = 40 unless a test narrows it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from bot.actions.context import Allowance
from bot.config import load_settings
from bot.sim import SimHandle, running, seed
from tests.actions.conftest import Recorder, RunAction
from tests.sim.waiting import TIME_SCALE

ROW_A = [f"gpu-node-{n:02d}" for n in range(1, 41)]


@pytest.fixture
def sim() -> Iterator[SimHandle]:
    with running(seed(nodes=80, grace_seconds=5, startup_seconds=2), time_scale=TIME_SCALE) as sim:
        yield sim


def _allowance(nodes: list[str], count: int | None = None) -> Allowance:
    return Allowance(
        nodes=frozenset(nodes), count=len(nodes) if count is None else count, domain="row/a"
    )


def _cordon(run_action: RunAction, node: str, **ctx: Any) -> tuple[bool, str]:
    result = run_action("k8s.cordon", ctx_=ctx, node=node).result
    return result.ok, result.summary


def _cordoned(sim: SimHandle) -> set[str]:
    return {name for name, node in sim.cluster.snapshot().nodes.items() if node.unschedulable}


def test_an_allowance_admits_32_nodes_of_a_40_node_domain_past_the_per_action_bound(
    sim: SimHandle, run_action: RunAction
) -> None:
    allowance = _allowance(ROW_A[:32])

    outcomes = [_cordon(run_action, node, allowance=allowance) for node in ROW_A[:32]]

    assert [ok for ok, _ in outcomes] == [True] * 32, [s for ok, s in outcomes if not ok]
    assert _cordoned(sim) == set(ROW_A[:32])


def test_without_an_allowance_the_per_action_bound_still_holds(
    sim: SimHandle, run_action: RunAction
) -> None:
    outcomes = [_cordon(run_action, node) for node in ROW_A[:4]]

    assert [ok for ok, _ in outcomes] == [True, True, True, False]
    assert "the limit is 3" in outcomes[3][1]
    assert _cordoned(sim) == set(ROW_A[:3])


def test_a_node_outside_the_allowance_is_refused_naming_the_approval(
    sim: SimHandle, run_action: RunAction
) -> None:
    ok, summary = _cordon(run_action, "gpu-node-41", allowance=_allowance(ROW_A[:32]))

    assert not ok
    assert "gpu-node-41" in summary
    assert "not one of the 32 nodes this approval names (row/a)" in summary
    assert _cordoned(sim) == set()


def test_the_bot_never_holds_more_of_the_domain_than_the_approval_counted(
    sim: SimHandle, run_action: RunAction
) -> None:
    allowance = _allowance(ROW_A[:5], count=4)

    outcomes = [_cordon(run_action, node, allowance=allowance) for node in ROW_A[:5]]

    assert [ok for ok, _ in outcomes] == [True, True, True, True, False]
    assert "holds 4 of the nodes of row/a this approval names, and it named 4" in outcomes[4][1]
    assert _cordoned(sim) == set(ROW_A[:4])


def test_the_global_cap_refuses_at_the_cap_with_the_counts(
    sim: SimHandle, run_action: RunAction
) -> None:
    settings = load_settings(breaker_global_max_nodes=10)
    allowance = _allowance(ROW_A[:12])

    outcomes = [
        _cordon(run_action, node, allowance=allowance, settings=settings) for node in ROW_A[:12]
    ]

    assert [ok for ok, _ in outcomes] == [True] * 10 + [False, False]
    refused = outcomes[10][1]
    assert "already holds 10 of 80 GPU nodes out of service" in refused
    assert "10 of them of the 12 of row/a this approval names" in refused
    assert "the global cap is 10" in refused
    assert "naming 2 node(s) past the cap" in refused
    assert _cordoned(sim) == set(ROW_A[:10])


def test_an_override_naming_too_few_is_refused_and_says_how_many_to_name(
    sim: SimHandle, run_action: RunAction, recorder: Recorder
) -> None:
    settings = load_settings(breaker_global_max_nodes=10)
    allowance = _allowance(ROW_A[:13])
    for node in ROW_A[:10]:
        assert _cordon(run_action, node, allowance=allowance, settings=settings)[0]
    override = {"allowance": allowance, "settings": settings, "admin_override": True}

    first = _cordon(run_action, ROW_A[10], **override, override_count=1)
    second = _cordon(run_action, ROW_A[11], **override, override_count=1)
    unnamed = _cordon(run_action, ROW_A[12], **override)

    assert first[0] is True
    assert second[0] is False
    assert "the admin override named 1" in second[1]
    assert "node 2 past the cap: override again naming 3" in second[1]
    assert unnamed[0] is False and "the admin override named no count" in unnamed[1]
    assert _cordoned(sim) == set(ROW_A[:11])
    overrides = [data for kind, _, data in recorder.records if kind == "breaker.override"]
    assert [(d["node"], d["override_count"], d["past"]) for d in overrides] == [(ROW_A[10], 1, 1)]


def test_an_override_naming_enough_passes_the_cap_and_each_node_is_recorded(
    sim: SimHandle, run_action: RunAction, recorder: Recorder
) -> None:
    settings = load_settings(breaker_global_max_nodes=10)
    allowance = _allowance(ROW_A[:12])
    override = {"allowance": allowance, "settings": settings, "admin_override": True}

    outcomes = [_cordon(run_action, node, **override, override_count=2) for node in ROW_A[:12]]

    assert [ok for ok, _ in outcomes] == [True] * 12
    assert _cordoned(sim) == set(ROW_A[:12])
    overrides = [data for kind, _, data in recorder.records if kind == "breaker.override"]
    assert [(d["node"], d["past"], d["limit"], d["domain"]) for d in overrides] == [
        (ROW_A[10], 1, 10, "row/a"),
        (ROW_A[11], 2, 10, "row/a"),
    ]
    assert all(d["override_count"] == 2 and d["gpu_nodes"] == 80 for d in overrides)
    summaries = [s for kind, s, _ in recorder.records if kind == "breaker.override"]
    assert "overridden by alice" in summaries[0] and "1 of the 2 named past the cap" in summaries[0]

"""Fixtures for action tests: the simulated GPU cluster and a context that runs actions on
it through the real `kubernetes` client, recording what the executors log.

Actions wait on their context's clock. By default it keeps the simulator's pace (a
`ScaledClock` at TIME_SCALE: a drain's 1 s poll takes 20 ms, as a pod's 5 s grace period
takes 100 ms) under a frozen timeline; a test that moves time itself passes a
`FrozenClock` (`ctx_={"clock": ...}`), and what it arranges with `call_later` happens at
that moment of the action's wait."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import pytest

from bot.actions import ActionContext, Outcome, execute, registry
from bot.clock import FrozenClock, ScaledClock
from bot.config import load_settings
from bot.sim import SimHandle, running, seed
from tests.sim.waiting import TIME_SCALE

START = datetime(2026, 11, 29, 22, 10, tzinfo=UTC)


@dataclass
class Recorder:
    """What an action reported: progress lines and log records (type, summary, data)."""

    progress: list[str] = field(default_factory=list)
    records: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)

    def types(self) -> list[str]:
        return [kind for kind, _, _ in self.records]


@pytest.fixture
def sim() -> Iterator[SimHandle]:
    with running(seed(grace_seconds=5, startup_seconds=2), time_scale=TIME_SCALE) as handle:
        yield handle


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()


RunAction = Callable[..., Outcome]


@pytest.fixture
def run_action(sim: SimHandle, recorder: Recorder) -> RunAction:
    """Run a registered action on the simulator: run_action("k8s.cordon", node=..., ...).

    Keyword `ctx_` takes ActionContext overrides (dry_run, admin_override, actor, incident,
    settings, clock; kube_factory None to connect from settings); everything else is a raw
    parameter, validated as from an operator.
    """

    def run(name: str, ctx_: dict[str, Any] | None = None, **raw: Any) -> Outcome:
        options = dict(ctx_ or {})
        settings = options.pop("settings", None) or load_settings()
        ctx = ActionContext(
            actor=options.pop("actor", "alice"),
            settings=settings,
            clock=options.pop("clock", None)
            or ScaledClock(TIME_SCALE, timeline=FrozenClock(START)),
            incident=options.pop("incident", "INC-7"),
            kube_factory=options.pop("kube_factory", sim.api_client),
            progress=recorder.progress.append,
            record=lambda kind, summary, data: recorder.records.append((kind, summary, data)),
            **options,
        )
        return execute(registry.get(name), raw, ctx)

    return run

"""Drive a shipped runbook end to end: the real catalog from `runbooks/`, the simulator with
Redfish BMCs, the worker in-process, and people approving or marking steps done.

`Drive` wraps the engine rig (tests/runbooks/rig.py) with the cluster: each decision is
followed by the worker running until there is no work left, so a test reads like the
on-call's log: approve, mark done, look at the node.

Two times run side by side. The incident's timeline is the test's `FrozenClock`: it moves
only when the test moves it, so escalations, expiries and the log's timestamps are exact.
The actions' waits (a drain's polls, `k8s.wait_node_ready`'s minute of Ready) keep the
simulator's pace, on the same clock's `ScaledClock` (1 / TIME_SCALE times real speed),
and never move the timeline.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from bot.clock import FrozenClock, ScaledClock
from bot.db import Database
from bot.errors import ApprovalRefused
from bot.incidents import log
from bot.incidents import service as incidents
from bot.runbooks import service
from bot.runbooks.service import StepRow
from bot.sim import Rbac, RedfishOptions, Scenario, SimHandle, running
from bot.sim.cluster import NodeState
from bot.topology import NodeCache
from bot.worker import Worker
from tests.runbooks.rig import Rig
from tests.sim.waiting import TIME_SCALE
from tests.support import server, working
from tests.support.payloads import alert, notification

RUNBOOKS = Path(__file__).resolve().parents[2] / "runbooks"
ROUNDS = 60
"""The most worker rounds one decision may cause: every step of the longest runbook."""


@contextmanager
def simulator(scenario: Scenario, rbac: Rbac | None = None) -> Iterator[SimHandle]:
    """The scenario served with its machines' BMCs over Redfish (plain HTTP on loopback),
    and the namespace the bot's node Jobs (nvidia-smi, dcgmi, ibstat) run in. With `rbac`
    (tests/deploy/chart.py: the chart's), the bot's client is its service account, held to
    those rules."""
    options = RedfishOptions("admin", "Sim-Bmc-Pw-77c1")
    namespaces = [*scenario.namespaces, "runbook-bot"]
    scenario = scenario.model_copy(update={"namespaces": namespaces})
    with running(scenario, time_scale=TIME_SCALE, redfish=options, rbac=rbac) as handle:
        yield handle


class Drive:
    def __init__(
        self, db: Database, clock: FrozenClock, tmp: Path, sim: SimHandle, **settings: Any
    ) -> None:
        """`settings`: more setting overrides (e.g. `topology`)."""
        bmc = sim.bmc_settings(tmp / "bmc-password")
        # Short BMC waits: the simulator's power transitions take a fraction of a second.
        bmc.update(timeout="2s", power_timeout="20s", attempts=3)
        self.rig = Rig(db, clock, tmp, runbooks_dir=RUNBOOKS, bmc=bmc, **settings)
        self.sim = sim
        # The worker's timeline is the test's clock; its actions wait in the simulator's time.
        self.clock = ScaledClock(TIME_SCALE, timeline=clock)
        self.worker = Worker(db, self.rig.settings, self.clock, kube_factory=sim.api_client)
        self._webhook: httpx.Client | None = None

    def fire(self, **labels: Any) -> int:
        """Post one firing alert (payloads.alert keywords) through the webhook."""
        return self.post(notification([alert(**labels)]))

    @contextmanager
    def serving(self) -> Iterator[Drive]:
        """Serve the real app (its Alertmanager webhook) on loopback while the block runs."""
        rig = self.rig
        # The failure domains as serve reads them: the simulator's nodes, listed and watched.
        cache = NodeCache(rig.settings, kube_factory=self.sim.api_client)
        cache.start()
        app = {"catalog": rig.catalog(), "wake": self.worker.wake, "topology": cache.current}
        try:
            with (
                server.running(rig.settings, rig.db, rig.clock, **app) as url,
                httpx.Client(base_url=url, timeout=10) as client,
            ):
                self._webhook = client
                try:
                    yield self
                finally:
                    self._webhook = None
        finally:
            cache.stop()

    def post(self, body: dict[str, Any]) -> int:
        """POST a webhook body (e.g. a recorded one) to the served app; run the worker
        until it is quiet; the incident the body opened."""
        answer = self.deliver(body)
        assert answer["opened"] is True, answer
        return int(answer["incident"].removeprefix("INC-"))

    def deliver(self, body: dict[str, Any]) -> dict[str, Any]:
        """POST a webhook body that may open nothing (alerts joining an incident, or
        attached to one as symptoms); run the worker until it is quiet; the answer."""
        assert self._webhook is not None, "post inside Drive.serving()"
        response = self._webhook.post("/webhooks/alertmanager", json=body)
        assert response.status_code == 200, response.text
        self.settle()
        answer: dict[str, Any] = response.json()
        return answer

    def settle(self) -> int:
        """run_once until there is no work; how many runs it took."""
        for done in range(ROUNDS):
            if not working.passed(self.worker):
                return done
        pytest.fail(f"the worker still had work after {ROUNDS} rounds")

    def rows(self, number: int) -> dict[str, StepRow]:
        _, rows = service.step_rows(self.rig.db, number)
        return {row.step: row for row in rows}

    def states(self, number: int) -> dict[str, str]:
        return {step: row.state for step, row in self.rows(number).items()}

    def waiting(self, number: int) -> tuple[str, int] | None:
        """The step waiting for people and how many approvals it needs; None when none."""
        for step, row in self.rows(number).items():
            if row.state == "awaiting_approval":
                return step, row.approvals_required
        return None

    def approve(self, number: int, step: str, *people: str, **extra: Any) -> None:
        """Each person approves `step` in turn (`extra`: e.g. the `count` a step over many
        nodes names); then the worker runs what is due."""
        for person in people:
            self.rig.approve(number, step, person, **extra)
        self.settle()

    def refused(self, number: int, step: str, person: str) -> str:
        with pytest.raises(ApprovalRefused) as refusal:
            self.rig.approve(number, step, person)
        return str(refusal.value)

    def done(self, number: int, step: str, person: str = "alice", note: str = "done") -> None:
        self.rig.done(number, step, person, note)
        self.settle()

    def skip(self, number: int, step: str, person: str = "alice", note: str = "n/a") -> None:
        self.rig.skip(number, step, person, note)
        self.settle()

    def follow(self, number: int, decisions: dict[str, tuple[str, ...]]) -> list[str]:
        """Answer every step that waits, in order, with `decisions[step]` (people who approve
        it; a manual step is marked done by the first); the steps answered, in order.
        Stops at the first waiting step without a decision (it is left waiting); fails on
        one that needs another number of people than given."""
        answered: list[str] = []
        for _ in range(ROUNDS):
            waiting = self.waiting(number)
            if waiting is None:
                return answered
            step, required = waiting
            if step not in decisions:
                return answered
            people = decisions[step]
            if self.rows(number)[step].kind == "manual":
                self.done(number, step, people[0], f"{step}: done")
            else:
                assert required == len(people), (step, required, people)
                self.approve(number, step, *people)
            answered.append(step)
        pytest.fail("the runbook kept asking")

    def demanded(self, number: int) -> dict[str, int]:
        """Approvals each action step that was proposed (not skipped) asked for."""
        return {
            step: row.approvals_required
            for step, row in self.rows(number).items()
            if row.kind == "action" and row.state not in ("skipped", "not_reached")
        }

    def results(self, number: int) -> dict[str, dict[str, Any]]:
        """The newest result of each step that has one ({} for manual and skipped ones)."""
        return {step: dict(run.result or {}) for step, run in self.rig.runs(number).items()}

    def cycles(self, node: str) -> int:
        """How often the machine behind `node` was powered on since the simulator started."""
        with self.sim.cluster.lock:
            return self.sim.cluster.machines[node].resets

    def node(self, name: str) -> NodeState:
        return self.sim.cluster.snapshot().nodes[name]

    def types(self, number: int) -> list[str]:
        return self.rig.types(number)

    def verified(self, number: int) -> bool:
        with self.rig.db.session() as session:
            incident = incidents.get(session, number)
            return log.verify(incident, log.entries(session, number)) is None

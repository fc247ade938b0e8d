"""`runbook-bot drill` against a running bot: the simulator with its BMCs, the real app on
loopback, the worker, and the test as the team, deciding through the API with the webhook
token. Nothing the drill does may change the cluster: Kubernetes writes go as dry runs,
BMC power requests are never sent. The report has the times against the seed's targets
and a verdict; a drill nobody answers times out with exit 1.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import SecretStr

from bot.cli import main
from bot.clock import FrozenClock
from bot.db import Database
from bot.escalation import acknowledge
from bot.incidents import log
from bot.runbooks import service as runbooks
from bot.sim import alerts, seed
from tests.runbooks.drive import Drive, simulator
from tests.sim.waiting import eventually
from tests.support import people, server
from tests.support.cli import Run

TOKEN = "drill-webhook-token-5f2a"
NODE = "gpu-node-02"
pytestmark = pytest.mark.timeout(120)
SQLITE = pytest.mark.parametrize("backend", ["sqlite"])
"""End to end on SQLite, as the shipped runbooks' (tests/runbooks); ingest and grouping
of drills run on both databases (test_grouping.py)."""


@dataclass
class Team:
    drive: Drive
    url: str
    token_file: Path

    def api(self) -> httpx.Client:
        return httpx.Client(
            base_url=self.url, timeout=10, headers={"Authorization": f"Bearer {TOKEN}"}
        )

    def approve(self, number: int, step: str, *persons: str) -> None:
        with self.api() as client:
            for person in persons:
                rig = self.drive.rig
                answer = client.post(
                    f"/api/incidents/INC-{number}/steps/{step}/approve",
                    json={},
                    headers=people.bearer(rig.db, rig.settings, person),
                )
                assert answer.status_code == 200, answer.text
        self.drive.settle()

    def fire(self, body: dict[str, Any]) -> int:
        with self.api() as client:
            answer = client.post("/webhooks/alertmanager", json=body)
        assert answer.status_code == 200, answer.text
        self.drive.settle()
        return int(answer.json()["incident"].removeprefix("INC-"))

    def acknowledge(self, number: int, person: str) -> None:
        with self.drive.rig.db.transaction() as session:
            acknowledge(
                session, number, actor=log.Actor.human(person), at=self.drive.rig.clock.now()
            )

    def resolve(self, number: int, person: str, disposition: str) -> None:
        runbooks.resolve(
            self.drive.rig.db,
            number,
            actor=log.Actor.human(person),
            clock=self.drive.rig.clock,
            disposition=disposition,
        )

    def later(self, minutes: int) -> None:
        self.drive.rig.clock.advance(timedelta(minutes=minutes))


@pytest.fixture
def team(db: Database, clock: FrozenClock, tmp_path: Path) -> Iterator[Team]:
    token_file = tmp_path / "webhook-token"
    token_file.write_text(TOKEN + "\n")
    with simulator(seed(grace_seconds=5, startup_seconds=2)) as sim:
        drive = Drive(db, clock, tmp_path, sim)
        settings = drive.rig.settings.model_copy(update={"webhook_token": SecretStr(TOKEN)})
        app = {"catalog": drive.rig.catalog(), "wake": drive.worker.wake}
        with server.running(settings, db, clock, **app) as url:
            yield Team(drive, url, token_file)


class DrillCommand:
    """`runbook-bot drill ...` in a thread, as the team's terminal runs it."""

    def __init__(self, team: Team, report: Path, *args: str) -> None:
        self.argv = [
            "drill",
            "xid79",
            "--url",
            team.url,
            "--token-file",
            str(team.token_file),
            "--poll",
            "50ms",
            "--report",
            str(report),
            *args,
        ]
        self.code: list[int] = []
        self.thread = threading.Thread(target=lambda: self.code.append(main(self.argv)))

    def __enter__(self) -> DrillCommand:
        self.thread.start()
        return self

    def __exit__(self, *_: Any) -> None:
        self.thread.join(timeout=60)

    def exit_code(self) -> int:
        self.thread.join(timeout=60)
        assert not self.thread.is_alive(), "the drill command did not finish"
        return self.code[0]


def _drill_incident(team: Team) -> int | None:
    with team.api() as client:
        listed = client.get("/api/incidents").json()["incidents"]
    drills = [i["number"] for i in listed if i["drill"]]
    return drills[0] if drills else None


def _writes(team: Team) -> list[Any]:
    return [
        r
        for r in team.drive.sim.cluster.requests_made()
        if r.method in ("POST", "PATCH", "PUT", "DELETE")
    ]


@SQLITE
def test_a_drill_worked_by_the_team_changes_nothing_and_reports_its_times(
    team: Team, tmp_path: Path
) -> None:
    drive = team.drive
    real = team.fire(alerts.firing("xid79", now=drive.rig.clock.now()))  # a real one, open
    real_log = drive.types(real)
    before = len(_writes(team))
    report = tmp_path / "drill.md"

    with DrillCommand(team, report, "--timeout", "60s") as drill:
        number = eventually(lambda: _drill_incident(team), timeout=20, what="the drill incident")
        assert number != real
        drive.settle()  # the worker proposes the drill's steps
        assert drive.waiting(number) == ("cordon", 1)
        team.later(3)
        team.acknowledge(number, "alice")
        team.later(1)
        team.approve(number, "cordon", "alice")
        assert drive.waiting(number) == ("drain", 1)
        team.later(2)
        team.approve(number, "drain", "bob")
        assert drive.waiting(number) == ("power_cycle", 2)
        team.approve(number, "power_cycle", "alice", "bob")
        team.later(14)
        team.resolve(number, "carol", "drill: cordon, drain and power cycle rehearsed")
        assert drill.exit_code() == 0

    node = drive.node(NODE)
    assert not node.unschedulable  # nothing was really cordoned
    node_writes = team.drive.sim.cluster.requests_made(method="PATCH", path=f"/api/v1/nodes/{NODE}")
    assert node_writes, "the cordon sent no PATCH at all"
    assert {r.query.get("dryRun") for r in node_writes} == {"All"}
    evictions = team.drive.sim.cluster.requests_made(method="POST", path="*/eviction")
    assert evictions and {r.query.get("dryRun") for r in evictions} == {"All"}
    job_writes = [r for r in _writes(team)[before:] if "/jobs" not in r.path]
    assert {r.query.get("dryRun") for r in job_writes} == {"All"}
    assert drive.sim.bmc_requests("POST") == []  # the power cycle was only rendered
    assert drive.cycles(NODE) == 0
    assert drive.types(real) == real_log  # the real incident saw none of it

    rows = drive.rows(number)
    for step in ("cordon", "drain", "power_cycle"):
        assert (rows[step].state, step) == ("succeeded", step), rows[step].summary
        assert drive.results(number)[step]["dry_run"] is True
    # Its dry run is refused (the dry-run drain left the node schedulable): rendered only.
    assert rows["power_cycle"].summary.startswith(
        "rendered only (drill): bmc.power_cycle (node=gpu-node-02, reason=XID 79 on GPU 5"
    )
    assert "cordon and drain it first" in rows["power_cycle"].summary
    text = report.read_text()
    assert text.startswith("# Drill report: xid79 (xid79-")
    assert f"- Incident: INC-{number} [DRILL] gpu-node-02 GPU 5 XID 79" in text
    assert "- Time to acknowledge: 3m (target 15m, seed 34.4)" in text
    assert "- Time to mitigation: 4m (first changing step that succeeded" in text
    assert "- Time to resolve: 20m" in text
    assert "alice: alice acknowledged" in text
    assert "bob:" in text and "carol:" in text
    rendered = text.split("## Steps rendered only (dry run)")[1].split("##")[0]
    for step in ("cordon", "drain", "power_cycle"):
        assert f"- {step}: " in rendered
    assert "Verdict: PASSED: resolved in time, acknowledged within 15m" in text
    with team.api() as client:
        cleared = client.get(f"/api/incidents/INC-{number}").json()["alerts"]
    assert [a["status"] for a in cleared] == ["resolved"]  # the drill cleared its alert


@SQLITE
def test_a_drill_nobody_answers_times_out_with_exit_1_and_says_so(
    team: Team, tmp_path: Path
) -> None:
    report = tmp_path / "drill.md"

    with DrillCommand(team, report, "--timeout", "1s") as drill:
        assert drill.exit_code() == 1

    number = _drill_incident(team)
    text = report.read_text()
    assert "- Time to acknowledge: not reached (target 15m, seed 34.4)" in text
    assert "- nobody decided anything" in text
    assert f"Verdict: TIMED OUT: not resolved within 1s; INC-{number} is still open" in text
    with team.api() as client:
        incident = client.get(f"/api/incidents/INC-{number}").json()
    assert [a["status"] for a in incident["alerts"]] == ["resolved"]
    assert incident["alerts_cleared_at"] is not None  # critical: waits for a human


@SQLITE
def test_a_drill_with_a_wrong_token_is_refused_before_anything_fires(
    team: Team, tmp_path: Path, run: Run
) -> None:
    wrong = tmp_path / "wrong-token"
    wrong.write_text("not-the-token\n")

    code, out, err = run("drill", "xid79", "--url", team.url, "--token-file", str(wrong))

    assert (code, out) == (1, "")
    assert "refused the credentials" in err and "--token-file" in err
    assert _drill_incident(team) is None


def test_a_drill_against_nothing_says_what_to_check(run: Run) -> None:
    code, out, err = run("drill", "node-down", "--url", "http://127.0.0.1:9", "--timeout", "5s")

    assert (code, out) == (1, "")
    assert "cannot reach the bot at http://127.0.0.1:9" in err and "check --url" in err


@pytest.mark.parametrize(
    ("args", "complaint"),
    [
        (["--timeout", "0s"], "--timeout: give a positive duration"),
        (["--poll", "often"], "--poll: 'often' is not a duration"),
        (["--gpu", "99"], "--gpu 99: a GPU index is 0 to 63"),
        (["--token-file", "/nonexistent/token"], "--token-file /nonexistent/token: cannot read"),
    ],
)
def test_bad_drill_options_are_refused_with_what_to_write(
    run: Run, args: list[str], complaint: str
) -> None:
    code, _, err = run("drill", "xid79", "--url", "http://127.0.0.1:9", *args)

    assert code == 2
    assert complaint in err

"""The 5-Why draft of a scripted XID 79 incident, in Chinese and in English, against golden
files: the timeline in order, the durations, the owners; the simulated cluster runs the
cordon and the drain. And: secrets never reach a draft; templates can be overridden and
render in the sandbox.

Regenerate the golden files after an intended change: `UPDATE_GOLDEN=1 pytest
tests/postmortem/test_draft.py`, then read the diff (refused under `CI=true`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import cast

import pytest
from jinja2.exceptions import SecurityError
from pydantic import SecretStr

from bot.clock import FrozenClock
from bot.db import Database
from bot.errors import ConfigInvalid
from bot.escalation import acknowledge
from bot.incidents import log
from bot.incidents import service as incidents
from bot.postmortem import draft as drafts
from bot.postmortem.models import Followup
from bot.postmortem.render import LANGS, Lang, render
from bot.postmortem.service import draft_markdown
from bot.runbooks import service as runbooks
from bot.sim import SimHandle, running, seed
from bot.worker import Worker
from tests.runbooks.rig import Rig
from tests.sim.waiting import TIME_SCALE
from tests.support import working
from tests.support.ci import in_ci

GOLDEN = Path(__file__).with_name("golden")
START = datetime(2026, 7, 20, 14, 3, tzinfo=UTC)
XID = """\
    id: gpu-xid
    title: Single GPU fault
    version: 3
    match: {alerts: [GPUXIDError]}
    facts:
      node: "{{ labels.Hostname }}"
      gpu: "{{ labels.gpu }}"
      xid: "{{ labels.xid }}"
    steps:
      - id: classify
        title: Classify the XID
        action: gpu.classify_xid
        with: {xid: "{{ facts.xid }}", node: "{{ facts.node }}", gpu: "{{ facts.gpu }}"}
      - id: cordon
        title: Cordon the node
        action: k8s.cordon
        with: {node: "{{ facts.node }}", reason: "XID {{ facts.xid }} on GPU {{ facts.gpu }}"}
      - id: checkpoint
        title: Note the jobs' checkpoints
        manual: Check which jobs lost progress and from which checkpoint they restart.
      - id: uncordon
        title: Return the node
        action: k8s.uncordon
        with: {node: "{{ facts.node }}"}
"""
NOTE = "team-a job llama-70b restarts from the 13:30 checkpoint, ~35 min lost"


@pytest.fixture
def sim() -> Iterator[SimHandle]:
    with running(seed(grace_seconds=5, startup_seconds=2), time_scale=TIME_SCALE) as handle:
        yield handle


def scripted(db: Database, tmp_path: Path, sim: SimHandle) -> tuple[Rig, int]:
    """14:03 alert -> 14:10 ack -> 14:25 cordon -> 15:00 checkpoint noted -> 15:27
    uncordon and resolved; one follow-up with an owner and a deadline."""
    clock = FrozenClock(START)
    rig = Rig(db, clock, tmp_path, roles={"alice": ["responder"], "bob": ["responder"]})
    rig.write(XID)
    worker = Worker(db, rig.settings, clock, kube_factory=sim.api_client, owner="w1")
    number = rig.fire(host="gpu-node-01", gpu=5, xid="79")

    def at(minutes: int) -> None:
        clock.set(START + timedelta(minutes=minutes))
        for _ in range(10):
            if not working.passed(worker):
                return

    at(0)
    at(7)
    with db.transaction() as session:
        acknowledge(session, number, actor=log.Actor.human("alice"), at=clock.now())
    at(22)
    rig.approve(number, "cordon", "alice")
    at(22)
    at(57)
    runbooks.complete(db, number, "checkpoint", who=rig.who("bob"), clock=clock,
                      settings=rig.settings, note=NOTE)  # fmt: skip
    at(84)
    rig.approve(number, "uncordon", "alice")
    at(84)
    fixed = "GPU 5 reset after a power cycle; dcgmi diag -r 3 passed"
    runbooks.resolve(db, number, actor=log.Actor.human("alice"), clock=clock, disposition=fixed)
    with db.transaction() as session:
        session.add(
            Followup(
                incident_number=number,
                title="Alert on ECC growth > 10 a week",
                type="prevent",
                owner="bob",
                deadline=date(2026, 8, 7),
                status="open",
                source="person",
                created_by="alice",
                created_at=clock.now(),
                updated_at=clock.now(),
            )  # fmt: skip
        )
    return rig, number


def normalized(text: str) -> str:
    """Elapsed real time inside action summaries (`in 0.8 s`) varies run to run."""
    return re.sub(r"\b\d+(\.\d+)? ?(ms|s)\b", "N s", text)


@pytest.mark.parametrize("lang", ["zh", "en"])
def test_the_draft_of_a_scripted_xid_incident_matches_its_golden_file(
    db: Database, tmp_path: Path, sim: SimHandle, lang: str
) -> None:
    rig, number = scripted(db, tmp_path, sim)
    text = draft_markdown(db, number, lang=cast(Lang, lang), settings=rig.settings,
                          clock=rig.clock)  # fmt: skip
    golden = GOLDEN / f"xid79.{lang}.md"
    if os.environ.get("UPDATE_GOLDEN"):
        if in_ci():  # tests/conftest.py refuses the run first; this is the write's own guard
            pytest.fail("UPDATE_GOLDEN is set under CI: CI never rewrites golden files")
        golden.write_text(normalized(text), encoding="utf-8")
    assert normalized(text) == golden.read_text(encoding="utf-8")


def test_the_drafts_facts_of_the_scripted_incident(
    db: Database, tmp_path: Path, sim: SimHandle
) -> None:
    rig, number = scripted(db, tmp_path, sim)
    with db.session() as session:
        built = drafts.build(session, number, rig.clock.now())
    assert (built.duration_minutes, built.tta, built.ttm, built.ttr) == (84, 7, 22, 84)
    assert built.cause.fault_class == "fallen_off_bus" and built.cause.xid == "79"
    assert built.notes == [f"checkpoint: {NOTE}"]
    kinds = [m.kind for m in built.timeline]
    cordoned = next(i for i, m in enumerate(built.timeline) if "cordon succeeded" in m.text)
    order = [kinds.index("alert.firing"), kinds.index("incident.acknowledged"), cordoned,
             kinds.index("incident.resolved")]  # fmt: skip
    assert order == sorted(order)
    times = [m.at for m in built.timeline]
    assert times == sorted(times)
    assert built.followups[0].owner == "bob" and built.followups[0].deadline == "2026-08-07"


def test_secrets_and_raw_tokens_never_reach_a_draft(
    db: Database, tmp_path: Path, sim: SimHandle
) -> None:
    rig, number = scripted(db, tmp_path, sim)
    leaked = "xoxb-1234-5678-abcdefSECRET"
    with db.transaction() as session:
        incident = incidents.get(session, number, lock=True)
        log.append(session, incident, at=rig.clock.now(), actor=log.Actor.human("bob"),
                   type="incident.owner",
                   summary=f"pasted by mistake: {leaked} and Authorization: Bearer abcdef123456 "
                   "and password=hunter22 and the webhook token wh-token-98765")  # fmt: skip
    settings = rig.settings.model_copy(update={"webhook_token": SecretStr("wh-token-98765")})
    for lang in LANGS:
        text = draft_markdown(db, number, lang=lang, settings=settings, clock=rig.clock)
        for secret in (leaked, "abcdef123456", "hunter22", "wh-token-98765"):
            assert secret not in text
        assert "[redacted]" in text


def test_a_template_directory_overrides_the_shipped_one(
    db: Database, tmp_path: Path, sim: SimHandle
) -> None:
    rig, number = scripted(db, tmp_path, sim)
    mine = tmp_path / "templates"
    mine.mkdir()
    (mine / "5why.en.md.j2").write_text("# {{ d.ref }}: {{ d.ttr }} min\n", encoding="utf-8")
    settings = rig.settings.model_copy(update={"postmortem_templates": mine})
    text = draft_markdown(db, number, lang="en", settings=settings, clock=rig.clock)
    assert text == f"# INC-{number}: 84 min\n"
    zh = draft_markdown(db, number, lang="zh", settings=settings, clock=rig.clock)
    assert zh.startswith("# 故障复盘报告")  # not overridden: the shipped one


def test_templates_render_in_the_sandbox(db: Database, tmp_path: Path, sim: SimHandle) -> None:
    rig, number = scripted(db, tmp_path, sim)
    mine = tmp_path / "templates"
    mine.mkdir()
    (mine / "5why.en.md.j2").write_text("{{ d.__class__.__init__.__globals__ }}", encoding="utf-8")
    with db.session() as session:
        built = drafts.build(session, number, rig.clock.now())
    with pytest.raises(SecurityError):
        render(built, "en", mine)
    with pytest.raises(ConfigInvalid, match="no postmortem language 'fr'"):
        render(built, "fr", None)  # type: ignore[arg-type]

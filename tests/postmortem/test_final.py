"""The final postmortem (bot.postmortem.final) on SQLite and PostgreSQL: the 5-Why section,
the blameless heuristic, the rules `finalize` enforces (seed 34.4: every improvement has an
owner and a deadline; each why ends in a mechanism, not "someone made a mistake"), stored
versions; then `runbook-bot postmortem final|versions|export` run in-process."""

from __future__ import annotations

from datetime import date, timedelta
from pathlib import Path

import pytest

from bot.cli import main
from bot.clock import FrozenClock
from bot.db import Database
from bot.errors import PayloadInvalid, TransitionRefused
from bot.incidents import log
from bot.postmortem import final, followups
from bot.postmortem.models import Followup, Postmortem
from tests.runbooks.rig import Rig
from tests.support.cli import Run
from tests.support.rows import log_types, verifies

ALICE = log.Actor.human("slack:UALICE", "@alice")

ZH = """\
# 故障复盘报告

- 故障时间：2026-07-20 14:03 ~ 15:27（84 分钟）
- 直接原因：gpu-node-02 第 5 卡 XID 79（GPU 掉出总线）

## 5Why 分析
1. 为什么任务中断？→ 第 5 卡掉卡，NCCL 通信失败
2. 为什么掉卡？→ XID 79，硬件层面 GPU 与总线断开
3. 为什么硬件断开？→ 该卡近两周 ECC 计数持续增长，属于劣化中的卡
4. 为什么劣化卡还在服役？→ 周巡检发现了 ECC 增长但未触发处置动作
5. 为什么巡检项没有动作？→ SOP 只写了"记录"，没写"达到什么阈值要做什么"

## 改进措施（每条有 owner 和 deadline）
1. SOP 补充：ECC 周增长 > 10 的卡列入观察名单（owner: 张三，7/31）
"""
"""The seed's own 5-Why (34.4): every answer is a mechanism."""

EN = """\
# Postmortem INC-1

## 5-Why analysis
1. Why did the job stop? -> GPU 5 fell off the bus; NCCL failed
2. Why did the GPU fall off? -> {answer}
3. Why was it still in service? -> the weekly check saw ECC growth but no rule acted on it

## Improvements
1. Alert on ECC growth (owner: bob, 2026-12-31)
"""


@pytest.fixture(autouse=True)
def known_people(monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI's `--as` names a person of the settings: these are."""
    monkeypatch.setenv("RUNBOOK_BOT_PEOPLE", '{"alice": {}, "bob": {}, "carol": {}}')


@pytest.fixture
def rig(db: Database, clock: FrozenClock, tmp_path: Path) -> Rig:
    return Rig(db, clock, tmp_path)


def _item(rig: Rig, number: int, **extra: object) -> Followup:
    fields: dict[str, object] = {
        "type": "prevent",
        "owner": "slack:UBOB",
        "deadline": date(2026, 12, 31),
        "link": None,
        "actor": ALICE,
        "now": rig.clock.now(),
    }
    fields.update(extra)
    with rig.db.transaction() as session:
        return followups.add(session, number, "ECC growth alert", **fields)  # type: ignore[arg-type]


def _finalize(rig: Rig, number: int, body: str, **extra: object) -> Postmortem:
    options: dict[str, object] = {"lang": "en", "author": "slack:UALICE", "now": rig.clock.now()}
    options.update(extra)
    with rig.db.transaction() as session:
        return final.finalize(session, number, body, **options)  # type: ignore[arg-type]


# --- the 5-Why section --------------------------------------------------------------------


def test_parse_whys_reads_the_seed_template_and_the_english_one() -> None:
    whys = final.parse_whys(ZH)
    assert len(whys) == 5  # the improvements below are another section
    assert whys[0] == ("为什么任务中断？", "第 5 卡掉卡，NCCL 通信失败")
    assert whys[4][1] == 'SOP 只写了"记录"，没写"达到什么阈值要做什么"'

    en = final.parse_whys(EN.format(answer="XID 79 -> the PCIe link dropped"))
    assert en == [
        ("Why did the job stop?", "GPU 5 fell off the bus; NCCL failed"),
        ("Why did the GPU fall off?", "XID 79 -> the PCIe link dropped"),  # the first arrow
        ("Why was it still in service?", "the weekly check saw ECC growth but no rule acted on it"),
    ]
    assert final.parse_whys("# Report\n1. why? -> because\n") == []  # no 5-Why heading


@pytest.mark.parametrize(
    "answer",
    [
        "human error during the drain",
        "Operator error",
        "someone drained the wrong node",
        "bob forgot to uncordon it",
        "a mistake in the command",
        "careless typing",
        "<@U0BOB|bob> did it",
        "slack:U0BOB ran it",
        "the on-call didn't follow the SOP",
        "值班同学操作失误",
        "人为原因",
        "某某没有检查",
        "巡检疏忽",
        "值班粗心",
        "忘记恢复调度",
        "没注意到 ECC 告警",
    ],
)
def test_person_blamed_catches_answers_that_stop_at_a_person(answer: str) -> None:
    assert final.person_blamed(answer) is not None


@pytest.mark.parametrize("_q,answer", final.parse_whys(ZH))
def test_person_blamed_lets_mechanisms_pass(_q: str, answer: str) -> None:
    assert final.person_blamed(answer) is None


def test_person_blamed_lets_english_mechanisms_pass() -> None:
    for answer in (
        "the SOP says record, not act",
        "no alert on the ECC growth rate",
        "the drain step has no PodDisruptionBudget check",
    ):
        assert final.person_blamed(answer) is None


# --- finalize -----------------------------------------------------------------------------


def test_finalize_refuses_without_follow_ups(rig: Rig) -> None:
    number = rig.fire()
    bare = ZH.split("## 改进措施")[0]  # no improvement written in it either
    with pytest.raises(TransitionRefused) as refused:
        _finalize(rig, number, bare, lang="zh")
    assert f"INC-{number} has no follow-ups" in str(refused.value)
    assert f"runbook-bot followup add INC-{number}" in str(refused.value)
    # A cancelled item is no improvement either.
    item = _item(rig, number)
    with rig.db.transaction() as session:
        followups.update(session, item.id, status="cancelled", actor=ALICE, now=rig.clock.now())
    with pytest.raises(TransitionRefused, match="has no follow-ups"):
        _finalize(rig, number, bare, lang="zh")
    assert "postmortem.finalized" not in log_types(rig.db, number)


def test_finalize_lists_each_follow_up_missing_an_owner_or_a_deadline(rig: Rig) -> None:
    number = rig.fire()
    no_owner = _item(rig, number, owner=None)
    no_deadline = _item(rig, number, deadline=None)
    neither = _item(rig, number, owner=None, deadline=None)
    done = _item(rig, number, owner=None, deadline=None)
    with rig.db.transaction() as session:
        followups.update(session, done.id, status="done", actor=ALICE, now=rig.clock.now())

    with pytest.raises(TransitionRefused) as refused:
        _finalize(rig, number, ZH, lang="zh")

    said = str(refused.value)
    assert said.startswith(f"INC-{number}'s postmortem cannot be final yet:\n- ")
    assert f"follow-up #{no_owner.id} (ECC growth alert) has no owner" in said
    assert f"runbook-bot followup set {no_owner.id} --owner slack:U0123ABC" in said
    assert f"follow-up #{no_deadline.id} (ECC growth alert) has no deadline" in said
    assert f"runbook-bot followup set {no_deadline.id} --deadline 2026-12-31" in said
    assert f"#{neither.id} (ECC growth alert) has no owner" in said
    assert f"#{neither.id} (ECC growth alert) has no deadline" in said
    assert f"#{done.id}" not in said  # done items need neither any more
    assert said.count("\n- ") == 4

    with rig.db.transaction() as session:
        for item in (no_owner, neither):
            followups.update(session, item.id, owner="slack:UBOB", actor=ALICE, now=rig.clock.now())
        for item in (no_deadline, neither):
            followups.update(
                session, item.id, deadline=date(2027, 1, 1), actor=ALICE, now=rig.clock.now()
            )
    assert _finalize(rig, number, ZH, lang="zh").state == "final"


def test_finalize_needs_an_answered_why(rig: Rig) -> None:
    number = rig.fire()
    _item(rig, number)
    unanswered = "## 5-Why analysis\n1. Why did the job stop? ->\n2. Why? -> TODO\n3. Why? → …\n"
    with pytest.raises(TransitionRefused, match="answers no why"):
        _finalize(rig, number, unanswered)
    with pytest.raises(TransitionRefused, match="there is no 5-Why section"):
        _finalize(rig, number, "# Postmortem\n\nIt broke.\n")
    with pytest.raises(TransitionRefused, match="the postmortem is empty"):
        _finalize(rig, number, "  \n")


@pytest.mark.parametrize(
    ("lang", "body", "quoted"),
    [
        ("en", EN.format(answer="human error: bob forgot to check"), "human error: bob forgot"),
        (
            "zh",
            ZH.replace("XID 79，硬件层面 GPU 与总线断开", "值班同学操作失误"),
            "值班同学操作失误",
        ),
    ],
)
def test_a_why_that_blames_a_person_needs_confirm_which_is_recorded(
    rig: Rig, lang: str, body: str, quoted: str
) -> None:
    number = rig.fire()
    _item(rig, number)

    with pytest.raises(TransitionRefused) as refused:
        _finalize(rig, number, body, lang=lang)
    said = str(refused.value)
    assert f'why 2 answers "{quoted}' in said
    assert "rewrite it as the process, system or mechanism" in said and "--confirm" in said
    with rig.db.session() as session:
        assert final.versions(session, number) == []

    row = _finalize(rig, number, body, lang=lang, confirm=True)

    assert (row.version, row.state, row.lang) == (1, "final", lang)
    assert row.note.startswith("confirmed by slack:UALICE: why 2 (")
    assert quoted in row.note
    entry = rig.log(number)[-1]
    assert entry.type == "postmortem.finalized"
    assert entry.data["note"] == row.note and entry.data["version"] == 1
    assert quoted in entry.summary
    assert verifies(rig.db, number)


def test_versions_increment_and_latest_is_the_last_final(rig: Rig) -> None:
    number = rig.fire()
    _item(rig, number)
    body = EN.format(answer="the PCIe link dropped")
    with rig.db.transaction() as session:
        draft = final.save_draft(
            session, number, body, lang="en", author="slack:UALICE", now=rig.clock.now()
        )
    first = _finalize(rig, number, body)
    rig.clock.advance(timedelta(hours=1))
    second = _finalize(rig, number, body + "\nLessons: …\n", lang="zh")
    with rig.db.transaction() as session:
        final.save_draft(session, number, body, lang="en", author="bob", now=rig.clock.now())

    assert (draft.version, draft.state, first.version, second.version) == (1, "draft", 2, 3)
    with rig.db.session() as session:
        assert [(v.version, v.state) for v in final.versions(session, number)] == [
            (1, "draft"),
            (2, "final"),
            (3, "final"),
            (4, "draft"),
        ]
        last = final.latest(session, number, state="final")
        assert last is not None and last.version == 3 and last.body.endswith("Lessons: …\n")
        newest = final.latest(session, number)
        assert newest is not None and newest.version == 4
        assert final.version(session, number, 2).body == body
        with pytest.raises(PayloadInvalid, match="no postmortem version 9"):
            final.version(session, number, 9)
    assert [t for t in log_types(rig.db, number) if t.startswith("postmortem.")] == [
        "postmortem.drafted",
        "postmortem.finalized",
        "postmortem.finalized",
        "postmortem.drafted",
    ]


def test_finalize_refuses_an_unknown_language(rig: Rig) -> None:
    number = rig.fire()
    _item(rig, number)
    with pytest.raises(PayloadInvalid, match="write zh or en"):
        _finalize(rig, number, ZH, lang="fr")


# --- runbook-bot postmortem ----------------------------------------------------------------


def _usage_error(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    capsys.readouterr()
    with pytest.raises(SystemExit) as exited:
        main(list(argv))
    assert exited.value.code == 2
    return capsys.readouterr().err


def test_cli_final_versions_export(run: Run, inc1: int, db: Database, tmp_path: Path) -> None:
    edited = tmp_path / "INC-1.md"
    bare = EN.format(answer="someone skipped the check").split("## Improvements")[0]
    edited.write_text(bare, encoding="utf-8")
    final_args = ("postmortem", "final", "INC-1", "--file", str(edited), "--lang", "en")

    code, out, err = run(*final_args, "--as", "alice")
    assert (code, out) == (1, "")
    assert "INC-1 has no follow-ups" in err and 'why 2 answers "someone skipped' in err

    run(
        "followup",
        "add",
        "INC-1",
        "ECC alert",
        "--owner",
        "slack:UBOB",
        "--deadline",
        "2026-12-31",
        "--as",
        "alice",
    )
    code, out, err = run(*final_args, "--as", "alice")
    assert code == 1 and "no follow-ups" not in err and "someone skipped" in err

    code, out, err = run(*final_args, "--as", "alice", "--confirm")
    assert (code, err) == (0, "")
    assert out.startswith("INC-1's postmortem is final: version 1 (en)\nrecorded: confirmed by")

    edited.write_text(ZH, encoding="utf-8")
    code, out, _ = run(
        "postmortem", "final", "INC-1", "--file", str(edited), "--lang", "zh", "--as", "bob"
    )
    assert (code, out) == (0, "INC-1's postmortem is final: version 2 (zh)\n")

    code, out, _ = run("postmortem", "versions", "INC-1")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split() == ["VERSION", "STATE", "LANG", "AUTHOR", "SAVED", "NOTE"]
    assert lines[1].split()[:4] == ["1", "final", "en", "alice"] and "confirmed by" in lines[1]
    assert lines[2].split()[:4] == ["2", "final", "zh", "bob"]

    code, out, _ = run("postmortem", "export", "INC-1")
    assert (code, out) == (0, ZH)
    code, out, _ = run("postmortem", "export", "INC-1", "--version", "1")
    assert code == 0 and "someone skipped the check" in out
    target = tmp_path / "out.md"
    code, out, err = run("postmortem", "export", "INC-1", "-o", str(target))
    assert (code, out) == (0, "")
    assert target.read_text(encoding="utf-8") == ZH and f"written to {target}" in err
    assert log_types(db, inc1).count("postmortem.finalized") == 2


def test_cli_postmortem_errors(
    run: Run, inc1: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run("postmortem", "export", "INC-1")
    assert (code, out) == (1, "")
    assert "INC-1 has no final postmortem yet" in err
    code, out, _ = run("postmortem", "versions", "INC-1")
    assert code == 0 and "INC-1 has no stored postmortem" in out
    code, _, err = run("postmortem", "versions", "INC-8")
    assert code == 1 and "INC-8 does not exist" in err
    code, _, err = run("postmortem", "export", "INC-1", "--version", "3")
    assert code == 1 and "no postmortem version 3" in err

    code, _, err = run("postmortem", "final", "INC-1", "--lang", "en")
    assert code == 2 and "postmortem final needs --file, --as" in err
    code, _, err = run("postmortem", "final", "--file", "x.md")
    assert code == 2 and "which incident?" in err
    code, _, err = run("postmortem", "versions", "INC-1", "--confirm")
    assert code == 2 and "--confirm is not for postmortem versions" in err
    code, _, err = run("postmortem", "INC-1", "--file", "x.md")
    assert code == 2 and "--file is not for the draft" in err
    code, _, err = run("postmortem", "INC-1", "INC-2")
    assert code == 2 and "'INC-1' is not a command" in err
    code, _, err = run("postmortem", "publish", "INC-1")
    assert (
        code == 2 and "'publish' is not a command; the commands are final, versions, export" in err
    )
    code, _, err = run("postmortem", "bogus")
    assert code == 1 and "write it like INC-42" in err
    missing = tmp_path / "missing.md"
    code, _, err = run(
        "postmortem", "final", "INC-1", "--file", str(missing), "--lang", "en", "--as", "alice"
    )
    assert code == 1 and f"cannot read {missing}" in err
    err = _usage_error(capsys, "postmortem", "final", "INC-1", "--lang", "fr")
    assert "invalid choice: 'fr'" in err


def test_cli_postmortem_incident_prints_the_draft(run: Run, inc1: int, tmp_path: Path) -> None:
    code, out, err = run("postmortem", "INC-1", "--lang", "en")
    assert code == 0, err
    assert "5-Why" in out
    # The draft answers the first why (the direct cause); its TODOs are no answers.
    whys = final.parse_whys(out)
    assert len(whys) == 5
    assert [final.answered(answer) for _, answer in whys] == [True, False, False, False, False]
    assert all(final.person_blamed(a) is None for _, a in whys if final.answered(a))
    target = tmp_path / "draft.md"
    code, out, err = run("postmortem", "INC-1", "--lang", "zh", "-o", str(target))
    assert (code, out) == (0, "")
    zh = target.read_text(encoding="utf-8")
    assert "5Why" in zh
    assert [final.answered(answer) for _, answer in final.parse_whys(zh)] == [True] + [False] * 4


def test_whys_left_todo_must_be_answered_or_deleted(rig: Rig) -> None:
    number = rig.fire()
    _item(rig, number)
    untouched = EN.format(answer="TODO").replace(
        "-> the weekly check saw ECC growth but no rule acted on it", "-> TODO"
    )
    with (
        rig.db.transaction() as session,
        pytest.raises(TransitionRefused, match=r"why 2, 3 are not answered yet"),
    ):
        final.finalize(session, number, untouched, lang="en", author="alice", now=rig.clock.now())
    shorter = "\n".join(
        line for line in untouched.splitlines() if not line.startswith(("2.", "3."))
    )
    with rig.db.transaction() as session:
        row = final.finalize(session, number, shorter, lang="en", author="alice",
                             now=rig.clock.now())  # fmt: skip
    assert row.version == 1 and row.state == "final"


def test_improvements_written_in_the_postmortem_become_follow_ups(rig: Rig) -> None:
    number = rig.fire()  # opened 2026-11-29: the handbook's `7/31` is next year's
    _finalize(rig, number, ZH, lang="zh")
    with rig.db.session() as session:
        (item,) = followups.of_incident(session, number)
    assert (item.title, item.owner, item.deadline, item.source) == (
        "SOP 补充：ECC 周增长 > 10 的卡列入观察名单", "张三", date(2027, 7, 31), "postmortem",
    )  # fmt: skip
    # The next version lists it again (and one more): only the new one is added.
    more = ZH + "2. 告警增加：ECC 增长速率告警（owner: slack:U0LISI，deadline: 2026-12-07）\n"
    _finalize(rig, number, more, lang="zh")
    with rig.db.session() as session:
        items = followups.of_incident(session, number)
    assert [(i.owner, i.deadline) for i in items] == [
        ("张三", date(2027, 7, 31)), ("slack:U0LISI", date(2026, 12, 7)),
    ]  # fmt: skip


def test_an_improvement_without_an_owner_or_a_date_is_refused_by_its_title(rig: Rig) -> None:
    number = rig.fire()
    _item(rig, number)
    body = EN.format(answer="the PCIe link dropped") + (
        "2. Replace the riser cable (owner: TODO, deadline: soon)\n"
    )
    with pytest.raises(TransitionRefused) as refused:
        _finalize(rig, number, body)
    text = str(refused.value)
    assert 'the improvement "Replace the riser cable" cannot become a follow-up' in text
    assert "its deadline 'soon' is not a date" in text
    with rig.db.session() as session:
        assert len(followups.of_incident(session, number)) == 1  # nothing half-added

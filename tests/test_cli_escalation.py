"""The escalation commands of `runbook-bot`, run in-process: `incidents silence`, `oncall`,
`oncall set` and `workers`; exit codes, what they print, what they change.

Incidents come in through the real webhook (which freezes the escalation policy and arms
the first timer); the CLI reads the same database on the system clock.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import yaml
from sqlalchemy import select

from bot.cli import main
from bot.clock import SystemClock, as_utc
from bot.config import load_settings
from bot.db import Database
from bot.escalation.models import EscalationTimer, IncidentEscalation, OncallOverride
from bot.worker import Worker
from tests.support.cli import Run
from tests.support.rows import log_types


@pytest.fixture(autouse=True)
def people(monkeypatch: pytest.MonkeyPatch) -> None:
    """The person the commands below act as: `--as` must name one (docs/security.md)."""
    monkeypatch.setenv("RUNBOOK_BOT_PEOPLE", '{"alice": {"name": "Alice", "roles": ["responder"]}}')


ROTATION = {
    "people": ["slack:UALICE", "slack:UCAROL"],
    "every": "1d",
    "handover": "09:00",
    "start": "2026-01-05",
    "timezone": "UTC",
}


@pytest.fixture
def rotation(tmp_path: Path) -> str:
    """A settings file with a daily two-person rotation."""
    path = tmp_path / "settings.yaml"
    path.write_text(yaml.safe_dump({"escalation": {"oncall": ROTATION}}), encoding="utf-8")
    return str(path)


def _pending(db: Database, number: int) -> list[EscalationTimer]:
    with db.session() as session:
        return list(
            session.scalars(
                select(EscalationTimer).where(
                    EscalationTimer.incident_number == number, EscalationTimer.state == "pending"
                )
            )
        )


# --- incidents silence -------------------------------------------------------------------


def test_silence_pages_nobody_until_then_and_writes_the_log(
    run: Run, inc1: int, db: Database
) -> None:
    (armed,) = _pending(db, inc1)
    assert armed.kind == "level"
    before = SystemClock().now()

    code, out, err = run("incidents", "silence", "INC-1", "--for", "2h", "--as", "alice")

    assert (code, err) == (0, "")
    assert out.startswith("INC-1 silenced for 2h: nobody is paged until ")
    (timer,) = _pending(db, inc1)
    assert timer.kind == "resume"
    with db.session() as session:
        row = session.get(IncidentEscalation, inc1)
        assert row is not None and row.silenced_until is not None
        until = as_utc(row.silenced_until)
    assert before + timedelta(hours=2) <= until <= SystemClock().now() + timedelta(hours=2)
    assert f"{until:%Y-%m-%d %H:%M} UTC" in out
    assert log_types(db, inc1)[-1] == "escalation.silenced"


def test_silence_refuses_a_bad_duration_with_a_usage_error(
    run: Run, inc1: int, db: Database, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["incidents", "silence", "INC-1", "--for", "2x", "--as", "alice"])

    assert exited.value.code == 2
    assert "'2x' is not a duration" in capsys.readouterr().err
    assert _pending(db, inc1)[0].kind == "level"


def test_silence_refuses_too_long_unknown_and_inactive_incidents(
    run: Run, inc1: int, db: Database
) -> None:
    code, out, err = run("incidents", "silence", "INC-1", "--for", "30d", "--as", "alice")
    assert (code, out) == (1, "")
    assert "silence an incident for 1m to 7d" in err

    code, out, err = run("incidents", "silence", "INC-9", "--for", "2h", "--as", "alice")
    assert (code, out) == (1, "")
    assert "INC-9 does not exist" in err

    code, _, _ = run("incidents", "resolve", "INC-1", "--as", "alice", "--note", "GPU reset")
    assert code == 0
    code, out, err = run("incidents", "silence", "INC-1", "--for", "2h", "--as", "alice")
    assert (code, out) == (1, "")
    assert "INC-1 is resolved: nothing to silence" in err
    assert "escalation.silenced" not in log_types(db, inc1)


# --- oncall --------------------------------------------------------------------------------


def test_oncall_with_no_rotation_says_nobody(run: Run, on_db: str) -> None:
    code, out, err = run("oncall")

    assert (code, err) == (0, "")
    assert out.startswith("Now:   nobody (no rotation, no override)")
    assert "Next:" not in out


def test_oncall_shows_the_rotation_now_and_next(run: Run, on_db: str, rotation: str) -> None:
    code, out, _ = run("--config", rotation, "oncall")

    assert code == 0
    now, following = out.splitlines()
    assert now.startswith("Now:   slack:") and "(rotation, until " in now
    assert following.startswith("Next:  slack:") and "(rotation, until " in following
    people = {now.split()[1], following.split()[1]}
    assert people == {"slack:UALICE", "slack:UCAROL"}


def test_oncall_set_makes_an_override_until_the_hand_over_or_for_a_while(
    run: Run, on_db: str, rotation: str, db: Database
) -> None:
    code, out, err = run("--config", rotation, "oncall", "set", "slack:UBOB", "--as", "alice")
    assert (code, err) == (0, "")
    now = SystemClock().now()
    handover = datetime.combine(now.date(), datetime.min.time(), UTC) + timedelta(hours=9)
    if handover <= now:
        handover += timedelta(days=1)
    assert out.strip() == (
        f"slack:UBOB is on call until {handover:%Y-%m-%d %H:%M} UTC (set by alice)"
    )
    code, out, _ = run("--config", rotation, "oncall")
    assert out.splitlines()[0].startswith("Now:   slack:UBOB (override, until ")
    assert out.splitlines()[1].startswith("Next:  slack:")

    code, out, _ = run("oncall", "set", "bob", "--for", "90m", "--as", "alice")
    assert code == 0
    assert "note: bob has no chat address" in out
    with db.session() as session:
        overrides = session.scalars(select(OncallOverride).order_by(OncallOverride.id)).all()
    assert [(o.person, o.set_by) for o in overrides] == [("slack:UBOB", "alice"), ("bob", "alice")]
    assert as_utc(overrides[1].ends_at) - as_utc(overrides[1].starts_at) == timedelta(minutes=90)


def test_oncall_set_refuses_a_bad_or_too_long_duration(
    run: Run, on_db: str, db: Database, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["oncall", "set", "slack:UBOB", "--for", "soon", "--as", "alice"])
    assert exited.value.code == 2
    assert "'soon' is not a duration" in capsys.readouterr().err

    code, out, err = run("oncall", "set", "slack:UBOB", "--for", "60d", "--as", "alice")
    assert code != 0 and out == ""
    assert "an on-call override lasts from 1m to 28d" in err
    with db.session() as session:
        assert session.scalars(select(OncallOverride)).all() == []

    with pytest.raises(SystemExit) as exited:
        main(["oncall", "set", "slack:UBOB"])  # --as is required
    assert exited.value.code == 2


# --- workers -------------------------------------------------------------------------------


def test_workers_with_none_says_so_and_exits_0(run: Run, on_db: str) -> None:
    code, out, err = run("workers")

    assert (code, err) == (0, "")
    assert "No worker has ever beaten" in out
    assert "Timers: none overdue" in out


def test_workers_lists_heartbeats_and_how_late_the_timers_are(
    run: Run, inc1: int, db: Database, db_url: str
) -> None:
    # INC-1 opened on the test server's frozen clock (2026-11-29 22:05:30 UTC): its first
    # level is due then, hours before the system clock the CLI reads.
    worker = Worker(db, load_settings(database_url=db_url), SystemClock(), owner="host-a:42")
    worker.beat()

    code, out, err = run("workers")

    assert (code, err) == (0, "")
    header, row, *rest = out.splitlines()
    assert header.split() == ["OWNER", "STARTED", "LAST", "BEAT"]
    assert row.startswith("host-a:42") and row.endswith("s ago")
    (timers,) = [line for line in rest if line.startswith("Timers:")]
    assert timers.startswith("Timers: the most overdue escalation timer is ")
    assert timers.endswith(" late")


@pytest.mark.parametrize(
    "argv",
    [("incidents", "silence"), ("oncall",), ("oncall", "set"), ("workers",)],
    ids=lambda argv: "-".join(argv),
)
def test_help_of_each_escalation_command_exits_0(
    capsys: pytest.CaptureFixture[str], argv: tuple[str, ...]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main([*argv, "--help"])

    assert exited.value.code == 0
    assert capsys.readouterr().out.startswith(f"usage: runbook-bot {' '.join(argv)}")


def test_serve_refuses_to_start_when_a_targets_secret_is_missing(
    run: Run, on_db: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    missing = tmp_path / "pd.key"
    targets = {"pd": {"kind": "pagerduty", "routing_key_file": str(missing)}}
    monkeypatch.setenv("RUNBOOK_BOT_ESCALATION", json.dumps({"targets": targets}))
    code, _, err = run("serve", "--port", "1")
    assert code == 2
    assert f"escalation.targets.pd.routing_key_file: cannot read {missing}" in err

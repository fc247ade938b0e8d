"""The `runbook-bot` command, run in-process: exit codes, what it prints, what it changes.

Settings reach the CLI only through `RUNBOOK_BOT_*` environment variables and `--config`
files, as they would from a shell; incidents come in through the real webhook.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bot import __version__, migrations
from bot.cli import main
from bot.db import Database
from bot.incidents import service
from tests.support.cli import Run
from tests.support.rows import counts, log_types, verifies

TITLE = "gpu-node-02 GPU 5 XID 79"


def test_version_prints_the_package_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--version"])

    assert exited.value.code == 0
    assert capsys.readouterr().out.strip() == f"runbook-bot {__version__}"


def test_db_upgrade_migrates_an_empty_sqlite_file_and_db_current_then_says_up_to_date(
    run: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "fresh.db"
    path.touch()  # an empty file is an empty SQLite database
    monkeypatch.setenv("RUNBOOK_BOT_DATABASE_URL", f"sqlite:///{path}")
    head = migrations.head()

    code, out, _ = run("db", "current")
    assert code == 0
    assert "revision none" in out and "behind: run `runbook-bot db upgrade`" in out

    code, out, _ = run("db", "upgrade")
    assert code == 0
    assert f"upgraded from empty to {head}" in out

    code, out, _ = run("db", "current")
    assert code == 0
    assert f"revision {head}, needs {head} (up to date)" in out

    code, out, _ = run("db", "upgrade")
    assert code == 0
    assert f"already at revision {head}" in out
    db = Database(f"sqlite:///{path}")
    try:
        assert counts(db) == {"incidents": 0, "alerts": 0, "log": 0}
    finally:
        db.dispose()


def test_incidents_list_on_an_empty_database_says_no_incidents_found(run: Run, on_db: str) -> None:
    code, out, err = run("incidents", "list")

    assert code == 0
    assert out.strip() == "No incidents found."
    assert err == ""


def test_incidents_list_shows_the_posted_incident_as_critical_and_open(run: Run, inc1: int) -> None:
    code, out, _ = run("incidents", "list")

    assert code == 0
    header, *rows = out.strip().splitlines()
    assert header.split()[:3] == ["INCIDENT", "SEVERITY", "STATUS"]
    assert len(rows) == 1
    assert rows[0].split()[:3] == ["INC-1", "critical", "open"]
    assert rows[0].endswith(TITLE)


def test_incidents_show_prints_the_title_and_the_log(run: Run, inc1: int) -> None:
    code, out, _ = run("incidents", "show", "INC-1")

    assert code == 0
    lines = out.splitlines()
    assert lines[0] == f"INC-1  {TITLE}"
    assert "Severity:  critical" in lines and "Status:    open" in lines
    log_lines = lines[lines.index("Log:") + 1 :]
    assert len(log_lines) == 2
    assert f"INC-1 opened (critical): {TITLE}" in log_lines[0]
    assert f"GPUXIDError firing: {TITLE}" in log_lines[1]
    assert "Alertmanager (bot)" in log_lines[0]


def test_json_output_of_list_and_show_parses(run: Run, inc1: int) -> None:
    code, out, _ = run("incidents", "list", "-o", "json")
    assert code == 0
    listed = json.loads(out)
    assert [(i["id"], i["severity"], i["status"]) for i in listed] == [
        ("INC-1", "critical", "open")
    ]

    code, out, _ = run("incidents", "show", "INC-1", "-o", "json")
    assert code == 0
    shown = json.loads(out)
    assert (shown["id"], shown["title"]) == ("INC-1", TITLE)
    assert [a["fingerprint"] for a in shown["alerts"]] == ["e05db4f7217eb7b7"]
    assert [e["type"] for e in shown["log"]] == ["incident.opened", "alert.firing"]


def test_ack_makes_the_acknowledger_owner_and_writes_the_log(
    run: Run, inc1: int, db: Database
) -> None:
    code, out, _ = run("incidents", "ack", "INC-1", "--as", "alice")

    assert code == 0
    assert "INC-1 acknowledged (owner: alice)" in out
    with db.session() as session:
        incident = service.get(session, inc1)
        assert (incident.status, incident.owner, incident.acknowledged_by) == (
            "acknowledged",
            "alice",
            "alice",
        )
    assert log_types(db, inc1)[-1] == "incident.acknowledged"
    assert verifies(db, inc1)


def test_resolving_a_critical_incident_without_a_note_is_refused_and_changes_nothing(
    run: Run, inc1: int, db: Database
) -> None:
    assert run("incidents", "ack", "INC-1", "--as", "alice")[0] == 0
    before = counts(db)

    code, out, err = run("incidents", "resolve", "INC-1", "--as", "alice")

    assert code == 1
    assert out == ""
    assert "INC-1 is critical" in err
    assert "say what was done before resolving it" in err and "--note" in err
    assert counts(db) == before
    with db.session() as session:
        incident = service.get(session, inc1)
        assert (incident.status, incident.disposition, incident.resolved_at) == (
            "acknowledged",
            None,
            None,
        )
    assert "incident.resolved" not in log_types(db, inc1)


def test_resolve_with_a_note_resolves_and_records_the_disposition(
    run: Run, inc1: int, db: Database
) -> None:
    note = "drained gpu-node-02, GPU 5 reset, back in service"

    code, out, _ = run("incidents", "resolve", "INC-1", "--as", "alice", "--note", note)

    assert code == 0
    assert "INC-1 resolved (owner: alice)" in out
    with db.session() as session:
        incident = service.get(session, inc1)
        assert (incident.status, incident.owner, incident.disposition) == (
            "resolved",
            "alice",
            note,
        )
    assert log_types(db, inc1)[-1] == "incident.resolved"
    assert verifies(db, inc1)


def test_show_of_a_missing_incident_exits_1_saying_it_does_not_exist(run: Run, on_db: str) -> None:
    code, out, err = run("incidents", "show", "INC-99")

    assert code == 1
    assert out == ""
    assert "INC-99 does not exist" in err


@pytest.mark.parametrize(
    "argv",
    [("incidents", "list"), ("db", "current"), ("log", "verify"), ("config",)],
    ids=["incidents-list", "db-current", "log-verify", "config"],
)
def test_an_invalid_setting_makes_any_command_exit_2_naming_the_setting(
    run: Run, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, argv: tuple[str, ...]
) -> None:
    monkeypatch.setenv("RUNBOOK_BOT_DATABASE_URL", f"sqlite:///{tmp_path / 'unused.db'}")
    monkeypatch.setenv("RUNBOOK_BOT_LISTEN_PORT", "abc")

    code, out, err = run(*argv)

    assert code == 2
    assert out == ""
    assert "listen_port" in err and "RUNBOOK_BOT_LISTEN_PORT" in err
    assert not (tmp_path / "unused.db").exists()


def test_an_unknown_key_in_the_yaml_config_exits_2_naming_the_key(run: Run, tmp_path: Path) -> None:
    config = tmp_path / "bot.yaml"
    config.write_text(f"database_url: sqlite:///{tmp_path / 'bot.db'}\nlisten_prot: 9000\n")

    code, out, err = run("--config", str(config), "incidents", "list")

    assert code == 2
    assert out == ""
    assert "listen_prot" in err and "unknown setting" in err


def test_a_yaml_syntax_error_exits_2_naming_file_line_and_column(run: Run, tmp_path: Path) -> None:
    config = tmp_path / "bot.yaml"
    config.write_text("listen_port: 9000\nlog_level: [info\nreopen_window: 2h\n")

    code, out, err = run("--config", str(config), "incidents", "list")

    assert code == 2
    assert out == ""
    # The unclosed flow sequence is reported where YAML noticed: line 3, column 14.
    assert f"{config}:3:14: not valid YAML" in err


@pytest.mark.parametrize(
    "argv",
    [
        ("serve",),
        ("db", "upgrade"),
        ("incidents", "list"),
        ("incidents", "show"),
        ("incidents", "ack"),
        ("incidents", "resolve"),
        ("log", "verify"),
    ],
    ids=lambda argv: "-".join(argv),
)
def test_help_of_each_command_exits_0(
    capsys: pytest.CaptureFixture[str], argv: tuple[str, ...]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main([*argv, "--help"])

    assert exited.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: runbook-bot {' '.join(argv)}")


def test_commands_on_an_unmigrated_database_say_to_run_db_upgrade(
    run: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RUNBOOK_BOT_DATABASE_URL", f"sqlite:///{tmp_path / 'empty.db'}")

    code, out, err = run("incidents", "list")

    assert code == 1
    assert out == ""
    assert "schema revision none (empty)" in err
    assert "run `runbook-bot db upgrade` first" in err

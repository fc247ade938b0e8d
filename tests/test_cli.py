"""The `runbook-bot` command, run in-process: exit codes, what it prints, what it changes.

Settings reach the CLI only through `RUNBOOK_BOT_*` environment variables and `--config`
files, as they would from a shell; incidents come in through the real webhook.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from bot import __version__, cli, migrations
from bot.cli import main
from bot.db import Database
from bot.incidents import filters, service
from bot.incidents.log import entries as log_entries
from tests.support.cli import Run
from tests.support.payloads import alert, notification
from tests.support.rows import counts, log_types, verifies


@pytest.fixture(autouse=True)
def people(monkeypatch: pytest.MonkeyPatch) -> None:
    """The person the commands below act as: `--as` must name one (docs/security.md)."""
    monkeypatch.setenv("RUNBOOK_BOT_PEOPLE", '{"alice": {"name": "Alice", "roles": ["responder"]}}')


TITLE = "gpu-node-02 GPU 5 XID 79"


def refused(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """Run a command argparse refuses: (exit code, stdout, stderr)."""
    capsys.readouterr()
    with pytest.raises(SystemExit) as exited:
        main(list(argv))
    out, err = capsys.readouterr()
    assert isinstance(exited.value.code, int)
    return exited.value.code, out, err


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
    # The unclosed list is reported where it opened, saying where YAML noticed.
    assert err == (
        f"runbook-bot: {config}:2:12: not valid YAML: the list [...] opened here is not "
        "closed before line 3, column 14: add the closing ']' where it ends (and a comma "
        "between its items)\n"
    )


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


# --- list filters: the console's words, and nothing that silently matches nothing ----------


@pytest.fixture
def three(client: httpx.Client, inc1: int, run: Run) -> None:
    """INC-1 critical and open, INC-2 warning and acknowledged, INC-3 info and resolved."""
    warm = alert(alertname="GPUHighTemperature", severity="warning", host="gpu-node-05")
    idle = alert(alertname="GPULowUtilization", severity="info", host="gpu-node-09")
    for one in (warm, idle):
        assert client.post("/webhooks/alertmanager", json=notification([one])).status_code == 200
    assert run("incidents", "ack", "INC-2", "--as", "alice")[0] == 0
    assert run("incidents", "resolve", "INC-3", "--as", "alice", "--note", "idle")[0] == 0


def listed(run: Run, *options: str) -> list[str]:
    code, out, err = run("incidents", "list", "-o", "json", *options)
    assert (code, err) == (0, "")
    return [incident["id"] for incident in json.loads(out)]


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        ((), ["INC-3", "INC-2", "INC-1"]),
        (("--status", "active"), ["INC-2", "INC-1"]),
        (("--status", "all"), ["INC-3", "INC-2", "INC-1"]),
        (("--status", "open"), ["INC-1"]),
        (("--status", "resolved,closed"), ["INC-3"]),
        (("--severity", "critical"), ["INC-1"]),
        (("--severity", "all", "--status", "active"), ["INC-2", "INC-1"]),
        (("--status", "active", "--severity", "warning", "--severity", "info"), ["INC-2"]),
        (("--status", "Active"), ["INC-2", "INC-1"]),
    ],
    ids=lambda value: " ".join(value) if isinstance(value, tuple) else None,
)
def test_incidents_list_filters_take_the_consoles_words(
    run: Run, three: None, options: tuple[str, ...], expected: list[str]
) -> None:
    assert listed(run, *options) == expected


def test_an_empty_filtered_list_says_which_filter_found_nothing(run: Run, inc1: int) -> None:
    assert run("incidents", "list", "--status", "active", "--severity", "info") == (
        0,
        "No incidents found (status open or acknowledged; severity info).\n",
        "",
    )


@pytest.mark.parametrize(
    ("option", "word", "message"),
    [
        (
            "--status",
            "bogus",
            "argument --status: unknown status 'bogus': use one of active, all, open, "
            "acknowledged, resolved, closed",
        ),
        (
            "--status",
            "open,nope",
            "argument --status: unknown status 'nope': use one of active, all, open, "
            "acknowledged, resolved, closed",
        ),
        (
            "--severity",
            "crit",
            "argument --severity: unknown severity 'crit': use one of all, critical, warning, info",
        ),
        ("--limit", "0", "argument --limit: '0' is not a number of incidents; give 1 or more"),
    ],
)
def test_an_unknown_filter_word_exits_2_listing_the_valid_ones_and_changes_nothing(
    capsys: pytest.CaptureFixture[str],
    inc1: int,
    db: Database,
    option: str,
    word: str,
    message: str,
) -> None:
    before = counts(db)

    code, out, err = refused(capsys, "incidents", "list", option, word)

    assert code == 2
    assert out == ""
    assert err.splitlines()[-1] == f"runbook-bot incidents list: error: {message}"
    assert counts(db) == before


def test_the_cli_lists_the_same_filter_words_as_the_api_and_the_console() -> None:
    from bot.chat.console import pages

    assert tuple(filters.STATUSES) == pages.STATUSES
    assert tuple(filters.SEVERITIES) == pages.SEVERITIES


# --- settings errors: one line naming the setting, exit 2, no traceback, nothing touched ----


@pytest.mark.parametrize(
    "argv",
    [
        ("incidents", "list"),
        ("serve",),
        ("worker",),
        ("config",),
        ("validate",),
        ("db", "upgrade"),
        ("steps", "INC-1"),
    ],
    ids=lambda argv: "-".join(argv),
)
def test_bad_json_in_an_environment_variable_is_one_message_naming_it_in_every_command(
    run: Run, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, argv: tuple[str, ...]
) -> None:
    monkeypatch.setenv("RUNBOOK_BOT_DATABASE_URL", f"sqlite:///{tmp_path / 'unused.db'}")
    monkeypatch.setenv("RUNBOOK_BOT_ROLES", '{alice: ["admin"]}')

    code, out, err = run(*argv)

    assert code == 2
    assert out == ""
    assert err.splitlines() == [
        "runbook-bot: invalid settings:",
        "  RUNBOOK_BOT_ROLES: not valid JSON (Expecting property name enclosed in double "
        "quotes, at character 2): roles takes a JSON object; quote it for the shell "
        "(RUNBOOK_BOT_ROLES='{\"name\": ...}'), or set `roles` in the YAML settings file "
        "(--config) instead",
    ]
    assert not (tmp_path / "unused.db").exists()


def test_a_misspelt_yaml_key_at_any_depth_gets_did_you_mean_with_its_line(
    run: Run, tmp_path: Path
) -> None:
    config = tmp_path / "bot.yaml"
    config.write_text(
        f"database_url: sqlite:///{tmp_path / 'bot.db'}\n"
        "slak_channel: C0123ABC\n"
        "console:\n"
        "  sesion_ttl: 8h\n"
        "escalation:\n"
        "  targets:\n"
        "    pd: {kind: pagerduty, routing_key_evn: PD_KEY}\n"
    )

    code, out, err = run("--config", str(config), "incidents", "list")

    assert (code, out) == (2, "")
    assert err.splitlines() == [
        "runbook-bot: invalid settings:",
        f"  unknown setting 'slak_channel' in {config}:2: did you mean 'slack_channel'?",
        f"  unknown setting 'console.sesion_ttl' in {config}:4: did you mean "
        "'console.session_ttl'?",
        f"  unknown setting 'escalation.targets.pd.routing_key_evn' in {config}:7: did you "
        "mean 'escalation.targets.pd.routing_key_env'?",
    ]
    assert not (tmp_path / "bot.db").exists()


def test_a_misindented_settings_file_points_at_the_line_with_the_fix(
    run: Run, tmp_path: Path
) -> None:
    config = tmp_path / "bot.yaml"
    config.write_text("console:\n    enabled: false\n  session_ttl: 8h\n")

    code, out, err = run("--config", str(config), "config")

    assert (code, out) == (2, "")
    assert err == (
        f"runbook-bot: {config}:3:3: not valid YAML: this line is indented differently from "
        "the keys above it: `session_ttl:` starts at column 3, the keys around it at column 5 "
        "(`enabled:`, line 2) or column 1 (`console:`, line 1); move it to the column of the "
        "key it belongs with (spaces only)\n"
    )


# --- --help: fast because it imports only the parser ---------------------------------------

HEAVY = (
    "sqlalchemy",
    "alembic",
    "kubernetes",
    "slack_sdk",
    "slack_bolt",
    "starlette",
    "uvicorn",
    "jinja2",
    "httpx",
    "pydantic",
    "yaml",
    "bot.config",
    "bot.db",
)


def test_top_level_help_imports_none_of_the_heavy_libraries() -> None:
    probe = (
        "import contextlib, io, json, sys\n"
        "from bot.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()) as out, "
        "contextlib.suppress(SystemExit):\n"
        "    main(['--help'])\n"
        "print(json.dumps({'help': out.getvalue(), 'modules': sorted(sys.modules)}))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True
    )
    seen = json.loads(done.stdout)

    assert seen["help"].startswith("usage: runbook-bot")
    assert [name for name in cli.COMMANDS if f"    {name} " not in seen["help"]] == []
    loaded = [m for m in seen["modules"] if any(m == h or m.startswith(h + ".") for h in HEAVY)]
    assert loaded == []


def test_the_command_list_is_the_same_whichever_command_is_loaded() -> None:
    """`--help` lists the lazy table's summaries; with a command loaded, its module's own
    help: the two agree for every command, in the same order."""
    lazy = cli.parser().format_help()

    assert {name: cli.parser(name).format_help() == lazy for name in cli.COMMANDS} == {
        name: True for name in cli.COMMANDS
    }


@pytest.mark.parametrize(
    "argv",
    [
        ["incidents", "ack", "INC-1", "--as", "mallory"],
        ["incidents", "resolve", "INC-1", "--as", "mallory", "--note", "fixed"],
        ["incidents", "reopen", "INC-1", "--as", "mallory"],
        ["incidents", "silence", "INC-1", "--for", "2h", "--as", "mallory"],
        ["oncall", "set", "slack:UBOB", "--as", "mallory"],
    ],
)
def test_an_incident_decision_from_the_cli_must_name_a_known_person(
    run: Run, inc1: int, db: Database, argv: list[str]
) -> None:
    before = counts(db)

    code, _, err = run(*argv)

    assert code == 2
    assert "--as 'mallory' is not a person in the settings; known: alice" in err
    assert counts(db) == before


def test_an_incident_decision_from_the_cli_records_the_person_the_channel_and_the_os_user(
    run: Run, inc1: int, db: Database
) -> None:
    import getpass

    assert run("incidents", "ack", "INC-1", "--as", "alice")[0] == 0

    with db.session() as session:
        entry = [e for e in log_entries(session, inc1) if e.type == "incident.acknowledged"][0]
    assert entry.actor_id == "alice"
    assert entry.data["by"] == {
        "person": "alice",
        "channel": "cli",
        "via": f"os:{getpass.getuser()}",
    }

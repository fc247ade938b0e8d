"""Settings: defaults that work, environment over YAML, and errors that name the setting."""

from __future__ import annotations

import json
import re
import types
from datetime import timedelta
from pathlib import Path
from typing import Annotated, Any, Union, get_args, get_origin

import pytest
from pydantic import BaseModel, SecretStr

from bot.config import Settings, load_settings, reference_markdown
from bot.config_sources import MASK, is_secret
from bot.errors import ConfigInvalid
from tests.support.cli import Run

DOCS = Path(__file__).resolve().parents[1] / "docs" / "configuration.md"


def test_defaults_give_the_embedded_setup() -> None:
    settings = load_settings()

    assert settings.database_url == "sqlite:///./runbook-bot.db"
    assert settings.runbooks_dir == Path("runbooks")
    assert (settings.listen_host, settings.listen_port) == ("127.0.0.1", 8080)
    assert settings.max_body_bytes == 1024 * 1024
    assert settings.reopen_window == timedelta(hours=24)
    assert settings.bearer_token() is None


def test_environment_overrides_the_yaml_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "bot.yaml"
    config.write_text("listen_port: 9000\nreopen_window: 2h\nlog_level: debug\n")
    monkeypatch.setenv("RUNBOOK_BOT_LISTEN_PORT", "9100")
    monkeypatch.setenv("RUNBOOK_BOT_CONFIG", str(config))

    settings = load_settings()

    assert settings.listen_port == 9100
    assert settings.reopen_window == timedelta(hours=2)
    assert settings.log_level == "debug"


def test_plain_postgresql_urls_use_psycopg_3() -> None:
    settings = load_settings(database_url="postgresql://bot@db:5432/runbook_bot")

    assert settings.database_url == "postgresql+psycopg://bot@db:5432/runbook_bot"


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ({"listen_port": 70000}, "listen_port: Input should be less than or equal to 65535"),
        ({"database_url": "mysql://x"}, "database_url: use sqlite:///PATH or postgresql+psycopg"),
        ({"reopen_window": "a day"}, "reopen_window: 'a day' is not a duration"),
        ({"log_level": "loud"}, "log_level: use one of debug, info, warning, error"),
        ({"webhook_username": "am"}, "webhook_username and webhook_password go together"),
        ({"webhook_token": "a", "webhook_token_file": "/etc/hostname"}, "not both"),
        ({"max_body_bytes": 10}, "max_body_bytes: Input should be greater than or equal to 1024"),
    ],
)
def test_invalid_settings_name_the_setting_and_the_fix(
    values: dict[str, object], expected: str
) -> None:
    with pytest.raises(ConfigInvalid) as caught:
        load_settings(**values)

    assert expected in str(caught.value)


def test_invalid_environment_value_names_its_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RUNBOOK_BOT_LISTEN_PORT", "eighty")

    with pytest.raises(ConfigInvalid) as caught:
        load_settings()

    assert str(caught.value) == (
        "invalid settings:\n"
        "  listen_port: Input should be a valid integer, unable to parse string as an integer, "
        "not 'eighty' (set by RUNBOOK_BOT_LISTEN_PORT)"
    )


def test_unknown_yaml_key_and_broken_yaml_are_refused(tmp_path: Path) -> None:
    typo = tmp_path / "typo.yaml"
    typo.write_text("listen_prot: 9000\n")
    broken = tmp_path / "broken.yaml"
    broken.write_text("listen_port: 9000\n  bad: [\n")

    with pytest.raises(ConfigInvalid) as unknown:
        load_settings(typo)
    with pytest.raises(ConfigInvalid) as syntax:
        load_settings(broken)
    with pytest.raises(ConfigInvalid) as missing:
        load_settings(tmp_path / "absent.yaml")

    assert str(unknown.value) == (
        f"invalid settings:\n  unknown setting 'listen_prot' in {typo}:1: did you mean "
        "'listen_port'?"
    )
    assert f"{broken}:2:" in str(syntax.value)
    assert "cannot read config file" in str(missing.value)


def test_secrets_do_not_show_in_settings_repr() -> None:
    settings = load_settings(webhook_token="tok-123", webhook_username="am", webhook_password="pw")

    assert "tok-123" not in repr(settings)
    assert "'pw'" not in repr(settings)
    assert settings.bearer_token() == "tok-123"


def test_docs_configuration_is_the_generated_reference() -> None:
    assert DOCS.read_text() == reference_markdown(), (
        "docs/configuration.md is stale: run "
        "`runbook-bot config --reference > docs/configuration.md`"
    )


def test_every_nested_section_of_the_reference_points_at_a_page_that_exists() -> None:
    linked = re.findall(r"`see (docs/[a-z]+\.md)`", reference_markdown())

    assert linked == ["docs/topology.md", "docs/bmc.md", "docs/escalation.md", "docs/console.md"]
    assert [page for page in linked if not (DOCS.parents[1] / page).is_file()] == []


def test_settings_from_a_json_environment_variable_name_the_key_inside_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("RUNBOOK_BOT_CONSOLE", '{"enabld": false}')
    monkeypatch.setenv("RUNBOOK_BOT_ROLES", '{"alice": ["admn"]}')

    with pytest.raises(ConfigInvalid) as caught:
        load_settings()

    assert str(caught.value).splitlines() == [
        "invalid settings:",
        "  unknown setting 'console.enabld' in environment variable RUNBOOK_BOT_CONSOLE: did "
        "you mean 'console.enabled'?",
        "  roles.alice.0: Input should be 'responder', 'second_line' or 'admin', not 'admn' "
        "(set by RUNBOOK_BOT_ROLES)",
    ]


def test_an_error_across_settings_says_where_each_was_set(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "bot.yaml"
    config.write_text("webhook_username: am\n")
    monkeypatch.setenv("RUNBOOK_BOT_WEBHOOK_TOKEN", "tok-123")
    monkeypatch.setenv("RUNBOOK_BOT_WEBHOOK_TOKEN_FILE", "/etc/hostname")

    with pytest.raises(ConfigInvalid) as caught:
        load_settings(config)

    assert str(caught.value).splitlines() == [
        "invalid settings:",
        "  settings: set webhook_token or webhook_token_file, not both (webhook_token set by "
        "RUNBOOK_BOT_WEBHOOK_TOKEN; webhook_token_file set by RUNBOOK_BOT_WEBHOOK_TOKEN_FILE)",
    ]


def test_an_unknown_key_with_no_near_match_lists_what_its_section_takes(tmp_path: Path) -> None:
    config = tmp_path / "bot.yaml"
    config.write_text("bmc:\n  zzz: 1\nqqqq: 2\n")

    with pytest.raises(ConfigInvalid) as caught:
        load_settings(config)

    assert str(caught.value).splitlines() == [
        "invalid settings:",
        f"  unknown setting 'bmc.zzz' in {config}:2: bmc takes credentials, nodes, "
        "annotations, allowed_networks, timeout, power_timeout, attempts",
        f"  unknown setting 'qqqq' in {config}:3: `runbook-bot config --reference` lists "
        "every setting",
    ]


# --- `runbook-bot config`: what is in effect, from where, secrets masked -------------------

SECRETS = {
    "webhook_token": "Qz81Kx04LmTt",
    "webhook_password": "Pw93Vn27RtYy",
    "slack_bot_token": "xoxb-Bq55Hd62Ws",
    "slack_signing_secret": "Gs17Jk39NbUu",
    "slack_app_token": "xapp-Ap24Rc81Zq",
}
CONSOLE_SECRETS = {
    "admin_token": "Ad66Fq02PlMmXxRr44",
    "session_secret": "Ss77Hw45KjOoVv",
}
HASH = "scrypt$n=16384,r=8,p=1$Yq8Zr3Wd5Lp2Kx7Mv4Nc9B$Tg6Hj1Qw8Er5Ty2Ui9Op4As7Df3Gh0Jk6Lz1Xc8Vb5"


def _secret_settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    config = tmp_path / "bot.yaml"
    config.write_text(
        "webhook_username: am\n"
        "slack_channel: C0123ABC\n"
        "database_url: postgresql+psycopg://bot:Dp10Xr7Wq3Zs@db:5432/rb?sslkey=Dq11Vm8Lk\n"
        "escalation:\n"
        "  targets:\n"
        "    hook: {kind: webhook, url: 'https://hooks.example.com/T0/B0/Hk12Nz6Pb4Yt'}\n"
        "console:\n"
        f"  users:\n    alice: {{password_hash: '{HASH}', roles: [admin]}}\n"
        + "".join(f"  {name}: {value}\n" for name, value in CONSOLE_SECRETS.items())
    )
    for name, value in SECRETS.items():
        monkeypatch.setenv(f"RUNBOOK_BOT_{name.upper()}", value)
    return config


def _leaks(text: str) -> list[str]:
    """Every secret of `_secret_settings` of which any 6 characters show in `text`."""
    values = [
        *SECRETS.values(),
        *CONSOLE_SECRETS.values(),
        HASH,
        "Dp10Xr7Wq3Zs",
        "Dq11Vm8Lk",
        "Hk12Nz6Pb4Yt",
    ]
    return [v for v in values if any(v[i : i + 6] in text for i in range(len(v) - 5))]


def test_config_prints_each_value_and_where_it_came_from_with_every_secret_masked(
    run: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = _secret_settings(tmp_path, monkeypatch).name  # bot.yaml, as a user would type
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("RUNBOOK_BOT_LISTEN_PORT", "9100")

    code, out, err = run("--config", config, "config")

    assert (code, err) == (0, "")
    rows = {line.split()[0]: line.split()[1:] for line in out.splitlines()[1:]}
    assert out.splitlines()[0].split() == ["SETTING", "VALUE", "SOURCE"]
    assert rows["listen_port"] == ["9100", "env", "RUNBOOK_BOT_LISTEN_PORT"]
    assert rows["listen_host"] == ["127.0.0.1", "default"]
    assert rows["slack_channel"] == ["C0123ABC", "file", f"{config}:2"]
    assert rows["webhook_token"] == [MASK, "env", "RUNBOOK_BOT_WEBHOOK_TOKEN"]
    assert rows["console.users.alice.password_hash"] == [MASK, "file", f"{config}:9"]
    assert rows["console.users.alice.roles"] == ["[admin]", "file", f"{config}:9"]
    assert rows["console.admin_token"] == [MASK, "file", f"{config}:10"]
    assert rows["console.session_ttl"] == ["12h", "default"]
    assert rows["database_url"] == [
        f"postgresql+psycopg://bot:{MASK}@db:5432/rb?{MASK}",
        "file",
        f"{config}:3",
    ]
    assert rows["escalation.targets.hook.url"] == [
        f"https://hooks.example.com/{MASK}",
        "file",
        f"{config}:6",
    ]
    assert len(rows) == len(out.splitlines()) - 1  # one line per setting
    # Short lines: only a long value (the database URL) makes its own line longer.
    long = [line for line in out.splitlines() if len(line) > 120]
    assert [line.split()[0] for line in long] == ["database_url"]
    assert _leaks(out) == []


def test_config_shows_a_url_with_nothing_secret_exactly_as_it_is_set(run: Run) -> None:
    # The embedded default: a URL with no host (sqlite:///PATH) keeps its three slashes.
    code, out, err = run("config")

    assert (code, err) == (0, "")
    rows = {line.split()[0]: line.split()[1:] for line in out.splitlines()[1:]}
    assert rows["database_url"] == ["sqlite:///./runbook-bot.db", "default"]


def test_config_json_has_the_same_rows_and_masks_the_same_secrets(
    run: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = _secret_settings(tmp_path, monkeypatch)

    code, out, _ = run("--config", str(config), "config", "-o", "json")
    table = run("--config", str(config), "config")[1]

    rows = json.loads(out)
    assert code == 0
    assert [row["setting"] for row in rows] == [line.split()[0] for line in table.splitlines()[1:]]
    by_name = {row["setting"]: row for row in rows}
    assert by_name["webhook_token"] == {
        "setting": "webhook_token",
        "value": MASK,
        "source": "env",
        "where": "RUNBOOK_BOT_WEBHOOK_TOKEN",
    }
    assert by_name["kubeconfig"] == {
        "setting": "kubeconfig",
        "value": None,
        "source": "default",
        "where": None,
    }
    assert _leaks(out) == []


def test_an_invalid_secret_is_named_but_never_echoed(
    run: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "bot.yaml"
    config.write_text(
        "console:\n  admin_token: AdminTok7\n  users:\n    bob: {password_hash: pw-Sekret99}\n"
    )

    code, out, err = run("--config", str(config), "config")

    assert (code, out) == (2, "")
    assert "console.users.bob.password_hash: not a password hash" in err
    assert "AdminTok7" not in err and "Sekret" not in err


def test_config_reference_is_the_generated_docs_page(run: Run) -> None:
    assert run("config", "--reference") == (0, DOCS.read_text(), "")


def _secret_fields(model: type[BaseModel], prefix: str = "") -> list[str]:
    found = []
    for name, info in model.model_fields.items():
        for kind in _types(info.annotation):
            if kind is SecretStr:
                found.append(prefix + name)
            elif isinstance(kind, type) and issubclass(kind, BaseModel):
                found += _secret_fields(kind, f"{prefix}{name}.")
    return found


def _types(annotation: Any) -> list[Any]:
    origin = get_origin(annotation)
    if origin is Annotated:
        return _types(get_args(annotation)[0])
    if origin in (Union, types.UnionType, dict, list):
        return [kind for arg in get_args(annotation) for kind in _types(arg)]
    return [annotation]


def test_every_secret_setting_is_one_the_masking_recognises_by_name() -> None:
    secrets = _secret_fields(Settings)

    assert len(secrets) >= 7
    assert [name for name in secrets if not is_secret(name.rsplit(".", 1)[-1])] == []
    assert [
        n for n in ("routing_key_file", "password_env", "webhook_username") if is_secret(n)
    ] == []

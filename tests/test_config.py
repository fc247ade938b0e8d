"""Settings: defaults that work, environment over YAML, and errors that name the setting."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from bot.config import load_settings, reference_markdown
from bot.errors import ConfigInvalid

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

    assert "env RUNBOOK_BOT_LISTEN_PORT or YAML key `listen_port`" in str(caught.value)


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

    assert f"listen_prot: unknown setting (see `runbook-bot config` for the list) in {typo}" in str(
        unknown.value
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
        "docs/configuration.md is stale: run `runbook-bot config > docs/configuration.md`"
    )

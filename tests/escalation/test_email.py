"""E-mail over SMTP against a real SMTP server on loopback."""

from __future__ import annotations

import email
from pathlib import Path
from typing import Any

import pytest

from bot.errors import PageRefused, PageUnavailable
from bot.escalation import Page, targets_from
from tests.escalation import fake_smtp
from tests.escalation.conftest import SMTP_PASSWORD

pytestmark = pytest.mark.timeout(20)

FAST = {"timeout": 0.5, "attempts": 3, "backoff": 0.01}
PAGE = Page(
    number=7,
    severity="critical",
    title="gpu-node-02 GPU 5 fell off the bus",
    summary="XID 79 on gpu-node-02; 3 training jobs lost their GPUs.",
    level=1,
    url="https://bot.example/incidents/7",
)


@pytest.fixture
def env(tmp_path: Path) -> Path:
    (tmp_path / "smtp.password").write_text(SMTP_PASSWORD)
    return tmp_path


def test_mail_is_sent_with_subject_and_login(
    env: Path, sleeps: list[float], secrets_absent: list[Any]
) -> None:
    with fake_smtp.smtp_server(logins={"bot": SMTP_PASSWORD}) as box:
        mail = targets_from({"m": {
            "kind": "email", "host": "127.0.0.1", "port": box.port, "username": "bot",
            "password_file": str(env / "smtp.password"), "sender": "bot@example.org",
            "recipients": ["oncall@example.org", "second@example.org"], **FAST,
        }}, sleep=sleeps.append)["m"]  # fmt: skip
        delivery = mail.send(PAGE)
    secrets_absent.append(delivery)

    assert (delivery.ok, delivery.attempts) == (True, 1)
    (envelope,) = box.messages
    assert envelope.rcpt_tos == ["oncall@example.org", "second@example.org"]
    message = email.message_from_bytes(envelope.original_content or b"")
    assert message["Subject"] == "[runbook-bot] INC-7 critical: gpu-node-02 GPU 5 fell off the bus"
    assert "XID 79" in message.get_payload()


def test_a_refused_recipient_is_a_refusal_naming_the_address(
    sleeps: list[float], secrets_absent: list[Any]
) -> None:
    with fake_smtp.smtp_server(refuse={"gone@example.org"}) as box:
        mail = targets_from({"m": {
            "kind": "email", "host": "127.0.0.1", "port": box.port,
            "sender": "bot@example.org", "recipients": ["gone@example.org"], **FAST,
        }}, sleep=sleeps.append)["m"]  # fmt: skip
        delivery = mail.send(PAGE)
    secrets_absent.append(delivery)

    assert (delivery.ok, delivery.attempts, box.messages) == (False, 1, [])
    assert isinstance(delivery.error, PageRefused)
    assert "gone@example.org: 550" in delivery.detail
    assert "check the recipients setting" in delivery.detail


def test_a_silent_smtp_server_times_out_and_is_retried(sleeps: list[float]) -> None:
    with fake_smtp.silent_port() as port:
        mail = targets_from({"m": {
            "kind": "email", "host": "127.0.0.1", "port": port, "sender": "bot@example.org",
            "recipients": ["oncall@example.org"], **FAST, "attempts": 2,
        }}, sleep=sleeps.append)["m"]  # fmt: skip
        delivery = mail.send(PAGE)

    assert (delivery.ok, delivery.attempts, sleeps) == (False, 2, [0.01])
    assert isinstance(delivery.error, PageUnavailable)
    assert "email target 'm' (smtp 127.0.0.1" in delivery.detail
    assert "did not answer within 0.5 s" in delivery.detail

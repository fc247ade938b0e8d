"""Fixtures of the paging tests: recorded backoff sleeps, and the check that no secret
reaches a Delivery, an error or a log line."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest

from bot.escalation import Delivery
from tests.support.fake_pagers import (
    DING_SECRET,
    DING_TOKEN,
    FEISHU_SECRET,
    FEISHU_TOKEN,
    HOOK_SECRET,
    PD_KEY,
    WECOM_KEY,
)

SMTP_PASSWORD = "smtp-password-4f9a1c"
# Wrong credentials are still credentials: they must not show either.
SHORT_KEY = "short-routing-key"
WRONG_SECRET = "wrong-secret-value"
SECRETS = (PD_KEY, WECOM_KEY, DING_TOKEN, DING_SECRET, FEISHU_TOKEN, FEISHU_SECRET,
           HOOK_SECRET, SMTP_PASSWORD, SHORT_KEY, WRONG_SECRET)  # fmt: skip


@pytest.fixture
def sleeps() -> list[float]:
    return []


@pytest.fixture(autouse=True)
def secrets_absent(caplog: pytest.LogCaptureFixture) -> Iterator[list[Any]]:
    """Everything a test shows (Deliveries, errors) goes in the list; checked after it."""
    caplog.set_level(logging.DEBUG)
    shown: list[Any] = []
    yield shown
    # In teardown `caplog.records` is the teardown phase's; the test's are under "call".
    records = caplog.get_records("setup") + caplog.get_records("call")
    texts = [r.getMessage() for r in records] + [str(x) for x in shown]
    texts += [str(d.error) for d in shown if isinstance(d, Delivery)]
    for text in texts:
        for secret in SECRETS:
            assert secret not in text

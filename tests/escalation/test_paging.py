"""Each paging target against a loopback fake of its service, including its error answers.

Every test also checks that no key, token or password shows up in a Delivery, an
exception or a captured log line (the `secrets_absent` fixture runs after each test).
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import bot.escalation as escalation
from bot.errors import ConfigInvalid, PageRefused, PageUnavailable
from bot.escalation import Page, Target, targets_from
from tests.escalation.conftest import SHORT_KEY, WRONG_SECRET
from tests.support import fake_pagers
from tests.support.fake_pagers import (
    DING_SECRET,
    DING_TOKEN,
    FEISHU_SECRET,
    FEISHU_TOKEN,
    HOOK_SECRET,
    PD_KEY,
    WECOM_KEY,
    FakePagers,
)

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
def pagers() -> Iterator[FakePagers]:
    with fake_pagers.running() as fake:
        yield fake


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    for name, value in {"WECOM_KEY": WECOM_KEY, "DING_TOKEN": DING_TOKEN,
                        "DING_SECRET": DING_SECRET, "FEISHU_SECRET": FEISHU_SECRET,
                        "HOOK_SECRET": HOOK_SECRET}.items():  # fmt: skip
        monkeypatch.setenv(name, value)
    (tmp_path / "pd.key").write_text(PD_KEY + "\n")
    (tmp_path / "feishu.token").write_text(FEISHU_TOKEN)
    return tmp_path


def settings(kind: str, url: str, secrets: Path, **extra: Any) -> dict[str, Any]:
    base: dict[str, dict[str, Any]] = {
        "pagerduty": {"events_url": url, "routing_key_file": str(secrets / "pd.key")},
        "webhook": {"url": f"{url}/hook", "secret_env": "HOOK_SECRET"},
        "wecom": {"base_url": url, "key_env": "WECOM_KEY"},
        "dingtalk": {
            "base_url": url,
            "access_token_env": "DING_TOKEN",
            "secret_env": "DING_SECRET",
        },  # fmt: skip
        "feishu": {
            "base_url": url,
            "token_file": str(secrets / "feishu.token"),
            "secret_env": "FEISHU_SECRET",
        },  # fmt: skip
    }
    return {"kind": kind, **base[kind], **FAST, **extra}


def target(kind: str, pagers: FakePagers, env: Path, sleeps: list[float], **extra: Any) -> Target:
    built = targets_from({f"t-{kind}": settings(kind, pagers.url, env, **extra)},
                         sleep=sleeps.append)  # fmt: skip
    return built[f"t-{kind}"]


KINDS = ["pagerduty", "webhook", "wecom", "dingtalk", "feishu"]
RATE_LIMITS: dict[str, dict[str, Any]] = {
    "pagerduty": {"status": 429, "body": None, "retry_after": "2"},
    "webhook": {"status": 503, "body": {"error": "busy"}, "retry_after": "2"},
    "wecom": {"status": 200, "body": {"errcode": 45009, "errmsg": "api freq out of limit"}},
    "dingtalk": {"status": 200, "body": {"errcode": 130101, "errmsg": "send too fast"}},
    "feishu": {"status": 200, "body": {"code": 11232, "msg": "frequency limited psm[x]"}},
}


@pytest.mark.parametrize("kind", KINDS)
def test_a_trigger_is_delivered_once_with_the_services_body(
    kind: str, pagers: FakePagers, env: Path, sleeps: list[float], secrets_absent: list[Any]
) -> None:
    delivery = target(kind, pagers, env, sleeps).send(PAGE)
    secrets_absent.append(delivery)

    assert (delivery.ok, delivery.attempts, delivery.target) == (True, 1, f"t-{kind}")
    (call,) = pagers.calls(kind)
    assert call.status in (200, 202)
    body = call.body
    if kind == "pagerduty":
        assert body["routing_key"] == PD_KEY
        assert body["dedup_key"] == "runbook-bot-INC-7"
        assert body["payload"]["severity"] == "critical"
        assert body["payload"]["source"] == "runbook-bot"
        assert body["links"] == [{"href": PAGE.url, "text": "INC-7 in runbook-bot"}]
    elif kind == "webhook":
        assert body["dedup_key"] == "runbook-bot-INC-7" and body["event"] == "trigger"
        assert call.headers["x-runbook-bot-signature"].startswith("sha256=")
    elif kind == "wecom":
        assert body["msgtype"] == "markdown"
        assert "INC-7 critical" in body["markdown"]["content"]
    elif kind == "dingtalk":
        assert {"timestamp", "sign", "access_token"} <= call.query.keys()
        assert body["markdown"]["title"].startswith("[runbook-bot] INC-7 critical")
    else:
        assert call.path == f"/open-apis/bot/v2/hook/{FEISHU_TOKEN}"
        assert {"timestamp", "sign"} <= body.keys()
        assert "XID 79" in body["content"]["text"]


def test_pagerduty_acknowledge_and_resolve_reuse_the_triggers_dedup_key(
    pagers: FakePagers, env: Path, sleeps: list[float]
) -> None:
    pd = target("pagerduty", pagers, env, sleeps)
    for event in ("trigger", "acknowledge", "resolve"):
        page = Page(**{**PAGE.__dict__, "event": event})
        assert pd.send(page).ok

    calls = pagers.calls("pagerduty")
    assert [c.body["event_action"] for c in calls] == ["trigger", "acknowledge", "resolve"]
    assert {c.body["dedup_key"] for c in calls} == {"runbook-bot-INC-7"}
    assert [c.status for c in calls] == [202, 202, 202]


def test_pagerduty_summary_is_cut_to_1024_characters(
    pagers: FakePagers, env: Path, sleeps: list[float]
) -> None:
    page = Page(**{**PAGE.__dict__, "summary": "x" * 5000})
    assert target("pagerduty", pagers, env, sleeps).send(page).ok
    assert len(pagers.calls("pagerduty")[0].body["payload"]["summary"]) == 1024


@pytest.mark.parametrize("kind", KINDS)
def test_a_rate_limit_answer_is_retried_and_then_succeeds(
    kind: str, pagers: FakePagers, env: Path, sleeps: list[float], secrets_absent: list[Any]
) -> None:
    pagers.fail(kind, **RATE_LIMITS[kind])
    delivery = target(kind, pagers, env, sleeps).send(PAGE)
    secrets_absent.append(delivery)

    assert (delivery.ok, delivery.attempts) == (True, 2)
    assert len(pagers.calls(kind)) == 2
    # Retry-After is honoured where the service gave one, else the backoff.
    assert sleeps == [2.0] if "retry_after" in RATE_LIMITS[kind] else sleeps == [0.01]


PERMANENT: dict[str, tuple[dict[str, Any], str]] = {
    "pagerduty": (
        {"routing_key_file": None, "routing_key_env": "SHORT_KEY"},
        "Length of 'routing_key' is incorrect",
    ),  # fmt: skip
    "webhook": ({"secret_env": "WRONG_SECRET"}, "HTTP 401"),
    "wecom": ({"key_env": "WRONG_SECRET"}, "errcode 93000"),
    "dingtalk": ({"secret_env": "WRONG_SECRET"}, "errcode 310000: sign not match"),
    "feishu": ({"secret_env": "WRONG_SECRET"}, "code 19021"),
}


@pytest.mark.parametrize("kind", KINDS)
def test_a_permanent_error_is_not_retried_and_says_what_to_check(
    kind: str,
    pagers: FakePagers,
    env: Path,
    sleeps: list[float],
    monkeypatch: pytest.MonkeyPatch,
    secrets_absent: list[Any],
) -> None:
    monkeypatch.setenv("SHORT_KEY", SHORT_KEY)
    monkeypatch.setenv("WRONG_SECRET", WRONG_SECRET)
    change, said = PERMANENT[kind]
    delivery = target(kind, pagers, env, sleeps, **change).send(PAGE)
    secrets_absent.append(delivery)

    assert (delivery.ok, delivery.attempts, sleeps) == (False, 1, [])
    assert isinstance(delivery.error, PageRefused)
    assert len(pagers.calls(kind)) == 1
    assert said in delivery.detail
    assert f"target 't-{kind}'" in delivery.detail and "check" in delivery.detail
    assert WRONG_SECRET not in delivery.detail and SHORT_KEY not in delivery.detail


@pytest.mark.parametrize("kind", KINDS)
def test_a_timeout_is_retried_and_finally_fails_clearly(
    kind: str, pagers: FakePagers, env: Path, sleeps: list[float], secrets_absent: list[Any]
) -> None:
    pagers.fail(kind, stall=0.8, times=2)
    delivery = target(kind, pagers, env, sleeps, attempts=2).send(PAGE)
    secrets_absent.append(delivery)

    assert (delivery.ok, delivery.attempts, sleeps) == (False, 2, [0.01])
    assert isinstance(delivery.error, PageUnavailable)
    assert f"target 't-{kind}'" in delivery.detail
    assert "did not answer within 0.5 s" in delivery.detail


def test_a_refused_connection_is_retried_and_names_the_host_not_the_key(
    env: Path, sleeps: list[float], secrets_absent: list[Any]
) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{sock.getsockname()[1]}"
    wecom = targets_from({"w": settings("wecom", closed, env)}, sleep=sleeps.append)["w"]
    delivery = wecom.send(PAGE)
    secrets_absent.append(delivery)

    assert (delivery.ok, delivery.attempts, sleeps) == (False, 3, [0.01, 0.02])
    assert "cannot connect to wecom target 'w' (127.0.0.1/cgi-bin/webhook/send)" in delivery.detail


def test_an_unsigned_webhook_carries_no_signature(
    pagers: FakePagers, env: Path, sleeps: list[float]
) -> None:
    pagers.hook_secret = None
    hook = targets_from({"h": {"kind": "webhook", "url": f"{pagers.url}/hook", **FAST}})["h"]
    assert hook.send(PAGE).ok
    (call,) = pagers.calls("webhook")
    assert "x-runbook-bot-signature" not in call.headers
    assert json.loads(call.raw)["summary"] == PAGE.summary


def test_settings_errors_name_the_setting_but_never_the_value(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with pytest.raises(ConfigInvalid) as inline:
        targets_from({"pd": {"kind": "pagerduty", "routing_key": PD_KEY}})
    assert "pd.pagerduty.routing_key" in str(inline.value)
    assert PD_KEY not in str(inline.value)

    with pytest.raises(ConfigInvalid, match="pd.pagerduty: .*exactly one of routing_key_file"):
        targets_from({"pd": {"kind": "pagerduty"}})
    with pytest.raises(ConfigInvalid, match="pd: Input tag 'pagerdooty'"):
        targets_from({"pd": {"kind": "pagerdooty"}})

    monkeypatch.delenv("NOT_SET", raising=False)
    with pytest.raises(ConfigInvalid, match="key_env: environment variable NOT_SET is not set"):
        targets_from({"w": {"kind": "wecom", "key_env": "NOT_SET"}})


def test_public_names_match_all() -> None:
    public = {name for name in vars(escalation) if not name.startswith("_")}
    modules = {
        "dingtalk", "email", "feishu", "health", "http", "ladder", "models", "oncall",
        "pager", "pagerduty", "paging", "second_level", "service", "targets", "webhook", "wecom",
    }  # fmt: skip
    assert set(escalation.__all__) == public - modules


def test_feishus_older_statuscode_answer_counts_as_delivered(
    pagers: FakePagers, env: Path, sleeps: list[float]
) -> None:
    pagers.fail("feishu", status=200, body={"Extra": None, "StatusCode": 0,
                                            "StatusMessage": "success"})  # fmt: skip
    delivery = target("feishu", pagers, env, sleeps).send(PAGE)
    assert (delivery.ok, delivery.attempts) == (True, 1)
    assert len(pagers.calls("feishu")) == 1

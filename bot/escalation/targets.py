"""Named targets from settings: `targets_from({"pd-gpu": {"kind": "pagerduty", ...}})`.

Validation errors name the target and the setting but never echo values (pydantic's
default message would print the input, which may be a pasted key). Secrets are read here,
once, so a missing file fails at start and not at 3 a.m. when the first page goes out.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from pydantic import TypeAdapter, ValidationError

from bot.errors import ConfigInvalid
from bot.escalation.dingtalk import DingTalkTarget
from bot.escalation.email import EmailTarget
from bot.escalation.feishu import FeishuTarget
from bot.escalation.pagerduty import PagerDutyTarget
from bot.escalation.paging import Retry, Sleep, Target
from bot.escalation.webhook import WebhookTarget
from bot.escalation.wecom import WeComTarget
from bot.escalation_settings import (
    DingTalkSettings,
    EmailSettings,
    FeishuSettings,
    PagerDutySettings,
    TargetSettings,
    WebhookSettings,
    WeComSettings,
    read_secret,
)

_settings = TypeAdapter(dict[str, TargetSettings])


def targets_from(settings: Mapping[str, Any], *, sleep: Sleep = time.sleep) -> dict[str, Target]:
    """Build every named target; raises ConfigInvalid listing each problem."""
    try:
        parsed = _settings.validate_python(dict(settings))
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(part) for part in error['loc'])}: {error['msg']}"
            for error in exc.errors(include_input=False, include_url=False)
        )
        raise ConfigInvalid(f"escalation targets: {problems}") from None
    return {name: build(name, item, sleep=sleep) for name, item in parsed.items()}


def build(name: str, settings: TargetSettings, *, sleep: Sleep = time.sleep) -> Target:
    retry = Retry(settings.attempts, settings.backoff, settings.max_delay)
    common: dict[str, Any] = {"timeout": settings.timeout, "retry": retry, "sleep": sleep}
    at = f"escalation.targets.{name}."
    if isinstance(settings, PagerDutySettings):
        key = _required(at + "routing_key", settings.routing_key_file, settings.routing_key_env)
        return PagerDutyTarget(
            name, routing_key=key, events_url=settings.events_url, source=settings.source, **common
        )
    if isinstance(settings, WebhookSettings):
        secret = read_secret(at + "secret", file=settings.secret_file, env=settings.secret_env)
        return WebhookTarget(name, url=settings.url, secret=secret, **common)
    if isinstance(settings, WeComSettings):
        key = _required(at + "key", settings.key_file, settings.key_env)
        return WeComTarget(name, key=key, base_url=settings.base_url, **common)
    if isinstance(settings, DingTalkSettings):
        token = _required(
            at + "access_token", settings.access_token_file, settings.access_token_env
        )
        secret = read_secret(at + "secret", file=settings.secret_file, env=settings.secret_env)
        return DingTalkTarget(
            name, access_token=token, secret=secret, base_url=settings.base_url, **common
        )
    if isinstance(settings, FeishuSettings):
        token = _required(at + "token", settings.token_file, settings.token_env)
        secret = read_secret(at + "secret", file=settings.secret_file, env=settings.secret_env)
        return FeishuTarget(name, token=token, secret=secret, base_url=settings.base_url, **common)
    if isinstance(settings, EmailSettings):
        password = read_secret(
            at + "password", file=settings.password_file, env=settings.password_env
        )
        return EmailTarget(
            name,
            host=settings.host,
            port=settings.port,
            starttls=settings.starttls,
            username=settings.username,
            password=password,
            sender=settings.sender,
            recipients=settings.recipients,
            **common,
        )
    raise AssertionError(f"unhandled target settings {type(settings).__name__}")


def _required(where: str, file: str | None, env: str | None) -> Any:
    secret = read_secret(where, file=file, env=env)
    if secret is None:  # the settings model already demands one of them
        raise ConfigInvalid(f"{where}: set {where}_file or {where}_env")
    return secret

"""Settings of each paging target, one strict pydantic model per kind, and the secrets they
point at.

Secrets are never written inline: each is named by a file (`*_file`, e.g. a mounted
Kubernetes Secret) or an environment variable (`*_env`), read once when the target is
built, and kept as `SecretStr` so a repr or a validation error cannot show it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, SecretStr, model_validator

from bot.errors import ConfigInvalid


class _Common(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)

    timeout: float = Field(10.0, gt=0, le=120)
    attempts: int = Field(3, ge=1, le=10)
    backoff: float = Field(1.0, ge=0, le=60)
    max_delay: float = Field(30.0, ge=0, le=600)


def _exactly_one(model: BaseModel, secret: str, *, required: bool) -> None:
    given = [f for f in (f"{secret}_file", f"{secret}_env") if getattr(model, f) is not None]
    if len(given) > 1 or (required and not given):
        raise ValueError(f"set exactly one of {secret}_file or {secret}_env")


def read_secret(where: str, *, file: str | None, env: str | None) -> SecretStr | None:
    """The secret from its file or variable; `where` names the setting in errors."""
    if file is not None:
        try:
            value = Path(file).read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise ConfigInvalid(
                f"{where}_file: cannot read {file} ({exc.strerror}); check the path and that "
                "the bot may read it"
            ) from None
    elif env is not None:
        value = os.environ.get(env, "").strip()
        if not value:
            raise ConfigInvalid(f"{where}_env: environment variable {env} is not set or empty")
    else:
        return None
    if not value:
        raise ConfigInvalid(f"{where}_file: {file} is empty")
    return SecretStr(value)


class PagerDutySettings(_Common):
    kind: Literal["pagerduty"]
    events_url: str = "https://events.pagerduty.com"
    routing_key_file: str | None = None
    routing_key_env: str | None = None
    source: str = "runbook-bot"

    @model_validator(mode="after")
    def _secrets(self) -> Self:
        _exactly_one(self, "routing_key", required=True)
        return self


class WebhookSettings(_Common):
    kind: Literal["webhook"]
    url: str
    secret_file: str | None = None
    secret_env: str | None = None

    @model_validator(mode="after")
    def _secrets(self) -> Self:
        _exactly_one(self, "secret", required=False)
        return self


class WeComSettings(_Common):
    kind: Literal["wecom"]
    base_url: str = "https://qyapi.weixin.qq.com"
    key_file: str | None = None
    key_env: str | None = None

    @model_validator(mode="after")
    def _secrets(self) -> Self:
        _exactly_one(self, "key", required=True)
        return self


class DingTalkSettings(_Common):
    kind: Literal["dingtalk"]
    base_url: str = "https://oapi.dingtalk.com"
    access_token_file: str | None = None
    access_token_env: str | None = None
    secret_file: str | None = None
    secret_env: str | None = None

    @model_validator(mode="after")
    def _secrets(self) -> Self:
        _exactly_one(self, "access_token", required=True)
        _exactly_one(self, "secret", required=False)
        return self


class FeishuSettings(_Common):
    kind: Literal["feishu"]
    base_url: str = "https://open.feishu.cn"
    token_file: str | None = None
    token_env: str | None = None
    secret_file: str | None = None
    secret_env: str | None = None

    @model_validator(mode="after")
    def _secrets(self) -> Self:
        _exactly_one(self, "token", required=True)
        _exactly_one(self, "secret", required=False)
        return self


class EmailSettings(_Common):
    kind: Literal["email"]
    host: str
    port: int = Field(25, ge=1, le=65535)
    starttls: bool = False
    username: str | None = None
    password_file: str | None = None
    password_env: str | None = None
    sender: str
    recipients: list[str] = Field(min_length=1)

    @model_validator(mode="after")
    def _secrets(self) -> Self:
        _exactly_one(self, "password", required=False)
        if self.username is None and (self.password_file or self.password_env):
            raise ValueError("a password needs a username")
        return self


TargetSettings = Annotated[
    PagerDutySettings
    | WebhookSettings
    | WeComSettings
    | DingTalkSettings
    | FeishuSettings
    | EmailSettings,
    Field(discriminator="kind"),
]

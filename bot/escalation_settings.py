"""Escalation settings: each paging target (one strict pydantic model per kind, and the
secrets they point at), the policies per severity, working hours and the on-call rotation.

Pure data at the config layer, so `Settings.escalation` can hold them; `bot.escalation`
acts on them.

Secrets are never written inline: each is named by a file (`*_file`, e.g. a mounted
Kubernetes Secret) or an environment variable (`*_env`), read once when the target is
built, and kept as `SecretStr` so a repr or a validation error cannot show it.
"""

from __future__ import annotations

import os
import re
from datetime import UTC, date, datetime, time, timedelta
from pathlib import Path
from typing import Annotated, Any, Literal, Self
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator

from bot.durations import Duration
from bot.errors import ConfigInvalid

Severity = Literal["critical", "warning", "info"]


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


# --- Who is paged, when, and by which calendar -------------------------------------------

Day = Literal["mon", "tue", "wed", "thu", "fri", "sat", "sun"]
DAYS: tuple[Day, ...] = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
ROLES = ("responder", "second_line", "admin")
_NOTIFY = re.compile(
    r"^(oncall|vendor|role:(responder|second_line|admin)|slack:[UWS][A-Z0-9]{2,20}"
    r"|target:[A-Za-z0-9_.-]{1,64})$"
)
MAX_WAIT = timedelta(hours=24)


class _Policy(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class WorkingHours(_Policy):
    """The team's working hours: warnings page and escalate only inside them."""

    timezone: str = "UTC"
    days: list[Day] = Field(default_factory=lambda: list(DAYS[:5]), min_length=1)
    start: time = time(9, 0)
    end: time = time(18, 0)
    holidays: list[date] = []

    @field_validator("timezone")
    @classmethod
    def _known_zone(cls, value: str) -> str:
        zone(value)
        return value

    @model_validator(mode="after")
    def _ordered(self) -> Self:
        if self.start >= self.end:
            raise ValueError(f"start {self.start:%H:%M} must be before end {self.end:%H:%M}")
        return self

    def contains(self, at: datetime) -> bool:
        local = at.astimezone(zone(self.timezone))
        return self._workday(local.date()) and self.start <= local.time() < self.end

    def next_start(self, at: datetime) -> datetime:
        """`at` itself when it is inside working hours, else when they next begin (UTC)."""
        tz = zone(self.timezone)
        local = at.astimezone(tz)
        for offset in range(370):
            day = local.date() + timedelta(days=offset)
            if not self._workday(day):
                continue
            opens = datetime.combine(day, self.start, tz)
            closes = datetime.combine(day, self.end, tz)
            if local < closes:
                return max(local, opens).astimezone(UTC)
        raise ConfigInvalid(
            "escalation.working_hours: no working day in the next year; check days and holidays"
        )

    def _workday(self, day: date) -> bool:
        return DAYS[day.weekday()] in self.days and day not in self.holidays


class Level(_Policy):
    """One rung of the ladder: wait `after` (since the incident opened for the first
    level, since the previous level otherwise), then notify these."""

    after: Duration
    notify: list[str] = Field(min_length=1, max_length=20)

    @field_validator("after")
    @classmethod
    def _bounded(cls, value: timedelta) -> timedelta:
        if not timedelta(0) <= value <= MAX_WAIT:
            raise ValueError("a wait is from 0m (at once) to 24h")
        return value

    @field_validator("notify")
    @classmethod
    def _known(cls, value: list[str]) -> list[str]:
        for entry in value:
            if not _NOTIFY.match(entry):
                raise ValueError(
                    f"{entry!r} is not someone to notify; use oncall, vendor, "
                    "role:responder|second_line|admin, slack:U0123ABC (a person), "
                    "slack:S0123ABC (a user group) or target:NAME (escalation.targets)"
                )
        return value


class Policy(_Policy):
    """How one severity escalates. No levels: it never pages."""

    levels: list[Level] = Field(default_factory=list, max_length=10)
    repeat: int = Field(0, ge=0, le=9)
    """How many more times the whole ladder runs when nobody acknowledges."""
    repeat_after: Duration = timedelta(minutes=30)
    """The wait after the last level before the ladder starts again."""
    ack_timeout: Duration | None = None
    """An acknowledged incident that is still unresolved this long pages again."""
    working_hours_only: bool = False
    """Page and escalate only inside `working_hours` (a wait ending outside them waits on)."""

    @model_validator(mode="after")
    def _waits(self) -> Self:
        for index, level in enumerate(self.levels[1:], start=1):
            if level.after < timedelta(minutes=1):
                raise ValueError(f"levels.{index}.after: a later level waits 1m to 24h")
        for name in ("repeat_after", "ack_timeout"):
            wait = getattr(self, name)
            if wait is not None and not timedelta(minutes=1) <= wait <= MAX_WAIT:
                raise ValueError(f"{name}: from 1m to 24h")
        return self


def _default_policies() -> dict[Severity, Policy]:
    """The seed's rules (34.4): critical is answered within 15 minutes and climbs on-call ->
    second line -> vendor/IDC, 30 minutes a level; warning waits for working hours; info
    goes to the weekly report and never pages."""
    critical = Policy(
        levels=[
            Level(after=timedelta(0), notify=["oncall"]),
            Level(after=timedelta(minutes=15), notify=["oncall", "role:second_line"]),
            Level(after=timedelta(minutes=30), notify=["role:second_line", "vendor"]),
        ],
        repeat=1,
        repeat_after=timedelta(minutes=30),
        ack_timeout=timedelta(minutes=30),
    )
    warning = Policy(
        levels=[
            Level(after=timedelta(0), notify=["oncall"]),
            Level(after=timedelta(minutes=30), notify=["role:second_line"]),
        ],
        working_hours_only=True,
    )
    return {"critical": critical, "warning": warning, "info": Policy()}


class Rotation(_Policy):
    """Who is on call: `people` take turns, each for `every`, handing over at `handover`
    (local time of `timezone`, else of working_hours), counting from `start`."""

    people: list[str] = Field(min_length=1, max_length=100)
    handover: time = time(9, 0)
    every: Duration = timedelta(days=7)
    start: date = date(2026, 1, 5)
    timezone: str | None = None

    @field_validator("every")
    @classmethod
    def _shift(cls, value: timedelta) -> timedelta:
        if not timedelta(hours=1) <= value <= timedelta(days=28):
            raise ValueError("a shift lasts from 1h to 28d")
        return value

    @field_validator("timezone")
    @classmethod
    def _known_zone(cls, value: str | None) -> str | None:
        if value is not None:
            zone(value)
        return value


class EscalationSettings(_Policy):
    """Escalation: policies per severity, the calendar, the rotation, the paging targets."""

    policies: dict[Severity, Policy] = Field(default_factory=_default_policies)
    working_hours: WorkingHours = Field(default_factory=WorkingHours)
    oncall: Rotation | None = None
    vendor: list[str] = []
    """Targets (names in `targets`) that are the vendor / IDC: the seed's third level."""
    targets: dict[str, TargetSettings] = {}
    pagers: int = Field(2, ge=1, le=16)
    """Threads per worker that deliver pages to targets."""

    @field_validator("policies", mode="before")
    @classmethod
    def _over_defaults(cls, value: Any) -> Any:
        """A severity left out keeps its default policy."""
        if isinstance(value, dict):
            return {**_default_policies(), **value}
        return value

    @model_validator(mode="after")
    def _targets_exist(self) -> Self:
        for name in self.vendor:
            if name not in self.targets:
                raise ValueError(f"vendor: no target {name!r} in escalation.targets")
        for severity, policy in self.policies.items():
            for index, level in enumerate(policy.levels):
                for entry in level.notify:
                    name = entry.removeprefix("target:")
                    if entry.startswith("target:") and name not in self.targets:
                        raise ValueError(
                            f"policies.{severity}.levels.{index}.notify: no target {name!r} "
                            "in escalation.targets"
                        )
        return self

    def frozen(self) -> dict[str, Any]:
        """What an incident keeps: the policies and the calendar in force when it opened."""
        return self.model_dump(mode="json", include={"policies", "working_hours", "vendor"})


class FrozenPolicy(_Policy):
    """The part of `EscalationSettings` frozen onto an incident (`frozen()`)."""

    policies: dict[Severity, Policy]
    working_hours: WorkingHours
    vendor: list[str] = []


def zone(name: str) -> ZoneInfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(
            f"unknown timezone {name!r}; use an IANA name like Asia/Shanghai or UTC"
        ) from None

"""The Alertmanager webhook payload, version 4, as pydantic models.

Unknown fields are ignored (newer Alertmanagers add `notification_reason`, `routeLabels`);
the fields we rely on are required and typed. Label and annotation values are untrusted
text: they are stored and shown, never executed.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from bot.incidents.lifecycle import AlertStatus

ZERO_TIME = datetime(1, 1, 1, tzinfo=UTC)
"""Alertmanager's `endsAt` while an alert is firing (`0001-01-01T00:00:00Z`)."""

MAX_LABEL_VALUE = 4096


class _Model(BaseModel):
    model_config = ConfigDict(extra="ignore", populate_by_name=True, frozen=True)


def _no_nul(value: str) -> str:
    # PostgreSQL stores no U+0000 in text or jsonb: refuse it here, as 400, on every backend.
    if "\x00" in value:
        raise ValueError("text holds a NUL character (U+0000), which cannot be stored")
    return value


def _check_strings(value: dict[str, str]) -> dict[str, str]:
    # The common case in two joins (a storm's group is 1,000 alerts of ~15 labels): when
    # all names together fit one name's limit and all values one value's, each does. The
    # loop below only runs to look closer, and to name what is wrong.
    names, texts = "".join(value), "".join(value.values())
    fits = len(names) <= 256 and len(texts) <= MAX_LABEL_VALUE
    if fits and "\x00" not in names and "\x00" not in texts:
        return value
    for key, text in value.items():
        _no_nul(key)
        _no_nul(text)
        if len(key) > 256 or len(text) > MAX_LABEL_VALUE:
            raise ValueError(
                f"label {key[:40]!r} is longer than allowed "
                f"(names 256, values {MAX_LABEL_VALUE} characters)"
            )
    return value


class WebhookAlert(_Model):
    status: AlertStatus
    labels: dict[str, str]
    annotations: dict[str, str] = Field(default_factory=dict)
    starts_at: datetime = Field(alias="startsAt")
    ends_at: datetime | None = Field(None, alias="endsAt")
    generator_url: str = Field("", alias="generatorURL", max_length=MAX_LABEL_VALUE)
    fingerprint: str = Field(min_length=1, max_length=64)

    _labels_ok = field_validator("labels", "annotations")(_check_strings)
    _text_ok = field_validator("generator_url", "fingerprint")(_no_nul)

    @field_validator("starts_at", "ends_at")
    @classmethod
    def _utc(cls, value: datetime | None) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("timestamps must carry a time zone (RFC 3339)")
        try:
            value = value.astimezone(UTC)
        except OverflowError:
            raise ValueError("the time is outside years 1 to 9999 once in UTC") from None
        return None if value.year <= 1 else value

    @field_validator("starts_at")
    @classmethod
    def _started(cls, value: datetime | None) -> datetime:
        if value is None:
            raise ValueError("startsAt must be a real time, not Alertmanager's zero time")
        return value

    @property
    def alertname(self) -> str:
        return self.labels.get("alertname", "")

    @property
    def firing(self) -> bool:
        return self.status is AlertStatus.FIRING


class WebhookPayload(_Model):
    version: Literal["4"]
    group_key: str = Field(alias="groupKey", min_length=1, max_length=MAX_LABEL_VALUE)
    truncated_alerts: int = Field(0, alias="truncatedAlerts", ge=0, lt=2**31)
    status: AlertStatus
    receiver: str = Field(max_length=200)
    group_labels: dict[str, str] = Field(default_factory=dict, alias="groupLabels")
    common_labels: dict[str, str] = Field(default_factory=dict, alias="commonLabels")
    common_annotations: dict[str, str] = Field(default_factory=dict, alias="commonAnnotations")
    external_url: str = Field("", alias="externalURL", max_length=MAX_LABEL_VALUE)
    alerts: list[WebhookAlert] = Field(min_length=1, max_length=10_000)

    _labels_ok = field_validator("group_labels", "common_labels", "common_annotations")(
        _check_strings
    )
    _text_ok = field_validator("group_key", "receiver", "external_url")(_no_nul)

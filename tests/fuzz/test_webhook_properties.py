"""Properties of the webhook's parser (bot/alerts/webhook.py, bot/alerts/payload.py): any
body is either a payload ingest can store or a `PayloadInvalid` (a 400 with a message);
nothing else ever escapes, so no body can become a 500 that Alertmanager retries forever.
"""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bot.alerts import webhook
from bot.alerts.payload import WebhookPayload
from bot.errors import PayloadInvalid
from tests.fuzz.conftest import Tally
from tests.support.payloads import fixture

# FUZZ_EXAMPLES=5000 for a longer hunt than CI's.
SETTINGS = settings(
    database=None,
    deadline=None,
    derandomize=True,
    max_examples=int(os.environ.get("FUZZ_EXAMPLES", "300")),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
RECORDED = fixture("xid79-firing.json")
JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False)
    | st.text(max_size=40)
    | st.sampled_from(
        [
            "0001-01-01T00:00:00Z",
            "9999-12-31T23:59:59-14:00",
            "2026-11-29T22:05:22.257Z",
            "2026-11-29T22:05:22",
            "firing",
            "resolved",
            "4",
            "",
            "\x00",
        ]
    ),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=12,
)
# Where a value can go in the recorded notification: the top level and its first alert.
FIELDS = sorted(RECORDED) + [f"alerts.0.{key}" for key in sorted(RECORDED["alerts"][0])]
LABEL_FIELDS = ["commonLabels", "groupLabels", "alerts.0.labels", "alerts.0.annotations"]


def _outcome(body: bytes, tally: Tally) -> WebhookPayload | None:
    """Parse `body`; check a refusal says what was wrong and a payload is storable."""
    try:
        payload = webhook.parse(body)
    except PayloadInvalid as refused:
        assert refused.status == 400
        assert "expected an Alertmanager webhook payload" in str(refused) or (
            "not valid JSON" in str(refused)
        ), str(refused)
        tally.count("400")
        return None
    # PostgreSQL stores no U+0000 in text or jsonb: a payload is storable on both databases.
    assert "\\u0000" not in payload.model_dump_json(), "a NUL character passed the parser"
    for alert in payload.alerts:
        # What ingest relies on: a real start, a real end or none, both in UTC.
        assert isinstance(alert.starts_at, datetime) and alert.starts_at.tzinfo is UTC
        assert alert.ends_at is None or alert.ends_at.tzinfo is UTC
    tally.count("parsed")
    return payload


@SETTINGS
@given(body=st.binary(max_size=2000))
def test_any_bytes_are_a_payload_or_a_400_with_a_message(body: bytes, tally: Tally) -> None:
    _outcome(body, tally)


@SETTINGS
@given(where=st.sampled_from(FIELDS), value=JSON_VALUES)
def test_the_recorded_notification_with_any_field_replaced_is_a_payload_or_a_400(
    where: str, value: Any, tally: Tally
) -> None:
    body = json.loads(json.dumps(RECORDED))
    target = body
    *parents, last = where.split(".")
    for part in parents:
        target = target[int(part)] if isinstance(target, list) else target[part]
    target[last] = value

    _outcome(json.dumps(body).encode(), tally)


# Shell, path, template and markup characters are as likely as any other.
LABEL_TEXT = st.text(st.sampled_from("\x00\n{}%;/.$`'\"<>&|") | st.characters(), max_size=300)
OFFSETS = st.integers(-14 * 60, 14 * 60).map(lambda minutes: f"{minutes // 60:+03d}:00")
TIMES = st.one_of(
    st.datetimes(min_value=datetime(1, 1, 1), max_value=datetime(9999, 12, 31, 23, 59, 59)).flatmap(
        lambda moment: OFFSETS.map(lambda tz: moment.isoformat() + tz)
    ),
    st.datetimes().map(lambda moment: moment.isoformat() + "Z"),
    st.sampled_from(["0001-01-01T00:00:00Z", "9999-12-31T23:59:59-14:00", "2026-13-01T00:00Z"]),
)


@SETTINGS
@given(field=st.sampled_from(["startsAt", "endsAt"]), value=TIMES)
def test_any_time_is_a_real_utc_instant_or_a_400(field: str, value: str, tally: Tally) -> None:
    body = json.loads(json.dumps(RECORDED))
    body["alerts"][0][field] = value

    _outcome(json.dumps(body).encode(), tally)


@SETTINGS
@given(
    where=st.sampled_from(LABEL_FIELDS),
    labels=st.dictionaries(LABEL_TEXT, LABEL_TEXT, max_size=6),
)
def test_any_label_text_is_kept_as_text_or_refused_by_length(
    where: str, labels: dict[str, str], tally: Tally
) -> None:
    body = json.loads(json.dumps(RECORDED))
    target = body["alerts"][0] if where.startswith("alerts.0.") else body
    target[where.removeprefix("alerts.0.")] = labels

    payload = _outcome(json.dumps(body).encode(), tally)

    if payload is not None:
        alert = payload.alerts[0]
        stored = {
            "commonLabels": payload.common_labels,
            "groupLabels": payload.group_labels,
            "alerts.0.labels": alert.labels,
            "alerts.0.annotations": alert.annotations,
        }[where]
        assert stored == labels  # untrusted text is stored as given, never interpreted

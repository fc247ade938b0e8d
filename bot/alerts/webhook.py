"""The HTTP edge of the Alertmanager webhook: credentials, body size, content type, schema.

Each check raises a `RequestRejected` subclass carrying the status Alertmanager should see:
it retries 5xx and gives up on 4xx, so 4xx is only for input that can never succeed.
"""

from __future__ import annotations

import base64
import binascii
import hmac
from collections.abc import Mapping

from pydantic import ValidationError

from bot.alerts.payload import WebhookPayload
from bot.config import Settings
from bot.errors import (
    PayloadInvalid,
    Unauthorized,
    UnsupportedMediaType,
)


def authenticate(headers: Mapping[str, str], settings: Settings) -> None:
    """Check bearer or basic credentials in constant time; open when none are configured."""
    token = settings.bearer_token()
    username = settings.webhook_username
    if token is None and username is None:
        return
    scheme, _, credentials = headers.get("authorization", "").partition(" ")
    scheme = scheme.lower()
    if token is not None and scheme == "bearer":
        if hmac.compare_digest(credentials.strip().encode(), token.encode()):
            return
    elif username is not None and settings.webhook_password is not None and scheme == "basic":
        expected = f"{username}:{settings.webhook_password.get_secret_value()}".encode()
        try:
            given = base64.b64decode(credentials.strip(), validate=True)
        except (binascii.Error, ValueError):
            given = b""
        if hmac.compare_digest(given, expected):
            return
    wanted = "a bearer token" if token is not None else "basic auth"
    raise Unauthorized(
        f"missing or wrong credentials: this receiver wants {wanted}; check the "
        "webhook_configs http_config in alertmanager.yml"
    )


def check_content_type(headers: Mapping[str, str]) -> None:
    media = headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if media != "application/json":
        raise UnsupportedMediaType(
            f"content type {media or '(none)'!r} is not accepted; send application/json "
            "(Alertmanager's webhook does)"
        )


TOO_LARGE = "lower max_alerts in the Alertmanager webhook_config or raise max_body_bytes"
"""What to do about a webhook body over `max_body_bytes` (`bot.inputs.read_body`)."""


def parse(body: bytes) -> WebhookPayload:
    """Validate the v4 payload; the error names the first failing field."""
    try:
        return WebhookPayload.model_validate_json(body)
    except ValidationError as exc:
        error = exc.errors()[0]
        field = ".".join(str(part) for part in error["loc"])
        if error["type"] == "json_invalid":
            raise PayloadInvalid(f"body is not valid JSON: {error['msg']}") from exc
        more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
        message = error["msg"].removeprefix("Value error, ")
        raise PayloadInvalid(
            f"field {field or '(body)'}: {message}{more}; expected an Alertmanager "
            "webhook payload, version 4",
            field=field or None,
        ) from exc

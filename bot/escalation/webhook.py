"""A generic webhook: the page as JSON, optionally signed so the receiver can trust it.

The signature is Stripe/Slack-style: `X-Runbook-Bot-Signature: sha256=<hex>` is
HMAC-SHA256 with the shared secret over `f"{timestamp}.{body}"`, and the timestamp travels
in `X-Runbook-Bot-Timestamp` so a receiver can refuse replays. Any 2xx accepts the page.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from collections.abc import Callable

import httpx
from pydantic import SecretStr

from bot.escalation.http import HttpTarget
from bot.escalation.paging import Page, Retry, Sleep

SIGNATURE_HEADER = "X-Runbook-Bot-Signature"
TIMESTAMP_HEADER = "X-Runbook-Bot-Timestamp"


def signature(secret: str, timestamp: str, body: bytes) -> str:
    message = timestamp.encode() + b"." + body
    return "sha256=" + hmac.new(secret.encode(), message, hashlib.sha256).hexdigest()


class WebhookTarget(HttpTarget):
    kind = "webhook"

    def __init__(
        self,
        name: str,
        *,
        url: str,
        secret: SecretStr | None = None,
        timeout: float = 10.0,
        retry: Retry | None = None,
        sleep: Sleep | None = None,
        transport: httpx.BaseTransport | None = None,
        now: Callable[[], float] = time.time,
    ) -> None:
        self._url = url
        self._secret = secret
        self._now = now
        parsed = httpx.URL(url)
        super().__init__(
            name,
            # The path may itself be a capability URL; show only the host.
            shown=f"{parsed.host}/…",
            timeout=timeout,
            retry=retry or Retry(),
            secrets=(
                secret.get_secret_value() if secret else None,
                # The whole URL, not its path: scrubbing "/api/v1" would hit unrelated lines.
                str(parsed) if parsed.path.strip("/") or parsed.query else None,
            ),
            sleep=sleep,
            transport=transport,
        )

    def attempt(self, page: Page) -> str:
        body = json.dumps(page.as_json(), sort_keys=True, separators=(",", ":")).encode()
        headers = {"User-Agent": "runbook-bot"}
        if self._secret is not None:
            stamp = str(int(self._now()))
            headers[TIMESTAMP_HEADER] = stamp
            headers[SIGNATURE_HEADER] = signature(self._secret.get_secret_value(), stamp, body)
        response = self.post(self._url, content=body, headers=headers, ok=tuple(range(200, 300)))
        return f"webhook answered HTTP {response.status_code}"

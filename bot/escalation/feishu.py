"""Feishu/Lark (飞书) custom robot: a text message to one group, optionally signed.

Per Feishu's custom robot guide (签名校验, as quoted at
https://m.down10s.com/jiaocheng/5605312225.html and
https://damodev.csdn.net/68230044a5baf817cf4af7cf.html): POST
/open-apis/bot/v2/hook/TOKEN; with signing on, the body gets "timestamp" (seconds, within
an hour) and "sign" = Base64 of HMAC-SHA256 keyed by f"{timestamp}\\n{secret}" over an
empty message (unlike DingTalk, the string is the key). The answer is {"code": 0} (older
deployments: {"StatusCode": 0}); 19021 is a bad signature, 11232 the rate limit.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from collections.abc import Callable
from typing import Any

import httpx
from pydantic import SecretStr

from bot.errors import PageRefused, PageUnavailable
from bot.escalation.http import HttpTarget
from bot.escalation.paging import Page, Retry, Sleep

RATE_LIMITED = 11232


def sign(secret: str, timestamp: str) -> str:
    key = f"{timestamp}\n{secret}".encode()
    return base64.b64encode(hmac.new(key, b"", hashlib.sha256).digest()).decode()


class FeishuTarget(HttpTarget):
    kind = "feishu"

    def __init__(
        self,
        name: str,
        *,
        token: SecretStr,
        secret: SecretStr | None = None,
        base_url: str = "https://open.feishu.cn",
        timeout: float = 10.0,
        retry: Retry | None = None,
        sleep: Sleep | None = None,
        transport: httpx.BaseTransport | None = None,
        now: Callable[[], float] = time.time,
    ) -> None:
        self._url = f"{base_url.rstrip('/')}/open-apis/bot/v2/hook/{token.get_secret_value()}"
        self._secret = secret
        self._now = now
        super().__init__(
            name,
            # The token is the last path segment: never shown.
            shown=httpx.URL(base_url).host + "/open-apis/bot/v2/hook/***",
            timeout=timeout,
            retry=retry or Retry(),
            secrets=(token.get_secret_value(), secret.get_secret_value() if secret else None),
            sleep=sleep,
            transport=transport,
        )

    def attempt(self, page: Page) -> str:
        body: dict[str, Any] = {"msg_type": "text", "content": {"text": page.text()}}
        if self._secret is not None:
            stamp = str(int(self._now()))
            body.update(timestamp=stamp, sign=sign(self._secret.get_secret_value(), stamp))
        doc = self.json_answer(self.post(self._url, content=json.dumps(body).encode()))
        code = doc.get("code", doc.get("StatusCode"))
        message = doc.get("msg", doc.get("StatusMessage", ""))
        if code == 0:
            return "Feishu robot accepted the message"
        if code == RATE_LIMITED:
            raise PageUnavailable(
                f"{self.where()} is rate limited (code {code}: {message}); will retry"
            )
        raise PageRefused(
            f"{self.where()} refused the message (code {code}: {message}); check the hook "
            f"token and signing secret of target {self.name!r}, and the bot's clock"
        )

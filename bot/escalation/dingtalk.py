"""DingTalk (钉钉) custom robot: a markdown message to one group, optionally signed.

Per DingTalk's custom robot guide (加签, as quoted at
https://apifox.com/apidoc/docs-site/467052/doc-3550006 and
https://cnblogs.com/huawublog/p/12186923.html): with signing on, the query gets
`timestamp` (milliseconds, within an hour of DingTalk's clock) and `sign` = Base64 of
HMAC-SHA256 keyed by the secret over f"{timestamp}\\n{secret}", URL-encoded (httpx encodes
the standard Base64 `+/=`; the guide's Python sample uses quote_plus the same way). The
answer is {"errcode": 0, "errmsg": "ok"}; 130101 means "send too fast".
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from collections.abc import Callable

import httpx
from pydantic import SecretStr

from bot.errors import PageRefused, PageUnavailable
from bot.escalation.http import HttpTarget
from bot.escalation.paging import Page, Retry, Sleep

RATE_LIMITED = 130101


def sign(secret: str, timestamp_ms: str) -> str:
    message = f"{timestamp_ms}\n{secret}".encode()
    digest = hmac.new(secret.encode(), message, hashlib.sha256).digest()
    return base64.b64encode(digest).decode()


class DingTalkTarget(HttpTarget):
    kind = "dingtalk"

    def __init__(
        self,
        name: str,
        *,
        access_token: SecretStr,
        secret: SecretStr | None = None,
        base_url: str = "https://oapi.dingtalk.com",
        timeout: float = 10.0,
        retry: Retry | None = None,
        sleep: Sleep | None = None,
        transport: httpx.BaseTransport | None = None,
        now: Callable[[], float] = time.time,
    ) -> None:
        self._url = base_url.rstrip("/") + "/robot/send"
        self._token = access_token
        self._secret = secret
        self._now = now
        super().__init__(
            name,
            shown=httpx.URL(self._url).host + "/robot/send",
            timeout=timeout,
            retry=retry or Retry(),
            secrets=(
                access_token.get_secret_value(),
                secret.get_secret_value() if secret else None,
            ),
            sleep=sleep,
            transport=transport,
        )

    def attempt(self, page: Page) -> str:
        params = {"access_token": self._token.get_secret_value()}
        if self._secret is not None:
            stamp = str(int(self._now() * 1000))
            params.update(timestamp=stamp, sign=sign(self._secret.get_secret_value(), stamp))
        markdown = {"title": page.subject, "text": page.markdown()}
        body = json.dumps({"msgtype": "markdown", "markdown": markdown}).encode()
        doc = self.json_answer(self.post(self._url, content=body, params=params))
        code, message = doc.get("errcode"), doc.get("errmsg", "")
        if code == 0:
            return "DingTalk robot accepted the message"
        if code == RATE_LIMITED:
            raise PageUnavailable(
                f"{self.where()} is rate limited (errcode {code}: {message}); will retry"
            )
        raise PageRefused(
            f"{self.where()} refused the message (errcode {code}: {message}); check the "
            f"access token and signing secret of target {self.name!r}, the robot's security "
            "settings (keywords, IP list) and the bot's clock"
        )

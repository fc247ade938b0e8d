"""WeCom (企业微信) group robot: a markdown message to one group.

Per the group robot guide (https://developer.work.weixin.qq.com/document/path/91770, as
summarised at https://docs.zhuonian.xyz/api/wecom-webhook.html): POST
/cgi-bin/webhook/send?key=KEY with {"msgtype": "markdown", "markdown": {"content": ...}};
the answer is HTTP 200 with {"errcode": 0, "errmsg": "ok"}, any other errcode is a
failure, and 45009 means the robot's rate limit (20 messages a minute) was hit.
"""

from __future__ import annotations

import json

import httpx
from pydantic import SecretStr

from bot.errors import PageRefused, PageUnavailable
from bot.escalation.http import HttpTarget
from bot.escalation.paging import Page, Retry, Sleep

RATE_LIMITED = 45009
MAX_CONTENT = 4096  # bytes, the markdown limit


class WeComTarget(HttpTarget):
    kind = "wecom"

    def __init__(
        self,
        name: str,
        *,
        key: SecretStr,
        base_url: str = "https://qyapi.weixin.qq.com",
        timeout: float = 10.0,
        retry: Retry | None = None,
        sleep: Sleep | None = None,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self._url = base_url.rstrip("/") + "/cgi-bin/webhook/send"
        self._key = key
        super().__init__(
            name,
            shown=httpx.URL(self._url).host + "/cgi-bin/webhook/send",
            timeout=timeout,
            retry=retry or Retry(),
            secrets=(key.get_secret_value(),),
            sleep=sleep,
            transport=transport,
        )

    def attempt(self, page: Page) -> str:
        content = page.markdown().encode()[:MAX_CONTENT].decode(errors="ignore")
        body = json.dumps({"msgtype": "markdown", "markdown": {"content": content}}).encode()
        response = self.post(self._url, content=body, params={"key": self._key.get_secret_value()})
        doc = self.json_answer(response)
        code, message = doc.get("errcode"), doc.get("errmsg", "")
        if code == 0:
            return "WeCom robot accepted the message"
        if code == RATE_LIMITED:
            raise PageUnavailable(
                f"{self.where()} is rate limited (errcode {code}: {message}); will retry"
            )
        raise PageRefused(
            f"{self.where()} refused the message (errcode {code}: {message}); check the robot "
            f"key of target {self.name!r} (key_file/key_env) and that the robot is still in "
            "the group"
        )

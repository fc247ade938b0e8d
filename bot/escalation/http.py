"""The HTTP side every web target shares: one httpx client per target, the one place httpx
failures become `PageError`s, and the filter that keeps secrets out of log lines.

Robot APIs put their key in the URL (`?key=`, `?access_token=`, `/hook/<token>`), and
httpx logs each request's full URL at INFO. So targets never show a URL: messages use
`shown` (host and path, the token path segment replaced), and `SecretsFilter` on httpx's
logger and ours replaces every registered secret with `***` in case one slips through.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

import httpx

from bot import retrying
from bot.errors import PageRefused, PageUnavailable
from bot.escalation.paging import Delivery, Page, Retry, Sleep, deliver

MAX_DETAIL = 300


class SecretsFilter(logging.Filter):
    """Replaces known secret strings in a record's message with `***`."""

    def __init__(self) -> None:
        super().__init__()
        self._secrets: set[str] = set()
        self._lock = threading.Lock()

    def add(self, *secrets: str | None) -> None:
        with self._lock:
            # Short strings would mask ordinary words; real keys are long.
            self._secrets.update(s for s in secrets if s and len(s) >= 6)

    def scrub(self, text: str) -> str:
        with self._lock:
            secrets = sorted(self._secrets, key=len, reverse=True)
        for secret in secrets:
            text = text.replace(secret, "***")
        return text

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        scrubbed = self.scrub(message)
        if scrubbed != message:
            record.msg, record.args = scrubbed, None
        return True


secrets_filter = SecretsFilter()
for _name in ("httpx", "httpcore", "bot.escalation"):
    logging.getLogger(_name).addFilter(secrets_filter)
# Records of child loggers skip a parent's filters, so ours are filtered where they start.
for _name in ("bot.escalation.paging", "bot.escalation.email"):
    logging.getLogger(_name).addFilter(secrets_filter)


class HttpTarget:
    """A target that POSTs JSON; subclasses implement `attempt` (one try, raising
    `PageError`) and call `post`, which maps transport failures and HTTP statuses."""

    kind = "http"

    def __init__(
        self,
        name: str,
        *,
        shown: str,
        timeout: float,
        retry: Retry,
        secrets: tuple[str | None, ...] = (),
        sleep: Sleep | None = None,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.name = name
        self.shown = shown
        self.timeout = timeout
        self.retry = retry
        self._sleep = sleep
        self._transport = transport
        self._http: httpx.Client | None = None
        secrets_filter.add(*secrets)

    def where(self) -> str:
        return f"{self.kind} target {self.name!r} ({self.shown})"

    def send(self, page: Page) -> Delivery:
        # A client per page, not per target: pages are rare, and nobody has to remember to
        # close a target (an unclosed pool of sockets would outlive every test).
        with httpx.Client(
            timeout=httpx.Timeout(self.timeout), transport=self._transport, follow_redirects=False
        ) as self._http:
            if self._sleep is None:
                return deliver(self.name, page, self.attempt, retry=self.retry)
            return deliver(self.name, page, self.attempt, retry=self.retry, sleep=self._sleep)

    def attempt(self, page: Page) -> str:
        raise NotImplementedError

    def post(
        self,
        url: str,
        *,
        content: bytes,
        headers: dict[str, str] | None = None,
        params: dict[str, str] | None = None,
        ok: tuple[int, ...] = (200,),
        check: str = "check the target's URL and secret settings",
    ) -> httpx.Response:
        """The answer to one POST whose status is in `ok`; everything else raises."""
        where = self.where()
        sent = {"Content-Type": "application/json", **(headers or {})}
        assert self._http is not None, "post() runs inside send()"
        try:
            response = self._http.post(url, content=content, headers=sent, params=params)
        except httpx.TimeoutException:
            raise PageUnavailable(
                f"{where} did not answer within {self.timeout:g} s; check that the host is "
                "reachable from the bot (proxy, firewall) or raise its timeout"
            ) from None
        except httpx.ConnectError as exc:
            raise PageUnavailable(
                f"cannot connect to {where}: {_reason(exc)}; check the URL setting and the "
                "network path from the bot"
            ) from None
        except httpx.HTTPError as exc:
            raise PageUnavailable(f"{where}: the request failed: {_reason(exc)}") from None
        status = response.status_code
        if status in ok:
            return response
        body = excerpt(response)
        if status == 429 or status >= 500:
            raise PageUnavailable(
                f"{where} answered HTTP {status}{body}; will retry", delay=retry_after(response)
            )
        raise PageRefused(f"{where} refused the page (HTTP {status}){body}; {check}")

    def json_answer(self, response: httpx.Response) -> dict[str, Any]:
        try:
            doc = response.json()
        except ValueError:
            doc = None
        if not isinstance(doc, dict):
            raise PageRefused(
                f"{self.where()} answered with something that is not a JSON object"
                f"{excerpt(response)}; check that the URL setting points at the real service"
            )
        return doc


def _reason(exc: Exception) -> str:
    # `raise ... from None` above: httpx's exception carries the request, whose URL may hold
    # the key, and a chained traceback would print it.
    return secrets_filter.scrub(str(exc) or type(exc).__name__)


def excerpt(response: httpx.Response) -> str:
    text = response.text.strip()
    return f": {secrets_filter.scrub(text[:MAX_DETAIL])}" if text else ""


def retry_after(response: httpx.Response) -> float | None:
    """The target's Retry-After (seconds or an HTTP-date), None when it gave none."""
    return retrying.retry_after(response.headers.get("Retry-After"))

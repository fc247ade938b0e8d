"""What a page is, what sending one returns, and the retry loop every target shares.

A `Page` is built by the escalation engine (later) from an incident; each target turns it
into its service's wire format. `Target.send` never raises for a failed delivery: it
returns a `Delivery` whose `error` is the `PageError` (its class carries the retry
decision), because the engine pages several targets per level and one dead robot must not
stop the others. `deliver` is the bounded retry (`bot.retrying`): only `PageUnavailable` is retried,
waiting the target's Retry-After when it gave one, else an exponential backoff.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any, Literal, Protocol, cast

from bot import retrying
from bot.errors import PageError, PageUnavailable

logger = logging.getLogger(__name__)

Event = Literal["trigger", "acknowledge", "resolve"]
Severity = Literal["critical", "warning", "info"]
Sleep = Callable[[float], None]


@dataclass(frozen=True)
class Page:
    """One notification about one incident, for every kind of target."""

    number: int
    severity: Severity
    title: str
    summary: str
    level: int = 0
    event: Event = "trigger"
    url: str | None = None

    @property
    def ref(self) -> str:
        return f"INC-{self.number}"

    @property
    def dedup_key(self) -> str:
        """The same for trigger, acknowledge and resolve, so PagerDuty updates one alert."""
        return f"runbook-bot-{self.ref}"

    @property
    def subject(self) -> str:
        verb = "" if self.event == "trigger" else f" [{self.event}d]"
        return f"[runbook-bot] {self.ref} {self.severity}{verb}: {self.title}"

    def text(self) -> str:
        """Plain text for mail and text robots: subject, summary, level, link."""
        lines = [self.subject, "", self.summary, "", f"escalation level: {self.level}"]
        if self.url:
            lines.append(f"incident: {self.url}")
        return "\n".join(lines)

    def markdown(self) -> str:
        lines = [f"**{self.subject}**", "", self.summary, "", f"level {self.level}"]
        if self.url:
            lines.append(f"[{self.ref}]({self.url})")
        return "\n".join(lines)

    def as_json(self) -> dict[str, Any]:
        doc = asdict(self)
        doc.update(ref=self.ref, dedup_key=self.dedup_key)
        return doc


@dataclass(frozen=True)
class Delivery:
    """How sending one page to one target went; `detail` is safe to show and log."""

    target: str
    ok: bool
    detail: str
    attempts: int
    error: PageError | None = None


class Target(Protocol):
    name: str

    def send(self, page: Page) -> Delivery: ...


@dataclass(frozen=True)
class Retry:
    """Bounded retries: `attempts` in all, waits `backoff * 2**n` capped at `max_delay`."""

    attempts: int = 3
    backoff: float = 1.0
    max_delay: float = 30.0

    def delay(self, failure: PageUnavailable, retry: int) -> float:
        wanted = failure.delay if failure.delay is not None else self.backoff * 2**retry
        return min(max(wanted, 0.0), self.max_delay)


def deliver(
    name: str,
    page: Page,
    once: Callable[[Page], str],
    *,
    retry: Retry,
    sleep: Sleep = time.sleep,
) -> Delivery:
    """Call `once` (one attempt; returns a detail or raises PageError) until it succeeds,
    is refused, or the attempts run out."""
    tried = 0

    def attempt() -> str:
        nonlocal tried
        tried += 1
        return once(page)

    def noting(exc: BaseException, attempt: int, wait: float) -> None:
        logger.info(
            "%s: %s for %s failed (attempt %d of %d), retrying in %.2g s: %s",
            name, page.event, page.ref, attempt, retry.attempts, wait, exc,
        )  # fmt: skip

    try:
        detail = retrying.call(
            attempt,
            attempts=retry.attempts,
            retry_if=lambda exc: isinstance(exc, PageUnavailable),
            wait=lambda exc, n: retry.delay(cast(PageUnavailable, exc), n - 1),
            sleep=sleep,
            before_sleep=noting,
        )
    except PageError as exc:
        return _failed(name, page, exc, tried)
    logger.info("%s: %s for %s delivered: %s", name, page.event, page.ref, detail)
    return Delivery(name, True, detail, tried)


def _failed(name: str, page: Page, exc: PageError, attempts: int) -> Delivery:
    logger.warning(
        "%s: %s for %s not delivered after %d attempt(s): %s",
        name, page.event, page.ref, attempts, exc,
    )  # fmt: skip
    return Delivery(name, False, str(exc), attempts, exc)

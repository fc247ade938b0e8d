"""PagerDuty Events API v2: trigger, acknowledge and resolve one alert per incident.

Per the Events API v2 reference (https://v2.developer.pagerduty.com/docs/send-an-event-events-api-v2
and PagerDuty/api-schema reference/events-v2/openapiv3.json): POST /v2/enqueue with
routing_key, event_action, dedup_key and, for a trigger, payload {summary (at most 1024
characters), source, severity}; 202 {"status": "success", "dedup_key": ...} accepts it,
400 {"status": "invalid event", "errors": [...]} refuses it, 429 and 5xx mean retry.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
from pydantic import SecretStr

from bot.errors import PageRefused
from bot.escalation.http import HttpTarget
from bot.escalation.paging import Page, Retry, Sleep

MAX_SUMMARY = 1024
# Our severities are PagerDuty's (it also has "error", which we do not use).
SEVERITIES = {"critical": "critical", "warning": "warning", "info": "info"}


class PagerDutyTarget(HttpTarget):
    kind = "pagerduty"

    def __init__(
        self,
        name: str,
        *,
        routing_key: SecretStr,
        events_url: str = "https://events.pagerduty.com",
        source: str = "runbook-bot",
        timeout: float = 10.0,
        retry: Retry | None = None,
        sleep: Sleep | None = None,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self._url = events_url.rstrip("/") + "/v2/enqueue"
        self._key = routing_key
        self.source = source
        super().__init__(
            name,
            shown=httpx.URL(self._url).host + "/v2/enqueue",
            timeout=timeout,
            retry=retry or Retry(),
            secrets=(routing_key.get_secret_value(),),
            sleep=sleep,
            transport=transport,
        )

    def event(self, page: Page) -> dict[str, Any]:
        """The Events API v2 body for `page` (with the routing key)."""
        body: dict[str, Any] = {
            "routing_key": self._key.get_secret_value(),
            "event_action": page.event,
            "dedup_key": page.dedup_key,
            "client": "runbook-bot",
        }
        if page.event == "trigger":
            summary = f"{page.ref} {page.title}: {page.summary}"
            body["payload"] = {
                "summary": summary[:MAX_SUMMARY],
                "source": self.source,
                "severity": SEVERITIES[page.severity],
                "custom_details": {
                    "incident": page.ref,
                    "level": page.level,
                    "title": page.title,
                    "summary": page.summary,
                },
            }
            if page.url:
                body["client_url"] = page.url
                body["links"] = [{"href": page.url, "text": f"{page.ref} in runbook-bot"}]
        return body

    def attempt(self, page: Page) -> str:
        content = json.dumps(self.event(page)).encode()
        response = self.post(self._url, content=content, ok=(200, 202, 400))
        doc = self.json_answer(response)
        if response.status_code == 400:
            errors = doc.get("errors")
            listed = "; ".join(str(e) for e in errors) if isinstance(errors, list) else ""
            raise PageRefused(
                f"{self.where()} refused the {page.event} for {page.ref} (HTTP 400: "
                f"{doc.get('message', 'invalid event')}{': ' + listed if listed else ''}); "
                f"check the routing key (an Events API v2 integration key, 32 characters) "
                f"of target {self.name!r}"
            )
        return f"PagerDuty accepted {page.event} ({doc.get('message', 'ok')}, {page.dedup_key})"

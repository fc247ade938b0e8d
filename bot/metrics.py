"""Prometheus metrics of one app instance, in its own registry.

Requests by route and status, alerts ingested, ingest latency, and (collected at scrape
time from the database) active incidents by severity.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram, disable_created_metrics
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from bot.errors import BotError

CountsFn = Callable[[], dict[str, int]]
Means = dict[str, float]
HistoryFn = Callable[[], tuple[dict[str, int], Means, Means, dict[tuple[str, str], int]]]
"""(the last 7 days' incidents by status, their MTTA and MTTR by severity, step runs
finished in the last 24 h by (kind, state))."""
HealthFn = Callable[[], tuple[float, float | None, dict[str, int]]]
"""(seconds the most overdue timer is late, seconds since a worker's heartbeat, pages by
state)."""

# The `_created` series double every counter and no dashboard of ours reads them.
disable_created_metrics()  # type: ignore[no-untyped-call]


class Metrics:
    def __init__(
        self,
        open_counts: CountsFn,
        escalation: HealthFn | None = None,
        history: HistoryFn | None = None,
    ) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.requests = Counter(
            "runbook_bot_http_requests",
            "HTTP requests answered, by route and status.",
            ["method", "route", "status"],
            registry=self.registry,
        )
        self.alerts = Counter(
            "runbook_bot_alerts_ingested",
            "Alert instances received from Alertmanager, by outcome.",
            ["outcome"],
            registry=self.registry,
        )
        self.ingest_seconds = Histogram(
            "runbook_bot_ingest_seconds",
            "Time to store one webhook notification (parse to commit).",
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5),
            registry=self.registry,
        )
        self.registry.register(_OpenIncidents(open_counts))
        if escalation is not None:
            self.registry.register(_Escalation(escalation))
        if history is not None:
            self.registry.register(_History(history))


class _OpenIncidents(Collector):
    def __init__(self, counts: CountsFn) -> None:
        self._counts = counts

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily(
            "runbook_bot_incidents_active",
            "Open or acknowledged incidents, by severity.",
            labels=["severity"],
        )
        try:
            counts = self._counts()
        except BotError:
            return  # database down: report nothing rather than fail the scrape
        for severity, count in sorted(counts.items()):
            family.add_metric([severity], count)
        yield family

    def describe(self) -> Iterator[Any]:
        return iter(())


class _Escalation(Collector):
    """Timer lateness, worker heartbeat age and page deliveries, read at scrape time."""

    def __init__(self, figures: HealthFn) -> None:
        self._figures = figures

    def collect(self) -> Iterator[GaugeMetricFamily]:
        try:
            late, age, pages = self._figures()
        except BotError:
            return
        yield GaugeMetricFamily(
            "runbook_bot_timers_late_seconds",
            "How late the most overdue escalation timer is (0: none overdue). Alert on > 60.",
            value=late,
        )
        if age is not None:
            yield GaugeMetricFamily(
                "runbook_bot_worker_heartbeat_age_seconds",
                "Seconds since the freshest worker heartbeat.",
                value=age,
            )
        family = GaugeMetricFamily(
            "runbook_bot_pages", "Page deliveries to targets, by state.", labels=["state"]
        )
        for state, count in sorted(pages.items()):
            family.add_metric([state], count)
        yield family

    def describe(self) -> Iterator[Any]:
        return iter(())


class _History(Collector):
    """Incidents of the last 7 days by status, MTTA and MTTR, and the last day's step runs
    by result: read at scrape time, so every replica reports the same figures."""

    def __init__(self, figures: HistoryFn) -> None:
        self._figures = figures

    def collect(self) -> Iterator[GaugeMetricFamily]:
        try:
            by_status, mtta, mttr, outcomes = self._figures()
        except BotError:
            return
        statuses = GaugeMetricFamily(
            "runbook_bot_incidents_recent",
            "Incidents opened in the last 7 days (drills left out), by their status now.",
            labels=["status"],
        )
        for status, count in sorted(by_status.items()):
            statuses.add_metric([status], count)
        yield statuses
        for name, what, means in (
            ("mtta", "acknowledge", mtta),
            ("mttr", "resolve", mttr),
        ):
            family = GaugeMetricFamily(
                f"runbook_bot_{name}_seconds",
                f"Mean time from opening to {what} of the incidents {what}d in the last 7 "
                "days (opened within 14; drills left out), by severity.",
                labels=["severity"],
            )
            for severity, seconds in sorted(means.items()):
                family.add_metric([severity], seconds)
            yield family
        runs = GaugeMetricFamily(
            "runbook_bot_step_runs_recent",
            "Runbook steps that finished in the last 24 hours, by kind (action, manual) and "
            "result (succeeded, failed, skipped, ...).",
            labels=["kind", "state"],
        )
        for (kind, state), count in sorted(outcomes.items()):
            runs.add_metric([kind, state], count)
        yield runs

    def describe(self) -> Iterator[Any]:
        return iter(())


class RequestMetrics:
    """ASGI middleware counting each HTTP response by route template and status."""

    def __init__(self, app: Any, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        status = 500

        async def send_wrapper(message: Any) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_wrapper)
        finally:
            route = scope.get("route")
            path = getattr(route, "path", None) or "unmatched"
            self.metrics.requests.labels(scope["method"], path, str(status)).inc()


def timer() -> Callable[[], float]:
    start = time.perf_counter()
    return lambda: time.perf_counter() - start

"""The runbooks in force: loaded once per process from `runbooks_dir`, matched to alerts.

`match` picks the runbook an opening incident follows: among runbooks whose `alerts`
(when given) name the alert and whose label matchers all hold, the highest `priority`
wins, ties broken by id so every replica picks the same one; nothing matching -> the
fallback runbook, if there is one. A missing label reads as the empty string, as in
Prometheus matchers. Matching is pure: no I/O, so ingest stays cheap.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from bot.actions import registry
from bot.config import Settings
from bot.runbooks.loader import LoadedRunbook, load_paths
from bot.runbooks.schema import LabelMatcher

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Catalog:
    """Runbooks ordered as they are tried, and the fallback for everything else."""

    runbooks: tuple[LoadedRunbook, ...] = ()
    fallback: LoadedRunbook | None = None
    _patterns: dict[str, re.Pattern[str]] = field(default_factory=dict, repr=False)

    @classmethod
    def of(cls, loaded: Iterable[LoadedRunbook]) -> Catalog:
        ordered: list[LoadedRunbook] = []
        fallback: LoadedRunbook | None = None
        for item in loaded:
            if item.runbook.match.fallback:
                fallback = fallback or item
            else:
                ordered.append(item)
        ordered.sort(key=lambda item: (-item.runbook.match.priority, item.runbook.id))
        patterns = {
            matcher.regex: re.compile(matcher.regex)
            for item in ordered
            for matcher in item.runbook.match.labels
            if matcher.regex is not None
        }
        return cls(tuple(ordered), fallback, patterns)

    def match(self, labels: Mapping[str, str]) -> LoadedRunbook | None:
        """The runbook for an alert with these labels (its `alertname` among them)."""
        alertname = labels.get("alertname", "")
        for item in self.runbooks:
            wanted = item.runbook.match
            if wanted.alerts and alertname not in wanted.alerts:
                continue
            if all(self._holds(matcher, labels) for matcher in wanted.labels):
                return item
        return self.fallback

    def _holds(self, matcher: LabelMatcher, labels: Mapping[str, str]) -> bool:
        value = labels.get(matcher.label, "")
        if matcher.equals is not None:
            return value == matcher.equals
        if matcher.not_equals is not None:
            return value != matcher.not_equals
        if matcher.in_ is not None:
            return value in matcher.in_
        assert matcher.regex is not None
        return self._patterns[matcher.regex].fullmatch(value) is not None


def load(settings: Settings) -> Catalog:
    """The runbooks in `settings.runbooks_dir`; RunbookInvalid lists every problem.

    A directory that does not exist gives no runbooks (with a warning): the embedded
    default `./runbooks` is often absent, and incidents still open without a runbook.
    """
    if not settings.runbooks_dir.exists():
        logger.warning(
            "runbooks directory %s does not exist: incidents open without runbooks "
            "(set runbooks_dir)",
            settings.runbooks_dir,
        )
        return Catalog()
    catalog = Catalog.of(load_paths([settings.runbooks_dir]))
    registry.all_actions()  # import the executors now, not inside the first webhook
    return catalog

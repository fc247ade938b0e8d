"""What ingesting a notification did (`IngestResult`), and one result for a notification
ingested in parts (`combined`)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class IngestResult:
    incident: int
    opened: bool = False
    reopened: bool = False
    resolved: bool = False
    new: int = 0
    repeats: int = 0
    resolved_alerts: int = 0
    refired: int = 0
    runbook: str | None = None
    """The runbook frozen onto the incident it opened (the worker has steps to propose)."""
    logged: bool = False
    """Whether the incident's log grew (chat has something to show)."""
    grown: list[int] = field(default_factory=list)
    """Incidents that grew into their domain's or by nodes of it (their steps are
    re-planned)."""

    def counts(self) -> dict[str, int]:
        return {
            "new": self.new,
            "repeat": self.repeats,
            "resolved": self.resolved_alerts,
            "refired": self.refired,
        }

    def as_dict(self) -> dict[str, object]:
        return {
            "incident": f"INC-{self.incident}",
            "opened": self.opened,
            "reopened": self.reopened,
            "resolved": self.resolved,
            "alerts": self.counts(),
        }


def combined(results: list[IngestResult]) -> IngestResult:
    """One result for a notification ingested in parts: the first part's incident, the
    counts summed, each flag set when any part set it."""
    first = results[0]
    if len(results) == 1:
        return first
    total = IngestResult(first.incident)
    for r in results:
        total.opened |= r.opened
        total.reopened |= r.reopened
        total.resolved |= r.resolved
        total.logged |= r.logged
        total.new += r.new
        total.repeats += r.repeats
        total.resolved_alerts += r.resolved_alerts
        total.refired += r.refired
        total.runbook = total.runbook or r.runbook
        total.grown += [n for n in r.grown if n not in total.grown]
    return total

"""Where a correlated part's alerts land: one `Landing` per incident (the alerts, and
whether choosing the incident opened, reopened or grew it), the `Context` choosing reads,
and merging incidents into another with what that stops (escalation, open steps).

`joining` and `symptoms` fill a context's landings; ingest stages and writes each.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy.orm import Session

from bot.alerts import staging
from bot.alerts.correlation import labels_of
from bot.alerts.payload import WebhookAlert, WebhookPayload
from bot.escalation import ladder
from bot.incidents import log, merging
from bot.incidents.lifecycle import Severity, Status
from bot.incidents.models import Incident
from bot.runbooks import approvals, engine
from bot.runbooks.catalog import Catalog
from bot.topology import Topology, node_of
from bot.topology_settings import TopologySettings


@dataclass
class Landing:
    """Alerts that land on one incident, and what choosing it did."""

    incident: Incident
    writes: staging.Writes
    alerts: list[WebhookAlert] = field(default_factory=list)
    opened: bool = False
    reopened: bool = False
    symptom: str | None = None
    """The runbook of alerts attached to another runbook's incident as symptoms."""
    grown: bool = False


@dataclass
class Context:
    """What choosing needs besides the part."""

    session: Session
    now: datetime
    reopen_window: timedelta
    settings: TopologySettings
    topology: Topology
    causes: Sequence[str]
    catalog: Catalog | None
    actor: log.Actor
    escalation: dict[str, Any] | None = None
    """The frozen escalation policy (`escalation.service.frozen_policy`), when escalating."""
    landings: dict[int, Landing] = field(default_factory=dict)
    _nodes: dict[int, set[str]] = field(default_factory=dict)

    def landing(self, incident: Incident, **how: object) -> Landing:
        """The incident's landing (made on first use), with `how` set where true."""
        landing = self.landings.get(incident.number)
        if landing is None:
            writes = staging.Writes(key=log.key_of(self.session))
            landing = self.landings[incident.number] = Landing(incident, writes)
        for name, value in how.items():
            if value:
                setattr(landing, name, value)
        return landing

    def land(self, incident: Incident, alert: WebhookAlert, **how: object) -> Landing:
        landing = self.landing(incident, **how)
        landing.alerts.append(alert)
        return landing

    def nodes(self, incident: Incident) -> set[str]:
        """The nodes the incident's stored alerts name (read once per part)."""
        if incident.number not in self._nodes:
            found = merging.nodes_of(self.session, incident.number, self.settings.node_labels)
            self._nodes[incident.number] = set(found)
        return self._nodes[incident.number]

    def node(self, payload: WebhookPayload, alert: WebhookAlert) -> str | None:
        return node_of(self.settings, labels_of(payload, alert))


def merge(
    ctx: Context,
    into: Incident,
    others: list[Incident],
    why: str,
    *,
    symptom_of: dict[int, str] | None = None,
) -> None:
    """Merge `others` into `into` (`merging.merge`), stop their escalation and cancel
    their open steps; `into` takes the highest severity among them (its ladder starts
    again at that severity)."""
    done = merging.merge(
        ctx.session,
        into,
        others,
        why=why,
        at=ctx.now,
        actor=engine.BOT,
        node_labels=ctx.settings.node_labels,
        symptom_of=symptom_of,
    )
    for other in done:
        stop = f"merged into {into.ref}"
        ladder.stopped(ctx.session, other, ctx.now, stop)
        # After the incident row: runs someone holds are skipped (their claim or approval
        # then finds the incident resolved and refuses).
        runs = approvals.open_runs(ctx.session, other.number, skip_locked=True)
        approvals.cancel_open(ctx.session, other, runs, engine.BOT, ctx.now)
    _take_severity(ctx, into, done)


def _take_severity(ctx: Context, into: Incident, merged: list[Incident]) -> None:
    current = Severity(into.severity)
    highest = max((Severity(o.severity) for o in merged), key=lambda s: s.rank, default=current)
    if highest.rank <= current.rank:
        return
    into.severity = highest
    log.append(
        ctx.session,
        into,
        at=ctx.now,
        actor=engine.BOT,
        type="incident.severity_raised",
        summary=f"severity raised from {current.value} to {highest.value}: a merged "
        "incident was that severe",
        data={"from": current.value, "to": highest.value},
    )
    if ctx.escalation is not None and Status(into.status) == Status.OPEN:
        ladder.restart(
            ctx.session, into, ctx.now, f"severity raised to {highest.value}", ctx.escalation
        )

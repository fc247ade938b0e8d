"""Symptoms across runbooks (`causes`, the most likely cause first): a rack that lost
power raises NotReady, IB port down and more at once; they are one incident, the cause's.

`attach`: an alert of a runbook on a node inside an active domain incident of a runbook
ranked before it (opened within that runbook's window) lands on that incident, flagged as
a symptom, instead of opening its own. `absorb`: when a cause's domain incident forms,
active incidents of runbooks ranked after it, opened within the window, whose nodes all
lie inside the domain, are merged into it as symptoms.
"""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy import select

from bot.alerts import landing
from bot.alerts.correlation import correlation_of
from bot.alerts.landing import Context
from bot.alerts.payload import WebhookAlert, WebhookPayload
from bot.incidents import merging
from bot.incidents import service as incidents
from bot.incidents.models import ACTIVE_STATUSES, DOMAIN_SCOPE, Incident
from bot.runbooks.catalog import Catalog
from bot.runbooks.loader import LoadedRunbook
from bot.runbooks.models import IncidentRunbook
from bot.topology import Domain
from bot.topology_settings import STORAGE

DEFAULT_WINDOW = timedelta(minutes=2)
"""The window of a cause whose runbook this process does not have (`correlate`'s default)."""


def attach(
    ctx: Context, payload: WebhookPayload, alerts: list[WebhookAlert], runbook: str | None
) -> list[WebhookAlert]:
    """Attach the alerts that are symptoms of an earlier cause's domain incident to it;
    return the rest."""
    if runbook is None or runbook not in ctx.causes:
        return alerts
    before = list(ctx.causes[: list(ctx.causes).index(runbook)])
    if not before:
        return alerts
    candidates = _cause_incidents(ctx, before)
    if not candidates:
        return alerts
    rest: list[WebhookAlert] = []
    for alert in alerts:
        node = ctx.node(payload, alert)
        cause = next(
            (inc for inc, _ in candidates if node and _inside(ctx, inc, node)),
            None,
        )
        if cause is None:
            rest.append(alert)
            continue
        cause = incidents.get(ctx.session, cause.number, lock=True)
        ctx.land(cause, alert, symptom=runbook)
    return rest


def _cause_incidents(ctx: Context, runbooks: list[str]) -> list[tuple[Incident, str]]:
    """Active domain incidents of these runbooks opened within their window, most likely
    cause first."""
    stmt = (
        select(Incident, IncidentRunbook.runbook_id)
        .join(IncidentRunbook, IncidentRunbook.incident_number == Incident.number)
        .where(
            Incident.scope == DOMAIN_SCOPE,
            Incident.status.in_(ACTIVE_STATUSES),
            Incident.drill.is_(None),
            IncidentRunbook.runbook_id.in_(runbooks),
        )
        .order_by(Incident.number)
    )
    found = [
        (incident, runbook)
        for incident, runbook in ctx.session.execute(stmt)
        if incident.opened_at >= ctx.now - _window(ctx, runbook)
    ]
    return sorted(found, key=lambda item: runbooks.index(item[1]))


def _window(ctx: Context, runbook: str) -> timedelta:
    loaded = _runbook(ctx.catalog, runbook)
    correlate = None if loaded is None else correlation_of(loaded.runbook, ctx.settings)
    return correlate.window if correlate is not None else DEFAULT_WINDOW


def _runbook(catalog: Catalog | None, runbook: str) -> LoadedRunbook | None:
    if catalog is None:
        return None
    return next((item for item in catalog.runbooks if item.runbook.id == runbook), None)


def _inside(ctx: Context, incident: Incident, node: str) -> bool:
    if incident.domain is None:
        return False
    domain = Domain.parse(incident.domain)
    if domain.level == STORAGE:
        return node in ctx.nodes(incident)
    return ctx.topology.contains(domain, node)


def absorb(ctx: Context, cause: Incident, runbook: str) -> None:
    """Merge active incidents of runbooks ranked after `runbook`, opened within the
    window, whose nodes all lie inside the cause's domain, into it as symptoms."""
    if runbook not in ctx.causes:
        return
    after = list(ctx.causes[list(ctx.causes).index(runbook) + 1 :])
    if not after:
        return
    window = _window(ctx, runbook)
    stmt = (
        select(Incident, IncidentRunbook.runbook_id)
        .join(IncidentRunbook, IncidentRunbook.incident_number == Incident.number)
        .where(
            Incident.number != cause.number,
            Incident.status.in_(ACTIVE_STATUSES),
            Incident.drill.is_(None),
            Incident.opened_at >= ctx.now - window,
            IncidentRunbook.runbook_id.in_(after),
        )
        .order_by(Incident.number)
        .with_for_update(of=Incident)
    )
    inside: list[Incident] = []
    symptom_of: dict[int, str] = {}
    for incident, other in ctx.session.execute(stmt):
        nodes = merging.nodes_of(ctx.session, incident.number, ctx.settings.node_labels)
        if nodes and all(_inside(ctx, cause, n) for n in nodes):
            inside.append(incident)
            symptom_of[incident.number] = other
    if inside:
        counts = ", ".join(
            f"{sum(1 for v in symptom_of.values() if v == name)} {name}"
            for name in sorted(set(symptom_of.values()))
        )
        why = f"their nodes lie inside {cause.domain}: {counts} attached as symptoms"
        landing.merge(ctx, cause, inside, why, symptom_of=symptom_of)

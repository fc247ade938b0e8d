"""Which incident each alert of a correlated part joins: an incident opens or grows here.

For one correlation key (`correlation.Key`), under its lock, in order:
1. an alert instance already stored stays with the incident holding it (reopened by a
   fresh firing within the reopen window, unless it was merged);
2. an alert of a runbook on a node inside an active domain incident of a runbook ranked
   before it in `causes` (opened within that runbook's window) is attached to it as a
   symptom (`symptoms`, used for every part, correlated or not);
3. a node a person split off keeps its own node incident;
4. the key's active domain incident takes the alerts (suppression); one resolved within
   the reopen window reopens on a fresh firing;
5. else the key's active node incidents opened within the window and this part's nodes:
   `min_nodes` or more and the oldest grows into the domain's incident, the others are
   merged into it;
6. else this part alone names `min_nodes` nodes: a new domain incident;
7. else each node's own node incident (one per runbook and node).
When a domain incident forms (5, 6), active incidents of runbooks ranked after its own in
`causes`, opened within the window, whose nodes all lie inside the domain, are merged into
it as symptoms. A merged incident is resolved with `merged_into`, its escalation stopped
and its open steps cancelled.

The result is a list of `Landing`s: an incident and the alerts that land on it; ingest
stages and writes them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from sqlalchemy import select
from sqlalchemy.orm import Session

from bot.alerts import grouping, staging
from bot.alerts.correlation import Key, Part, correlation_of, labels_of
from bot.alerts.payload import WebhookAlert, WebhookPayload
from bot.durations import format_duration
from bot.escalation import ladder
from bot.incidents import log, merging
from bot.incidents import service as incidents
from bot.incidents.lifecycle import Status
from bot.incidents.models import ACTIVE_STATUSES, DOMAIN_SCOPE, NODE_SCOPE, Incident
from bot.runbooks import approvals, engine
from bot.runbooks.catalog import Catalog
from bot.runbooks.loader import LoadedRunbook
from bot.runbooks.models import IncidentRunbook
from bot.topology import Domain, Topology, node_of
from bot.topology_settings import STORAGE, TopologySettings


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


def held(
    ctx: Context,
    payload: WebhookPayload,
    known: dict[staging.Key, staging.Known],
) -> list[WebhookAlert]:
    """Land the alerts whose instances are stored on the incident holding them; return the
    rest (new instances)."""
    fresh: list[WebhookAlert] = []
    for alert in payload.alerts:
        row = known.get((alert.fingerprint, alert.starts_at))
        if row is None:
            fresh.append(alert)
            continue
        owner = ctx.landings.get(row.incident_number)
        incident = (
            owner.incident
            if owner is not None
            else incidents.get(ctx.session, row.incident_number, lock=True)
        )
        reopened = False
        refired = alert.firing and row.status != "firing"
        if refired and grouping.reopens(incident, ctx.now - ctx.reopen_window):
            incidents.reopen_locked(
                ctx.session, incident, actor=ctx.actor, at=ctx.now, reason="its alert fired again"
            )
            reopened = True
        ctx.land(incident, alert, reopened=reopened)
    return fresh


def symptoms(
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
    return correlate.window if correlate is not None else timedelta(minutes=2)


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


def correlated(
    ctx: Context,
    part: Part,
    alerts: list[WebhookAlert],
    loaded: LoadedRunbook,
    key: Key,
) -> None:
    """Land a correlated part's new alerts (steps 3 to 7 of the module's docstring)."""
    payload = part.payload
    by_node: dict[str | None, list[WebhookAlert]] = {}
    for alert in alerts:
        by_node.setdefault(ctx.node(payload, alert), []).append(alert)
    # 3. a node a person split off keeps its own incident
    for node, own in _split_off(ctx, key, list(by_node)).items():
        for alert in by_node.pop(node):
            ctx.land(own, alert)
    if not by_node:
        return
    nodes = sorted(n for n in by_node if n is not None)
    # 4. the key's domain incident
    latest = grouping.latest_of_group(ctx.session, key.digest)
    domain = latest if latest is not None and Status(latest.status).active else None
    fresh = grouping.fresh_firing(payload.model_copy(update={"alerts": alerts}), {})
    reopened = False
    if (
        domain is None
        and latest is not None
        and latest.merged_into is None
        and fresh
        and grouping.reopens(latest, ctx.now - ctx.reopen_window)
    ):
        domain = latest
        incidents.reopen_locked(
            ctx.session, domain, actor=ctx.actor, at=ctx.now, reason="its alerts fired again"
        )
        reopened = True
    if domain is not None:
        _join(ctx, domain, by_node, loaded, reopened=reopened)
        return
    # 5. grow the oldest of the key's recent node incidents
    recent = _recent_node_incidents(ctx, key)
    if recent:
        seen = {
            inc.number: merging.nodes_of(ctx.session, inc.number, ctx.settings.node_labels)
            for inc in recent
        }
        together = sorted({n for ns in seen.values() for n in ns} | set(nodes))
        if len(together) >= key.min_nodes:
            oldest, others = recent[0], recent[1:]
            why = _why(key, together)
            merging.grow(
                ctx.session,
                oldest,
                domain=key.domain.name,
                size=_size(ctx, key.domain),
                key=key.digest,
                title=merging.domain_title(_base(loaded), key.domain.name, len(together)),
                nodes=together,
                why=why,
                at=ctx.now,
                actor=engine.BOT,
            )
            _merge(ctx, oldest, others, why)
            _absorb_symptoms(ctx, oldest, loaded.runbook.id)
            ctx.landing(oldest, grown=True)
            _join(ctx, oldest, by_node, loaded)
            return
    # 6. a new domain incident
    if len(nodes) >= key.min_nodes:
        previous = latest.number if latest is not None else None
        writes = staging.Writes(key=log.key_of(ctx.session))
        opened = grouping.open_incident(
            ctx.session,
            writes,
            payload.model_copy(update={"alerts": alerts}),
            key.digest,
            ctx.now,
            ctx.actor,
            previous,
            group_key=key.text,
            title=merging.domain_title(_base(loaded), key.domain.name, len(nodes)),
            scope=DOMAIN_SCOPE,
            domain=key.domain.name,
            domain_size=_size(ctx, key.domain),
            correlation_key=key.digest,
            why=_why(key, nodes),
        )
        ctx.landings[opened.number] = Landing(opened, writes, opened=True)
        for node_alerts in by_node.values():
            for alert in node_alerts:
                ctx.land(opened, alert)
        _absorb_symptoms(ctx, opened, loaded.runbook.id)
        return
    # 7. each node's own incident
    for node, node_alerts in by_node.items():
        _node_incident(ctx, payload, node, node_alerts, key)


def _split_off(ctx: Context, key: Key, nodes: list[str | None]) -> dict[str | None, Incident]:
    """The open node incidents people split off for these nodes (no correlation key), in
    one query however many nodes the part names."""
    digests = {key.node_digest(node): node for node in nodes}
    stmt = (
        select(Incident)
        .where(
            Incident.group_hash.in_(list(digests)),
            Incident.status.in_(ACTIVE_STATUSES),
            Incident.scope == NODE_SCOPE,
            Incident.correlation_key.is_(None),
        )
        .order_by(Incident.number)
        .with_for_update()
    )
    return {digests[own.group_hash]: own for own in ctx.session.scalars(stmt)}


def _join(
    ctx: Context,
    incident: Incident,
    by_node: dict[str | None, list[WebhookAlert]],
    loaded: LoadedRunbook,
    *,
    reopened: bool = False,
) -> None:
    """Land the alerts on the domain incident, its title following the node count."""
    before = merging.nodes_of(ctx.session, incident.number, ctx.settings.node_labels)
    for node_alerts in by_node.values():
        for alert in node_alerts:
            ctx.land(incident, alert, reopened=reopened)
    together = set(before) | {n for n in by_node if n is not None}
    if incident.domain is not None and len(together) > len(before):
        incident.title = merging.domain_title(_base(loaded), incident.domain, len(together))


def _node_incident(
    ctx: Context,
    payload: WebhookPayload,
    node: str | None,
    alerts: list[WebhookAlert],
    key: Key,
) -> None:
    digest = key.node_digest(node)
    latest = grouping.latest_of_group(ctx.session, digest)
    if latest is not None and Status(latest.status).active:
        for alert in alerts:
            ctx.land(latest, alert)
        return
    part = payload.model_copy(update={"alerts": alerts})
    if (
        latest is not None
        and latest.merged_into is None
        and grouping.reopens(latest, ctx.now - ctx.reopen_window)
        and grouping.fresh_firing(part, {})
    ):
        incidents.reopen_locked(
            ctx.session, latest, actor=ctx.actor, at=ctx.now, reason="its alert fired again"
        )
        for alert in alerts:
            ctx.land(latest, alert, reopened=True)
        return
    writes = staging.Writes(key=log.key_of(ctx.session))
    opened = grouping.open_incident(
        ctx.session,
        writes,
        part,
        digest,
        ctx.now,
        ctx.actor,
        latest.number if latest is not None else None,
        group_key=f"{key.text} {node or '-'}",
        correlation_key=key.digest,
    )
    ctx.landings[opened.number] = Landing(opened, writes, opened=True)
    for alert in alerts:
        ctx.land(opened, alert)


def _recent_node_incidents(ctx: Context, key: Key) -> list[Incident]:
    stmt = (
        select(Incident)
        .where(
            Incident.correlation_key == key.digest,
            Incident.scope == NODE_SCOPE,
            Incident.status.in_(ACTIVE_STATUSES),
            Incident.drill.is_(None),
            Incident.opened_at >= ctx.now - key.window,
        )
        .order_by(Incident.number)
        .with_for_update()
    )
    return list(ctx.session.scalars(stmt))


def _absorb_symptoms(ctx: Context, cause: Incident, runbook: str) -> None:
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
        _merge(ctx, cause, inside, why, symptom_of=symptom_of)


def _merge(
    ctx: Context,
    into: Incident,
    others: list[Incident],
    why: str,
    *,
    symptom_of: dict[int, str] | None = None,
) -> None:
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


def _why(key: Key, nodes: list[str]) -> str:
    return (
        f"{len(nodes)} nodes of {key.domain.name} raised {key.runbook} within "
        f"{format_duration(key.window)}"
    )


def _size(ctx: Context, domain: Domain) -> int | None:
    if domain.level == STORAGE or domain.own:
        return None
    return len(ctx.topology.members(domain)) or None


def _base(loaded: LoadedRunbook) -> str:
    return engine.text(loaded.runbook.title) or loaded.runbook.id

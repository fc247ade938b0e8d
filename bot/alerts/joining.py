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

Step 2 and merging symptoms live in `symptoms`; what lands where is collected in the
context's `Landing`s (`landing`), which ingest stages and writes.
"""

from __future__ import annotations

from sqlalchemy import select

from bot.alerts import grouping, landing, staging, symptoms
from bot.alerts.correlation import Key, Part
from bot.alerts.landing import Context, Landing
from bot.alerts.payload import WebhookAlert, WebhookPayload
from bot.durations import format_duration
from bot.incidents import log, merging
from bot.incidents import service as incidents
from bot.incidents.lifecycle import Status
from bot.incidents.models import ACTIVE_STATUSES, DOMAIN_SCOPE, NODE_SCOPE, Incident
from bot.runbooks import engine
from bot.runbooks.loader import LoadedRunbook
from bot.topology import Domain
from bot.topology_settings import STORAGE


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
            landing.merge(ctx, oldest, others, why)
            symptoms.absorb(ctx, oldest, loaded.runbook.id)
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
        symptoms.absorb(ctx, opened, loaded.runbook.id)
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
        ctx.landing(incident, grown=True)  # more nodes: its plan is looked at again


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

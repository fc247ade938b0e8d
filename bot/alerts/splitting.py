"""Splitting nodes out of a domain incident: only a person decides it.

`split` moves the alerts of the named nodes to a node incident each (the domain
incident's runbook version frozen onto it with the node's labels, escalation armed, its
card posted through the outbox as any new incident's is, its steps proposed by the
worker), and logs it on both sides with who and why. The new incidents carry no
correlation key, and correlation keeps a node's alerts on its split-off incident while it
is open, so they are never merged back into the domain's.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, cast

from sqlalchemy import Table, insert, select, update
from sqlalchemy.orm import Session

from bot.alerts import grouping
from bot.alerts.correlation import node_group
from bot.clock import Clock
from bot.config import Settings
from bot.db import Database
from bot.errors import RequestRejected, TransitionRefused
from bot.escalation import frozen_policy, ladder
from bot.incidents import log, merging
from bot.incidents import service as incidents
from bot.incidents.lifecycle import Severity, Status
from bot.incidents.models import DOMAIN_SCOPE, GENESIS, NODE_SCOPE, Alert, Incident
from bot.people import Decider
from bot.runbooks import approvals, engine, versions
from bot.runbooks.models import IncidentRunbook
from bot.topology import node_of

ALERTS = cast(Table, Alert.__table__)
FROZEN = cast(Table, IncidentRunbook.__table__)
MAX_NODES = 1000
MAX_REASON = 300


@dataclass(frozen=True)
class Split:
    """What a split did: the domain incident and the node incident of each node."""

    incident: Incident
    into: dict[str, int]
    """node -> the incident now holding its alerts."""


def split(
    db: Database,
    number: int,
    nodes: list[str],
    *,
    who: Decider,
    reason: str | None,
    clock: Clock,
    settings: Settings,
) -> Split:
    """Split `nodes` out of domain incident `number`, as `who` (who needs a role)."""
    role = approvals.role_of(who)
    wanted = _checked(nodes)
    why = (reason or "").strip()[:MAX_REASON] or None
    with db.transaction() as session:
        now = clock.now()
        incident = incidents.get(session, number, lock=True)
        if incident.scope != DOMAIN_SCOPE or not Status(incident.status).active:
            raise TransitionRefused(
                f"{incident.ref} is not an open domain incident "
                f"({incident.status}, {incident.scope}): only a domain incident's nodes split"
            )
        held = _alerts_by_node(session, number, settings)
        missing = [n for n in wanted if n not in held]
        if missing:
            raise RequestRejected(
                f"{incident.ref} has no alerts of {', '.join(missing)}; its nodes: "
                f"{', '.join(sorted(held)[:20])}" + (" ..." if len(held) > 20 else ""),
                field="nodes",
            )
        if len(wanted) >= len(held):
            raise RequestRejected(
                f"splitting every node out leaves {incident.ref} empty: leave at least one, "
                "or resolve it instead",
                field="nodes",
            )
        actor = log.Actor.deciding(who)
        frozen = session.get(IncidentRunbook, number)
        into: dict[str, int] = {}
        for node in wanted:
            ids, labels = held[node]
            target, opened = _node_incident(
                session, incident, node, labels, frozen, actor, now, why
            )
            session.connection().execute(
                update(ALERTS).where(ALERTS.c.id.in_(ids)).values(incident_number=target.number)
            )
            into[node] = target.number
            if opened:
                policy = frozen_policy(settings)
                ladder.arm_new(session, target.number, target.severity, now, policy)
        left = len(held) - len(wanted)
        if frozen is not None and incident.domain is not None:
            base = engine.text(versions.runbook(session, frozen.runbook_digest).title)
            incident.title = merging.domain_title(base, incident.domain, left)
        incident.updated_at = now
        refs = [f"INC-{into[n]}" for n in wanted]
        log.append(
            session,
            incident,
            at=now,
            actor=actor,
            type="incident.split",
            summary=f"{who.name} ({role}) split {', '.join(wanted)} out of {incident.ref} into "
            f"{', '.join(refs)}" + (f": {why}" if why else ""),
            data={"nodes": wanted, "into": refs, "reason": why},
        )
        return Split(incident, into)


def _checked(nodes: list[str]) -> list[str]:
    wanted = sorted({n.strip() for n in nodes if n.strip()})
    if not wanted:
        raise RequestRejected("name the nodes to split out: --nodes gpu-a-01,gpu-a-02")
    if len(wanted) > MAX_NODES:
        raise RequestRejected(f"split at most {MAX_NODES} nodes at once", field="nodes")
    return wanted


def _alerts_by_node(
    session: Session, number: int, settings: Settings
) -> dict[str, tuple[list[int], dict[str, Any]]]:
    """node -> (its alert ids, the labels of its first alert)."""
    found: dict[str, tuple[list[int], dict[str, Any]]] = {}
    rows = session.execute(
        select(Alert.id, Alert.labels).where(Alert.incident_number == number).order_by(Alert.id)
    )
    for alert_id, labels in rows:
        node = node_of(settings.topology, labels)
        if node is not None:
            found.setdefault(node, ([], dict(labels)))[0].append(alert_id)
    return found


def _node_incident(
    session: Session,
    domain: Incident,
    node: str,
    labels: dict[str, Any],
    frozen: IncidentRunbook | None,
    actor: log.Actor,
    now: datetime,
    why: str | None,
) -> tuple[Incident, bool]:
    """The node's incident and whether it opened now: its open one when it has one, else
    a new one following the domain incident's runbook version."""
    runbook_id = frozen.runbook_id if frozen is not None else "-"
    digest = node_group(runbook_id, node)
    latest = grouping.latest_of_group(session, digest)
    if latest is not None and Status(latest.status).active:
        latest.correlation_key = None  # a person decided: never merged back
        return latest, False
    incident = Incident(
        title=f"{domain.title.split(':')[0]}: {node} (split from {domain.ref})"[:500],
        severity=Severity(domain.severity),
        status=Status.OPEN,
        scope=NODE_SCOPE,
        correlation_key=None,
        group_key=f"{runbook_id} {node} (split from {domain.ref})",
        group_hash=digest,
        receiver=domain.receiver,
        group_labels={},
        common_labels=labels,
        external_url=domain.external_url,
        truncated_alerts=0,
        reopen_count=0,
        opened_at=now,
        updated_at=now,
        log_seq=0,
        log_head=GENESIS,
    )
    session.add(incident)
    session.flush()
    log.append(
        session,
        incident,
        at=now,
        actor=actor,
        type="incident.opened",
        summary=f"{incident.ref} opened ({incident.severity}): {node} split from "
        f"{domain.ref} by {actor.name}" + (f": {why}" if why else ""),
        data={"split_from": domain.ref, "nodes": [node], "reason": why},
    )
    if frozen is not None:
        runbook = versions.runbook(session, frozen.runbook_digest)
        copy = engine.freeze_stored(
            incident, labels, frozen.annotations, runbook, frozen.runbook_digest, now
        )
        session.connection().execute(insert(FROZEN), copy.row)  # the worker proposes its steps
        for kind, summary, data in copy.entries:
            log.append(
                session, incident, at=now, actor=engine.BOT, type=kind, summary=summary, data=data
            )
    return incident, True

"""One incident for a failure domain: growing a node incident into its domain's, merging
others into it, and splitting nodes back out.

These functions change incident and alert rows and write the log entries in the
caller's transaction; the caller holds (locks) every incident it passes. Stopping a
merged incident's escalation and cancelling its steps belong to the rooms above
(`bot.alerts.landing`: `bot.incidents` cannot import them). Log entries are appended to
both sides, never edited, so `log verify` holds on merged incidents.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import cast

from sqlalchemy import Table, select, update
from sqlalchemy.orm import Session

from bot.incidents import log
from bot.incidents.lifecycle import Status
from bot.incidents.models import DOMAIN_SCOPE, Alert, Incident

ALERTS = cast(Table, Alert.__table__)


def nodes_of(session: Session, number: int, node_labels: Sequence[str]) -> list[str]:
    """The distinct nodes the incident's alerts name, sorted."""
    found: set[str] = set()
    for labels in session.scalars(select(Alert.labels).where(Alert.incident_number == number)):
        node = next((labels[k] for k in node_labels if labels.get(k)), None)
        if node is not None:
            found.add(str(node))
    return sorted(found)


def domain_title(base: str, domain: str, nodes: int) -> str:
    """`Overheating: 32 nodes of row/a`."""
    return f"{base}: {nodes} node{'s' if nodes != 1 else ''} of {domain}"[:500]


def grow(
    session: Session,
    incident: Incident,
    *,
    domain: str,
    size: int | None,
    key: str,
    title: str,
    nodes: list[str],
    why: str,
    at: datetime,
    actor: log.Actor,
) -> None:
    """Make a node incident its domain's (`incident.grew`)."""
    incident.scope = DOMAIN_SCOPE
    incident.domain = domain
    incident.domain_size = size
    incident.correlation_key = key
    incident.group_hash = key
    incident.title = title
    incident.updated_at = at
    log.append(
        session,
        incident,
        at=at,
        actor=actor,
        type="incident.grew",
        summary=f"{incident.ref} is now the incident of {domain}: {why}",
        data={"domain": domain, "nodes": nodes, "why": why},
    )


def merge(
    session: Session,
    into: Incident,
    merged: Iterable[Incident],
    *,
    why: str,
    at: datetime,
    actor: log.Actor,
    node_labels: Sequence[str],
    symptom_of: dict[int, str] | None = None,
) -> list[Incident]:
    """Move the alerts of `merged` into `into` and resolve them with `merged_into` set;
    `symptom_of` names the runbook of those merged as symptoms (their alerts are flagged).
    Logged on both sides (`incident.merged`). Returns the merged incidents."""
    done: list[Incident] = []
    moved: set[str] = set()
    symptoms = symptom_of or {}
    for other in merged:
        if other.number == into.number or not Status(other.status).active:
            continue
        nodes = nodes_of(session, other.number, node_labels)
        moved.update(nodes)
        values: dict[str, object] = {"incident_number": into.number}
        if other.number in symptoms:
            values["symptom"] = symptoms[other.number]
        session.connection().execute(
            update(ALERTS).where(ALERTS.c.incident_number == other.number).values(**values)
        )
        other.status = Status.RESOLVED
        other.resolved_at, other.resolved_by = at, actor.id
        other.merged_into = into.number
        other.updated_at = at
        data: dict[str, object] = {
            "into": into.ref,
            "merged": [other.ref],
            "nodes": nodes,
            "domain": into.domain,
            "why": why,
        }
        if other.number in symptoms:
            data["symptom"] = symptoms[other.number]
        log.append(
            session,
            other,
            at=at,
            actor=actor,
            type="incident.merged",
            summary=f"{other.ref} merged into {into.ref}: {why}",
            data=data,
        )
        done.append(other)
    if done:
        refs = [other.ref for other in done]
        nodes = sorted(moved)
        symptom_runbooks = sorted({symptoms[o.number] for o in done if o.number in symptoms})
        what = "as symptoms " if symptom_runbooks else ""
        log.append(
            session,
            into,
            at=at,
            actor=actor,
            type="incident.merged",
            summary=f"{', '.join(refs)} merged into {into.ref} {what}({why})",
            data={
                "into": into.ref,
                "merged": refs,
                "nodes": nodes,
                "domain": into.domain,
                "why": why,
                **({"symptoms": symptom_runbooks} if symptom_runbooks else {}),
            },
        )
        into.updated_at = at
    return done

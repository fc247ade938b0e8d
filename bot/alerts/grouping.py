"""Which incident a notification belongs to, and opening a new one.

In order: the group's active incident; the incident already holding these alert
instances (Alertmanager was re-grouped, or these are repeats for an incident a human
already resolved); the group's incident resolved within the reopen window (reopened when
a new firing arrives); otherwise a new incident that points back to the group's last one.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from bot.alerts.payload import WebhookAlert, WebhookPayload
from bot.alerts.staging import Key, Known, Writes
from bot.incidents import log, service
from bot.incidents.lifecycle import Severity, Status
from bot.incidents.models import ACTIVE_STATUSES, GENESIS, NODE_SCOPE, Incident

DRILL_TITLE = "[DRILL]"
"""What a drill incident's title starts with, so every card, page and log line shows it."""


def latest_of_group(session: Session, digest: str) -> Incident | None:
    """The group's active incident, else its most recent one; locked. One query serves the
    join, the reopen decision and the "follows INC-n" pointer."""
    stmt = (
        select(Incident)
        .where(Incident.group_hash == digest)
        .order_by(Incident.status.in_(ACTIVE_STATUSES).desc(), Incident.number.desc())
        .limit(1)
        .with_for_update()
    )
    return session.scalars(stmt).one_or_none()


def reopens(incident: Incident | None, since: datetime) -> bool:
    """Whether a fresh firing reopens it: resolved within the window, and not merged
    (a merged incident's alerts live on in the one it was merged into)."""
    return (
        incident is not None
        and incident.status == Status.RESOLVED
        and incident.merged_into is None
        and incident.resolved_at is not None
        and incident.resolved_at >= since
    )


def holding(
    session: Session, known: dict[Key, Known], payload: WebhookPayload, drill: str | None = None
) -> Incident | None:
    """The incident that already holds these alert instances, if joining it is right (a
    drill's alerts join only that drill's incident, real ones only a real incident)."""
    if not known:
        return None
    numbers = [row.incident_number for row in known.values()]
    number = max(set(numbers), key=numbers.count)
    incident = service.get(session, number, lock=True)
    if incident.drill != drill:
        return None
    if Status(incident.status).active:
        return incident
    # A finished incident takes repeats and resolutions of its own alerts, but a new or
    # re-firing alert must not be buried in it.
    return None if fresh_firing(payload, known) else incident


def fresh_firing(payload: WebhookPayload, known: dict[Key, Known]) -> bool:
    """True when the notification carries an alert that is newly firing (not a repeat)."""
    for alert in payload.alerts:
        row = known.get((alert.fingerprint, alert.starts_at))
        if alert.firing and (row is None or row.status != "firing"):
            return True
    return False


def regroup(
    writes: Writes,
    incident: Incident,
    payload: WebhookPayload,
    digest: str,
    now: datetime,
    actor: log.Actor,
) -> None:
    old = incident.group_key
    incident.group_key, incident.group_hash = payload.group_key, digest
    incident.group_labels = dict(payload.group_labels)
    writes.entry(
        incident,
        at=now,
        actor=actor,
        type="incident.regrouped",
        summary=f"Alertmanager now groups these alerts as {payload.group_key}",
        data={"from": old, "to": payload.group_key},
    )


def severity_of(alert: WebhookAlert) -> Severity:
    return Severity.from_label(alert.labels.get("severity")) or Severity.WARNING


def _title(payload: WebhookPayload) -> str:
    first = payload.alerts[0]
    summary = (
        payload.common_annotations.get("summary")
        or first.annotations.get("summary")
        or payload.common_annotations.get("description")
    )
    if summary:
        return summary[:500]
    name = payload.common_labels.get("alertname") or first.alertname or "alert"
    extra = [v for k, v in sorted(payload.group_labels.items()) if k != "alertname"]
    return " ".join([name, *extra])[:500]


def open_incident(
    session: Session,
    writes: Writes,
    payload: WebhookPayload,
    digest: str,
    now: datetime,
    actor: log.Actor,
    previous: int | None,
    *,
    drill: str | None = None,
    group_key: str | None = None,
    title: str | None = None,
    scope: str = NODE_SCOPE,
    domain: str | None = None,
    domain_size: int | None = None,
    correlation_key: str | None = None,
    why: str | None = None,
) -> Incident:
    """Open an incident for `payload`'s alerts. Correlation gives its own group (`digest`,
    `group_key`), title, scope and domain, and says `why` a domain incident opened."""
    severity = max((severity_of(a) for a in payload.alerts), key=lambda s: s.rank)
    title = title or _title(payload)
    incident = Incident(
        title=f"{DRILL_TITLE} {title}"[:500] if drill is not None else title,
        drill=drill,
        severity=severity,
        status=Status.OPEN,
        scope=scope,
        domain=domain,
        domain_size=domain_size,
        correlation_key=correlation_key,
        group_key=group_key or payload.group_key,
        group_hash=digest,
        receiver=payload.receiver,
        group_labels=dict(payload.group_labels),
        common_labels=dict(payload.common_labels),
        external_url=payload.external_url,
        truncated_alerts=0,
        reopen_count=0,
        opened_at=now,
        updated_at=now,
        log_seq=0,
        log_head=GENESIS,
    )
    session.add(incident)
    session.flush()  # assigns the number
    unknown = sorted(
        {a.labels["severity"] for a in payload.alerts if "severity" in a.labels}
        - {s.value for s in Severity}
    )
    data: dict[str, object] = {
        "group_key": payload.group_key,
        "group_labels": payload.group_labels,
        "receiver": payload.receiver,
        "severity": severity.value,
    }
    if previous is not None:
        data["follows"] = f"INC-{previous}"
    if drill is not None:
        data["drill"] = drill
    if domain is not None:
        data.update(scope=scope, domain=domain, why=why)
    if unknown:
        data["unknown_severities"] = unknown
    writes.entry(
        incident,
        at=now,
        actor=actor,
        type="incident.opened",
        summary=f"{incident.ref} opened ({severity.value}): {incident.title}"
        + (f" ({why})" if why else "")
        + (f"; severity label {', '.join(unknown)} read as warning" if unknown else ""),
        data=data,
    )
    return incident

"""Writing one incident's share of a notification, once `ingest` chose the incident: the
alert rows (new, repeated, changed) and their log entries, severity raised, truncation, the
runbook frozen onto an incident that opened, an incident whose alerts all cleared settled,
and its escalation armed, restarted or stopped (`land`)."""

from __future__ import annotations

import logging
import uuid
from datetime import datetime
from typing import Any, cast

from sqlalchemy import Table, func, insert, select
from sqlalchemy.orm import Session

from bot.alerts import correlation, grouping, staging
from bot.alerts.payload import WebhookAlert, WebhookPayload
from bot.alerts.results import IngestResult
from bot.escalation import ladder
from bot.incidents import log, service
from bot.incidents.lifecycle import Severity, Status
from bot.incidents.models import Alert, Incident
from bot.runbooks import engine, versions
from bot.runbooks.loader import LoadedRunbook
from bot.runbooks.models import IncidentRunbook
from bot.topology import node_of
from bot.topology_settings import TopologySettings

logger = logging.getLogger(__name__)

FROZEN = cast(Table, IncidentRunbook.__table__)


def trigger(payload: WebhookPayload) -> tuple[dict[str, str], dict[str, str]]:
    """Labels and annotations a runbook matches and renders against: the first firing
    alert's over the group's common ones."""
    first = next((a for a in payload.alerts if a.firing), payload.alerts[0])
    labels = {**payload.common_labels, **first.labels}
    return labels, {**payload.common_annotations, **first.annotations}


def _freeze(
    session: Session,
    writes: staging.Writes,
    payload: WebhookPayload,
    incident: Incident,
    loaded: LoadedRunbook,
    now: datetime,
) -> bool:
    """Freeze `loaded` onto the incident that just opened; whether it was. Rendering runs
    before anything is written, so a runbook bug costs the runbook, never the alert
    (invariant 1)."""
    labels, annotations = trigger(payload)
    try:
        frozen = engine.freeze(incident, labels, annotations, loaded, now)
    except Exception:
        error_id = uuid.uuid4().hex[:8]
        logger.exception("%s: freezing its runbook failed (error id %s)", incident.ref, error_id)
        writes.entry(
            incident,
            at=now,
            actor=log.SYSTEM,
            type="runbook.attach_failed",
            summary=f"no runbook steps: attaching the runbook failed with an internal error "
            f"(id {error_id}); the bot's log has the details. Work the incident by hand.",
            data={"error_id": error_id},
        )
        return False
    # In this transaction, never from a per-process memory of what the database holds: a
    # database restored under the running bot must not fail the incident on the key.
    versions.store(session, loaded, now)
    session.connection().execute(insert(FROZEN), frozen.row)
    for kind, summary, data in frozen.entries:
        writes.entry(incident, at=now, actor=engine.BOT, type=kind, summary=summary, data=data)
    return True


def land(
    session: Session,
    writes: staging.Writes,
    payload: WebhookPayload,
    incident: Incident,
    now: datetime,
    actor: log.Actor,
    known: dict[staging.Key, staging.Known],
    *,
    opened: bool,
    reopened: bool,
    loaded: LoadedRunbook | None,
    escalation: dict[str, Any] | None,
    truncated: bool = True,
    symptom: str | None = None,
    domains: TopologySettings | None = None,
) -> IngestResult:
    """Stage and write the notification's alerts on the incident chosen for them: alert
    rows and their log entries, severity, truncation, the runbook of one that opened, an
    incident whose alerts all cleared settled, escalation armed, restarted or stopped.
    `symptom` names the runbook of alerts attached to another runbook's incident."""
    result = IngestResult(incident.number, opened=opened, reopened=reopened)
    seq = 0 if opened else incident.log_seq
    new = [
        alert
        for alert in payload.alerts
        if _apply(session, writes, incident, alert, known, now, actor, result)
    ]
    arrived = [grouping.severity_of(alert) for alert in new]
    if symptom is not None and new:
        _symptoms(writes, incident, payload, new, symptom, domains, now, actor)
    raised = _raise_severity(writes, incident, arrived, now, actor)
    if (
        truncated
        and payload.truncated_alerts
        and payload.truncated_alerts != incident.truncated_alerts
    ):
        incident.truncated_alerts = payload.truncated_alerts
        writes.entry(
            incident,
            at=now,
            actor=actor,
            type="incident.alerts_truncated",
            summary=f"Alertmanager left out {payload.truncated_alerts} alerts of this group "
            "(max_alerts); the full list is in its /api/v2/alerts",
            data={"truncated_alerts": payload.truncated_alerts},
        )
    for row in writes.alerts:  # one multi-row INSERT: every row names the same columns
        row.setdefault("symptom", symptom)
    writes.flush_alerts(session, now)
    if opened and loaded is not None and _freeze(session, writes, payload, incident, loaded, now):
        result.runbook = loaded.runbook.id
    if result.resolved_alerts or (opened and not any(a.firing for a in payload.alerts)):
        result.resolved = _settle(session, writes, incident, now)
    elif result.new or result.refired:
        incident.alerts_cleared_at = None
    if escalation is not None:
        _escalate(session, incident, result, escalation, now, raised=raised)
    writes.flush_log(session)
    incident.updated_at = now
    result.logged = reopened or incident.log_seq > seq
    return result


def _describe(alert: WebhookAlert) -> str:
    summary = alert.annotations.get("summary")
    return summary or alert.alertname or alert.fingerprint


def _apply(
    session: Session,
    writes: staging.Writes,
    incident: Incident,
    alert: WebhookAlert,
    known: dict[staging.Key, staging.Known],
    now: datetime,
    actor: log.Actor,
    result: IngestResult,
) -> bool:
    """Stage the insert or update of one alert instance; True when it is new."""
    key = (alert.fingerprint, alert.starts_at)
    row = known.get(key)
    if row is None:
        staged: dict[str, object] = {
            "incident_number": incident.number,
            "fingerprint": alert.fingerprint,
            "starts_at": alert.starts_at,
            "status": alert.status,
            "alertname": alert.alertname[:200],
            "severity": grouping.severity_of(alert).value,
            "labels": dict(alert.labels),
            "annotations": dict(alert.annotations),
            "generator_url": alert.generator_url,
            "ends_at": alert.ends_at,
            "first_received_at": now,
            "last_received_at": now,
            "receive_count": 1,
        }
        writes.alerts.append(staged)
        known[key] = staging.Known(
            None, alert.status, incident.number, dict(alert.annotations), alert.ends_at, staged
        )
        result.new += 1
        _log_alert(writes, incident, alert, now, actor, first=True)
        if not alert.firing:
            result.resolved_alerts += 1
        return True

    changed_status = row.status != alert.status
    if row.annotations != alert.annotations or changed_status:
        row.annotations = dict(alert.annotations)
        row.status, row.ends_at = alert.status, alert.ends_at
        staging.stage_update(writes, row, now, changed=True)
    else:
        staging.stage_update(writes, row, now, changed=False)
    if not changed_status:
        result.repeats += 1
        return False
    owner = (
        incident
        if row.incident_number == incident.number
        else service.get(session, row.incident_number, lock=True)
    )
    _log_alert(writes, owner, alert, now, actor, first=False)
    if alert.firing:
        result.refired += 1
    else:
        result.resolved_alerts += 1
    return False


def _log_alert(
    writes: staging.Writes,
    incident: Incident,
    alert: WebhookAlert,
    now: datetime,
    actor: log.Actor,
    *,
    first: bool,
) -> None:
    if alert.firing:
        kind, verb = "alert.firing", "firing" if first else "firing again"
    else:
        kind, verb = "alert.resolved", "resolved" + (" (first seen resolved)" if first else "")
    data = {
        "fingerprint": alert.fingerprint,
        "starts_at": alert.starts_at.isoformat(),
        "ends_at": alert.ends_at.isoformat() if alert.ends_at else None,
        "labels": alert.labels,
    }
    described = _describe(alert)
    writes.alert(
        staging.AlertEvent(incident, now, actor, kind, verb, alert.alertname, described, data)
    )


def _raise_severity(
    writes: staging.Writes,
    incident: Incident,
    arrived: list[Severity],
    now: datetime,
    actor: log.Actor,
) -> bool:
    """Only alerts new to the incident can raise it; earlier ones were counted already.
    Whether it did."""
    current = Severity(incident.severity)
    highest = max(arrived, key=lambda s: s.rank, default=current)
    if highest.rank <= current.rank:
        return False
    incident.severity = highest
    writes.entry(
        incident,
        at=now,
        actor=actor,
        type="incident.severity_raised",
        summary=f"severity raised from {current.value} to {highest.value}",
        data={"from": current.value, "to": highest.value},
    )
    return True


def _escalate(
    session: Session,
    incident: Incident,
    result: IngestResult,
    frozen: dict[str, Any],
    now: datetime,
    *,
    raised: bool,
) -> None:
    """Arm, restart or stop the incident's escalation for what this notification did."""
    if result.opened:
        if not result.resolved:
            ladder.arm_new(session, incident.number, incident.severity, now, frozen)
        return
    if result.reopened or (raised and Status(incident.status) == Status.OPEN):
        why = "reopened" if result.reopened else f"severity raised to {incident.severity}"
        ladder.restart(session, incident, now, why, frozen)
    if result.resolved:
        ladder.stopped(session, incident, now, "its alerts cleared")


def _settle(session: Session, writes: staging.Writes, incident: Incident, now: datetime) -> bool:
    """After alerts resolved: resolve warning/info incidents; critical ones wait for a human."""
    if not Status(incident.status).active:
        return False
    firing = session.connection().scalar(
        select(func.count())
        .select_from(Alert)
        .where(Alert.incident_number == incident.number, Alert.status == "firing")
    )
    if firing:
        return False
    if incident.severity == Severity.CRITICAL:
        if incident.alerts_cleared_at is None:
            incident.alerts_cleared_at = now
            writes.entry(
                incident,
                at=now,
                actor=log.SYSTEM,
                type="incident.alerts_cleared",
                summary="all alerts cleared; a critical incident stays open until a human "
                "resolves it with an owner and a disposition",
            )
        return False
    incident.status = Status.RESOLVED
    incident.resolved_at, incident.resolved_by = now, log.SYSTEM.id
    writes.entry(
        incident,
        at=now,
        actor=log.SYSTEM,
        type="incident.resolved",
        summary=f"{incident.ref} resolved itself: all its alerts cleared",
        data={"by": "alerts"},
    )
    return True


def _symptoms(
    writes: staging.Writes,
    incident: Incident,
    payload: WebhookPayload,
    alerts: list[WebhookAlert],
    runbook: str,
    domains: TopologySettings | None,
    now: datetime,
    actor: log.Actor,
) -> None:
    """Log each alert attached to `incident` as a symptom of its cause (`alert.symptom`)."""
    for alert in alerts:
        node = node_of(domains or TopologySettings(), correlation.labels_of(payload, alert))
        writes.entry(
            incident,
            at=now,
            actor=actor,
            type="alert.symptom",
            summary=f"{alert.alertname or 'alert'} ({runbook}) on {node or 'no node'} attached "
            f"as a symptom of {incident.domain}",
            data={
                "runbook": runbook,
                "alertname": alert.alertname,
                "node": node,
                "cause": incident.ref,
            },
        )

"""Ingest one Alertmanager notification: group its alerts into an incident, log what changed.

One notification is one transaction: `grouping` picks (or opens) the incident, each
alert is staged as new, a repeat, or a status change (`staging`), severity and truncation
are updated, the staged rows are written, and an incident whose alerts have all cleared
is settled. A repeat of a known (fingerprint, startsAt) only bumps its last-received time.
An incident that opens gets its runbook frozen onto it (`engine.freeze`) in the same
transaction; the worker proposes its steps.

Concurrency: on PostgreSQL a transaction-scoped advisory lock per group serializes posts of
one group; a partial unique index (one active incident per group) and the unique alert
instance key are the backstop, and a violated one retries the whole notification. SQLite
serializes writers at BEGIN.

Drills: an alert labelled `runbook_bot_drill` (`runbook-bot drill`) belongs to that drill.
Its group is the drill's own (the id is part of the group's digest), so a drill alert never
joins a real incident and a real one never joins a drill; a notification that mixes them is
split and each part ingested on its own.
"""

from __future__ import annotations

import hashlib
import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, cast

from sqlalchemy import Table, func, insert, select
from sqlalchemy.exc import IntegrityError, OperationalError
from sqlalchemy.orm import Session

from bot import retrying
from bot.alerts import correlation, grouping, joining, landing, staging, symptoms
from bot.alerts.payload import WebhookAlert, WebhookPayload
from bot.clock import Clock
from bot.config import Settings
from bot.db import Database
from bot.escalation import ladder
from bot.incidents import log, service
from bot.incidents.lifecycle import Severity, Status
from bot.incidents.models import DRILL_LABEL, Alert, Incident
from bot.runbooks import engine, versions
from bot.runbooks.catalog import Catalog
from bot.runbooks.loader import LoadedRunbook
from bot.runbooks.models import IncidentRunbook
from bot.topology import Topology, node_of
from bot.topology_settings import TopologySettings

logger = logging.getLogger(__name__)

ATTEMPTS = 3
FROZEN = cast(Table, IncidentRunbook.__table__)
DEFAULT_CAUSES: list[str] = Settings.model_fields["causes"].get_default(call_default_factory=True)


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


def group_hash(group_key: str, drill: str | None = None) -> str:
    """The digest incidents are grouped by; a drill's groups are apart from real ones."""
    key = group_key if drill is None else f"drill {drill}\n{group_key}"
    return hashlib.sha256(key.encode()).hexdigest()


def drill_of(payload: WebhookPayload) -> str | None:
    """The drill these alerts belong to (`split_drills` made them one), None when real."""
    return payload.alerts[0].labels.get(DRILL_LABEL) if payload.alerts else None


def split_drills(payload: WebhookPayload) -> list[WebhookPayload]:
    """The notification as parts that are each all real or all one drill's, real first."""
    parts: dict[str | None, list[WebhookAlert]] = {}
    for alert in payload.alerts:
        parts.setdefault(alert.labels.get(DRILL_LABEL), []).append(alert)
    if len(parts) <= 1:
        return [payload]
    ordered = sorted(parts.items(), key=lambda item: (item[0] is not None, item[0] or ""))
    return [payload.model_copy(update={"alerts": alerts}) for _, alerts in ordered]


def ingest(
    db: Database,
    payload: WebhookPayload,
    *,
    clock: Clock,
    reopen_window: timedelta,
    catalog: Catalog | None = None,
    escalation: dict[str, Any] | None = None,
    topology: Topology | None = None,
    settings: Settings | None = None,
) -> IngestResult:
    """Store one notification; return what it did. Retries on a lost uniqueness race.

    With a `catalog`, an incident that opens gets the runbook its first firing alert
    matches frozen onto it in the same transaction: a reference to the stored document and
    the facts rendered from the alert. Proposing the steps is left to the worker, woken
    after the commit, so the webhook stays cheap during an alert storm.

    With `escalation` (the frozen policy, `escalation.service.frozen_policy`), an incident
    that opens freezes it and arms its first escalation timer; one that reopens or is
    raised to a higher severity starts its ladder again; one that resolves itself stops it.

    Alerts of runbooks that correlate by failure domain are split by correlation key
    (`correlation`), each key in a transaction of its own under its lock, and land where
    `joining` says, with `topology` (None: every node its own domain) and `settings`'
    topology and causes. An incident that grew (into its domain's, by nodes) is re-planned
    (`engine.replan`) after the commit.
    """
    parts = split_drills(payload)
    if len(parts) > 1:  # never one incident for real and drill alerts
        logger.warning("group %s mixes drill and real alerts; split", payload.group_key[:80])
        results = [
            ingest(
                db,
                part,
                clock=clock,
                reopen_window=reopen_window,
                catalog=catalog,
                escalation=escalation,
                topology=topology,
                settings=settings,
            )
            for part in parts
        ]
        return combined(results)
    domains = settings.topology if settings is not None else TopologySettings()
    causes = settings.causes if settings is not None else DEFAULT_CAUSES
    if drill_of(payload) is not None or catalog is None:
        pieces = [
            correlation.Part(payload, catalog.match(_trigger(payload)[0]) if catalog else None)
        ]
    else:
        pieces = correlation.split(payload, catalog, domains, topology)

    def one(part: correlation.Part) -> IngestResult:
        def attempt() -> IngestResult:
            with db.transaction() as session:
                now = clock.now()
                if part.key is None:
                    if db.is_postgres:
                        _lock(session, group_hash(part.payload.group_key, drill_of(part.payload)))
                    rest = _symptoms_first(session, part, now, escalation, ctx_of)
                    if rest.payload is None:
                        return rest.result
                    plain = _ingest(
                        session, rest.payload, now, reopen_window, part.loaded, escalation
                    )
                    return combined([plain, *([rest.result] if rest.landed else [])])
                if db.is_postgres:
                    _lock(session, part.key.digest)
                return _correlated(session, part, now, escalation, ctx_of)

        def ctx_of(session: Session, now: datetime) -> landing.Context:
            return landing.Context(
                session,
                now,
                reopen_window,
                domains,
                topology or correlation.NO_TOPOLOGY,
                causes,
                catalog,
                log.Actor.alertmanager(part.payload.receiver),
                escalation,
            )

        def lost(_exc: BaseException, _attempt: int, _seconds: float) -> None:
            logger.info("ingest of group %s lost a race; retrying", payload.group_key[:80])

        # Another transaction took a unique key first (the group's active incident, an
        # alert instance): the next attempt sees what it wrote and joins it. PostgreSQL
        # may also break a lock cycle between a cause's incident and its symptoms'.
        return retrying.call(
            attempt,
            attempts=ATTEMPTS,
            retry_if=_lost_race,
            wait=retrying.immediately,
            before_sleep=lost,
        )

    result = combined([one(part) for part in pieces])
    if result.grown and settings is not None:
        _replan(db, result.grown, clock, settings)
    return result


def _replan(db: Database, grown: list[int], clock: Clock, settings: Settings) -> None:
    """Re-plan incidents that grew, each in a transaction of its own after the alerts are
    committed (runs are locked before the incident row there, the engine's order). A
    failure is logged, never the webhook's: the alerts are stored."""
    for number in grown:
        try:
            with db.transaction() as session:
                engine.replan(session, number, clock.now(), settings)
        except Exception:
            error_id = uuid.uuid4().hex[:8]
            logger.exception(
                "INC-%s: re-planning after it grew failed (error id %s)", number, error_id
            )


def _lost_race(exc: BaseException) -> bool:
    if isinstance(exc, IntegrityError):
        return True
    return isinstance(exc, OperationalError) and "deadlock" in str(exc.orig).lower()


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


@dataclass
class _Rest:
    """What attaching symptoms left of a part grouped as Alertmanager grouped it."""

    payload: WebhookPayload | None
    result: IngestResult
    landed: bool


def _symptoms_first(
    session: Session,
    part: correlation.Part,
    now: datetime,
    escalation: dict[str, Any] | None,
    ctx_of: Callable[[Session, datetime], landing.Context],
) -> _Rest:
    """Attach the part's new alerts that are symptoms of a cause's domain incident to it;
    the rest is ingested as today."""
    nothing = _Rest(part.payload, IngestResult(0), False)
    runbook = part.loaded.runbook.id if part.loaded is not None else None
    if drill_of(part.payload) is not None or runbook is None:
        return nothing
    ctx = ctx_of(session, now)
    if runbook not in ctx.causes[1:]:
        return nothing
    known = staging.known_instances(session, part.payload.alerts)
    fresh = [a for a in part.payload.alerts if (a.fingerprint, a.starts_at) not in known]
    symptoms.attach(ctx, part.payload, fresh, runbook)
    if not ctx.landings:
        return nothing
    attached = {id(a) for landing in ctx.landings.values() for a in landing.alerts}
    result = _land_all(session, ctx, part, now, escalation, known)
    rest = [a for a in part.payload.alerts if id(a) not in attached]
    payload = part.payload.model_copy(update={"alerts": rest}) if rest else None
    return _Rest(payload, result, True)


def _correlated(
    session: Session,
    part: correlation.Part,
    now: datetime,
    escalation: dict[str, Any] | None,
    ctx_of: Callable[[Session, datetime], landing.Context],
) -> IngestResult:
    """One correlation key's alerts, under its lock: `joining` chooses, then each
    incident's share is written."""
    assert part.key is not None and part.loaded is not None
    ctx = ctx_of(session, now)
    known = staging.known_instances(session, part.payload.alerts)
    fresh = joining.held(ctx, part.payload, known)
    fresh = symptoms.attach(ctx, part.payload, fresh, part.loaded.runbook.id)
    if fresh:
        joining.correlated(ctx, part, fresh, part.loaded, part.key)
    return _land_all(session, ctx, part, now, escalation, known)


def _land_all(
    session: Session,
    ctx: landing.Context,
    part: correlation.Part,
    now: datetime,
    escalation: dict[str, Any] | None,
    known: dict[staging.Key, staging.Known],
) -> IngestResult:
    results: list[IngestResult] = []
    for one in ctx.landings.values():
        if not one.alerts:  # grown, its entries written already
            results.append(IngestResult(one.incident.number, logged=True))
            continue
        result = _land(
            session,
            one.writes,
            part.payload.model_copy(update={"alerts": one.alerts}),
            one.incident,
            now,
            ctx.actor,
            known,
            opened=one.opened,
            reopened=one.reopened,
            loaded=part.loaded if one.opened else None,
            escalation=escalation,
            truncated=part.key is None,
            symptom=one.symptom,
            domains=ctx.settings,
        )
        if one.grown:
            result.grown = [one.incident.number]
            result.logged = True
        results.append(result)
    return combined(results)


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


def _trigger(payload: WebhookPayload) -> tuple[dict[str, str], dict[str, str]]:
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
    labels, annotations = _trigger(payload)
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


def _lock(session: Session, digest: str) -> None:
    """A transaction-scoped advisory lock on a group's or a correlation key's digest."""
    key = int(digest[:15], 16)  # 60 bits: fits PostgreSQL's signed bigint
    session.execute(select(func.pg_advisory_xact_lock(key)))


def _ingest(
    session: Session,
    payload: WebhookPayload,
    now: datetime,
    window: timedelta,
    loaded: LoadedRunbook | None,
    escalation: dict[str, Any] | None = None,
) -> IngestResult:
    drill = drill_of(payload)
    digest = group_hash(payload.group_key, drill)
    actor = log.Actor.alertmanager(payload.receiver)
    writes = staging.Writes(key=log.key_of(session))
    known = staging.known_instances(session, payload.alerts)
    latest = grouping.latest_of_group(session, digest)
    incident = latest if latest is not None and Status(latest.status).active else None
    opened = reopened = False

    if incident is None:
        incident = grouping.holding(session, known, payload, drill)
        if incident is not None and Status(incident.status).active:
            grouping.regroup(writes, incident, payload, digest, now, actor)
    if incident is None and latest is not None and grouping.reopens(latest, now - window):
        incident = latest  # a late resolution or repeat for it lands there, no reopen
        if grouping.fresh_firing(payload, known):
            service.reopen_locked(
                session, incident, actor=actor, at=now, reason="its alert fired again"
            )
            reopened = True
    if incident is None:
        previous = latest.number if latest is not None else None
        incident = grouping.open_incident(
            session, writes, payload, digest, now, actor, previous, drill=drill
        )
        opened = True

    return _land(
        session,
        writes,
        payload,
        incident,
        now,
        actor,
        known,
        opened=opened,
        reopened=reopened,
        loaded=loaded,
        escalation=escalation,
    )


def _land(
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

"""Ingest one Alertmanager notification: group its alerts into incidents, log what changed.

A notification is split into parts (a drill's alerts apart from real ones; alerts of
runbooks that correlate by failure domain by their correlation key, `correlation`), and
each part is one transaction: `grouping` (Alertmanager's group) or `joining` (the
failure domain, with `symptoms` across runbooks) picks or opens the incident, and
`writing.land` stages each alert as new, a repeat, or a status change (`staging`), updates
severity and truncation, writes the rows and their log entries, settles an incident whose
alerts have all cleared, and freezes the runbook onto one that opened (the worker proposes
its steps). A repeat of a known (fingerprint, startsAt) only bumps its last-received time.

Concurrency: on PostgreSQL a transaction-scoped advisory lock per group (or correlation
key) serializes posts of one group; a partial unique index (one active incident per group)
and the unique alert instance key are the backstop, and a violated one retries the part.
SQLite serializes writers at BEGIN.

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
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError, OperationalError
from sqlalchemy.orm import Session

from bot import retrying
from bot.alerts import correlation, grouping, joining, landing, staging, symptoms, writing
from bot.alerts.payload import WebhookAlert, WebhookPayload
from bot.alerts.results import IngestResult, combined
from bot.clock import Clock
from bot.config import Settings
from bot.db import Database
from bot.incidents import log, service
from bot.incidents.lifecycle import Status
from bot.incidents.models import DRILL_LABEL
from bot.runbooks import engine
from bot.runbooks.catalog import Catalog
from bot.runbooks.loader import LoadedRunbook
from bot.topology import Topology
from bot.topology_settings import TopologySettings

logger = logging.getLogger(__name__)

ATTEMPTS = 3
DEFAULT_CAUSES: list[str] = Settings.model_fields["causes"].get_default(call_default_factory=True)


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
            correlation.Part(
                payload, catalog.match(writing.trigger(payload)[0]) if catalog else None
            )
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
        result = writing.land(
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

    return writing.land(
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

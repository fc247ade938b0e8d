"""Commands on incidents and their log: list, show, ack, resolve, reopen, close, verify."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import Any

from bot import escalation
from bot.cli import common
from bot.clock import SystemClock
from bot.config import Settings
from bot.incidents import log, service, views
from bot.incidents.models import Incident
from bot.runbooks import service as runbooks


def list_incidents(args: argparse.Namespace, settings: Settings) -> int:
    with common.database(settings) as db, db.session() as session:
        rows = service.list_incidents(
            session,
            status=common.split(args.status),
            severity=common.split(args.severity),
            limit=args.limit,
        )
        if args.output == "json":
            return common.say(json.dumps([views.incident(r) for r in rows], indent=2))
    if not rows:
        return common.say("No incidents found.")
    table = [["INCIDENT", "SEVERITY", "STATUS", "AGE", "OWNER", "TITLE"]]
    table += [
        [r.ref, r.severity, r.status, common.age(r.opened_at), r.owner or "-", r.title]
        for r in rows
    ]
    return common.say(common.table(table))


def show(args: argparse.Namespace, settings: Settings) -> int:
    number = service.parse_ref(args.incident)
    with common.database(settings) as db, db.session() as session:
        incident = service.get(session, number)
        alerts = service.alerts_of(session, number)
        entries = log.entries(session, number)
        if args.output == "json":
            body: dict[str, Any] = views.incident(incident)
            body["alerts"] = [views.alert(a) for a in alerts]
            body["log"] = [views.log_entry(e) for e in entries]
            return common.say(json.dumps(body, indent=2, ensure_ascii=False))
        lines = [
            f"{incident.ref}  {incident.title}",
            f"Severity:  {incident.severity}",
            f"Status:    {incident.status}",
            f"Owner:     {incident.owner or '-'}",
            f"Opened:    {incident.opened_at:%Y-%m-%d %H:%M:%S} UTC "
            f"({common.age(incident.opened_at)} ago)",
            f"Group:     {incident.group_key}",
        ]
        if incident.disposition:
            lines.append(f"Disposition: {incident.disposition}")
        if incident.truncated_alerts:
            lines.append(f"Truncated: {incident.truncated_alerts} alerts left out by Alertmanager")
        lines += ["", "Alerts:"]
        lines += [
            f"  {a.status:<9}{a.alertname}  {a.fingerprint}  since {a.starts_at:%Y-%m-%d %H:%M:%S}"
            for a in alerts
        ]
        lines += ["", "Log:"]
        lines += [f"  {e.at:%Y-%m-%d %H:%M:%S}  {e.actor_name:<24} {e.summary}" for e in entries]
        return common.say("\n".join(lines))


def _transition(
    args: argparse.Namespace, settings: Settings, apply: Callable[..., Incident], **extra: Any
) -> int:
    number = service.parse_ref(args.incident)
    actor = log.Actor.human(args.actor)
    with common.database(settings) as db, db.transaction() as session:
        incident = apply(session, number, actor=actor, at=SystemClock().now(), **extra)
        return common.say(f"{incident.ref} {incident.status} (owner: {incident.owner or '-'})")


def ack(args: argparse.Namespace, settings: Settings) -> int:
    return _transition(args, settings, escalation.acknowledge, note=args.note)


def resolve(args: argparse.Namespace, settings: Settings) -> int:
    """Resolve, cancelling the incident's steps that have not started (same transaction)."""
    number = service.parse_ref(args.incident)
    with common.database(settings) as db:
        incident, cancelled = runbooks.resolve(
            db,
            number,
            actor=log.Actor.human(args.actor),
            clock=SystemClock(),
            disposition=args.note,
            owner=args.owner,
        )
    steps = ", ".join(run.step_id for run in cancelled)
    return common.say(
        f"{incident.ref} {incident.status} (owner: {incident.owner or '-'})"
        + (f"; cancelled steps not yet run: {steps}" if steps else "")
    )


def reopen(args: argparse.Namespace, settings: Settings) -> int:
    reason = args.note or f"reopened by {args.actor}"
    return _transition(args, settings, service.reopen, reason=reason)


def close(args: argparse.Namespace, settings: Settings) -> int:
    return _transition(args, settings, service.close)


def log_verify(args: argparse.Namespace, settings: Settings) -> int:
    with common.database(settings) as db, db.session() as session:
        if args.incident:
            targets = [service.get(session, service.parse_ref(args.incident))]
        else:
            targets = service.list_incidents(session, limit=10**9)
        for incident in sorted(targets, key=lambda i: i.number):
            broken = log.verify(incident, log.entries(session, incident.number))
            if broken is not None:
                print(f"runbook-bot: log verification FAILED: {broken}", file=sys.stderr)
                return 1
        return common.say(f"log verified: {len(targets)} incident(s), every entry intact")

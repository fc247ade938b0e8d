"""Incidents as JSON-ready dicts, shared by the HTTP API and `--json` CLI output."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from bot.incidents.models import Alert, Incident, LogEntry


def _ts(value: datetime | None) -> str | None:
    return value.isoformat().replace("+00:00", "Z") if value else None


def incident(row: Incident) -> dict[str, Any]:
    return {
        "id": row.ref,
        "number": row.number,
        "title": row.title,
        "severity": row.severity,
        "status": row.status,
        "owner": row.owner,
        "disposition": row.disposition,
        "group_key": row.group_key,
        "group_labels": row.group_labels,
        "receiver": row.receiver,
        "truncated_alerts": row.truncated_alerts,
        "reopen_count": row.reopen_count,
        "opened_at": _ts(row.opened_at),
        "acknowledged_at": _ts(row.acknowledged_at),
        "acknowledged_by": row.acknowledged_by,
        "resolved_at": _ts(row.resolved_at),
        "resolved_by": row.resolved_by,
        "closed_at": _ts(row.closed_at),
        "reopened_at": _ts(row.reopened_at),
        "alerts_cleared_at": _ts(row.alerts_cleared_at),
        "updated_at": _ts(row.updated_at),
        "drill": row.drill,
    }


def alert(row: Alert) -> dict[str, Any]:
    return {
        "fingerprint": row.fingerprint,
        "status": row.status,
        "alertname": row.alertname,
        "severity": row.severity,
        "labels": row.labels,
        "annotations": row.annotations,
        "starts_at": _ts(row.starts_at),
        "ends_at": _ts(row.ends_at),
        "generator_url": row.generator_url,
        "first_received_at": _ts(row.first_received_at),
        "last_received_at": _ts(row.last_received_at),
        "receive_count": row.receive_count,
    }


def log_entry(row: LogEntry) -> dict[str, Any]:
    return {
        "seq": row.seq,
        "at": _ts(row.at),
        "actor": {"kind": row.actor_kind, "id": row.actor_id, "name": row.actor_name},
        "type": row.type,
        "summary": row.summary,
        "data": row.data,
        "hash": row.hash,
    }

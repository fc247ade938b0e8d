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
        "scope": row.scope,
        "domain": row.domain,
        "merged_into": f"INC-{row.merged_into}" if row.merged_into is not None else None,
    }


def scope_line(row: Incident, alerts: list[Alert], node_labels: tuple[str, ...] = ()) -> str:
    """`row/a · 32 nodes · 3 symptoms`, `merged into INC-4`; empty for a node incident of
    its own runbook's alerts."""
    parts: list[str] = []
    if row.merged_into is not None:
        parts.append(f"merged into INC-{row.merged_into}")
    if row.domain is not None:
        labels = node_labels or NODE_LABELS
        nodes = {n for a in alerts if (n := _node(a, labels)) is not None}
        parts.append(f"{row.domain} · {len(nodes)} node{'s' if len(nodes) != 1 else ''}")
    symptoms = sum(1 for a in alerts if a.symptom is not None)
    if symptoms:
        parts.append(f"{symptoms} symptom{'s' if symptoms != 1 else ''}")
    return " · ".join(parts)


NODE_LABELS = ("node", "Hostname", "kubernetes_node", "nodename")
"""The default `topology.node_labels`, for callers without settings."""


def _node(alert: Alert, labels: tuple[str, ...]) -> str | None:
    return next((str(alert.labels[k]) for k in labels if alert.labels.get(k)), None)


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
        "symptom": row.symptom,
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

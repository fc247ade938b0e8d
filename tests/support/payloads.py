"""Alertmanager v4 webhook payloads, shaped like the real ones in tests/fixtures/alertmanager."""

from __future__ import annotations

import hashlib
import json
from datetime import datetime
from pathlib import Path
from typing import Any

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def fixture(name: str) -> dict[str, Any]:
    """A real payload recorded from Alertmanager 0.25 (tests/fixtures/alertmanager/NAME)."""
    data: dict[str, Any] = json.loads((FIXTURES / "alertmanager" / name).read_text())
    return data


def fingerprint(labels: dict[str, str]) -> str:
    text = json.dumps(sorted(labels.items()))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def alert(
    *,
    host: str = "gpu-node-02",
    gpu: int = 5,
    alertname: str = "GPUXIDError",
    severity: str = "critical",
    status: str = "firing",
    starts_at: str = "2026-11-29T22:05:22.257Z",
    ends_at: str = "0001-01-01T00:00:00Z",
    **extra: str,
) -> dict[str, Any]:
    labels = {
        "alertname": alertname,
        "Hostname": host,
        "gpu": str(gpu),
        "severity": severity,
        **extra,
    }
    return {
        "status": status,
        "labels": labels,
        "annotations": {"summary": f"{host} GPU {gpu} {alertname}"},
        "startsAt": starts_at,
        "endsAt": ends_at,
        "generatorURL": "http://prometheus:9090/graph?g0.expr=DCGM_FI_DEV_XID_ERRORS",
        "fingerprint": fingerprint(labels),
    }


def resolved(firing: dict[str, Any], ends_at: str = "2026-11-29T22:35:00Z") -> dict[str, Any]:
    return {**firing, "status": "resolved", "endsAt": ends_at}


def notification(
    alerts: list[dict[str, Any]],
    *,
    group: dict[str, str] | None = None,
    receiver: str = "runbook-bot",
    truncated: int = 0,
) -> dict[str, Any]:
    """A webhook body for `alerts`, grouped by `group` (default: alertname and Hostname)."""
    first = alerts[0]["labels"]
    group = group or {k: first[k] for k in ("alertname", "Hostname") if k in first}
    key = "{}:{" + ", ".join(f'{k}="{v}"' for k, v in sorted(group.items())) + "}"
    common = {k: v for k, v in first.items() if all(a["labels"].get(k) == v for a in alerts)}
    return {
        "version": "4",
        "groupKey": key,
        "truncatedAlerts": truncated,
        "status": "firing" if any(a["status"] == "firing" for a in alerts) else "resolved",
        "receiver": receiver,
        "groupLabels": group,
        "commonLabels": common,
        "commonAnnotations": {},
        "externalURL": "http://alertmanager:9093",
        "alerts": alerts,
    }


def iso(value: datetime) -> str:
    return value.isoformat().replace("+00:00", "Z")

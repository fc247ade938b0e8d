"""What the incident store remembers about a node: the alerts it raised, across incidents.

`gpu.fault_history` reads this through `ActionContext.alert_history` (actions never import
the incidents room); the caller that owns the database passes `alerts_on_node` bound to it.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import or_, select

from bot.db import Database
from bot.incidents.models import DRILL_LABEL, Alert

NODE_LABELS = ("Hostname", "node", "kubernetes_node", "nodename", "exported_node")
"""Labels that name the Kubernetes node in GPU alerts (DCGM exporter: `Hostname`)."""
MAX_ROWS = 20000


def node_of(labels: dict[str, Any]) -> str | None:
    for key in NODE_LABELS:
        value = labels.get(key)
        if isinstance(value, str) and value:
            return value
    return None


def alerts_on_node(
    db: Database, node: str, since: datetime, *, drill: str | None = None
) -> list[dict[str, Any]]:
    """Alerts whose node label is `node` and that started at or after `since`, oldest first.
    Drill alerts count only in their own drill (`drill`): a rehearsed XID is no real drop.

    The database filters by the node labels (JSON extraction: `->>` on PostgreSQL,
    `json_extract` on SQLite), so a busy week's other nodes are never read; `node_of`
    then applies the label precedence. MAX_ROWS bounds a pathological storm.
    """
    named = or_(*(Alert.labels[key].as_string() == node for key in NODE_LABELS))
    with db.session() as session:
        rows = session.scalars(
            select(Alert)
            .where(Alert.starts_at >= since, named)
            .order_by(Alert.starts_at, Alert.id)
            .limit(MAX_ROWS)
        ).all()
        return [
            {
                "incident": row.incident_number,
                "alertname": row.alertname,
                "labels": dict(row.labels),
                "starts_at": row.starts_at,
                "status": row.status,
            }
            for row in rows
            if node_of(row.labels) == node and row.labels.get(DRILL_LABEL) in (None, drill)
        ]

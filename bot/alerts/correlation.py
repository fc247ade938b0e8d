"""Correlation keys: which alerts of a notification belong to one failure domain's incident.

A runbook correlates when its `group_by` names a domain: a topology level
(`domain.row`), `domain.storage`, or a label of `topology.storage_labels` (`storage`);
`correlate` (default window 2m, min_nodes 2) says how many nodes make it the domain's.
Each alert's key is the runbook's id and the values of its `group_by` entries: labels as
they are, the level as the alert's node's domain in the topology snapshot (its own domain
where the topology does not know it, so a level never joins it to anything), the storage
as the storage domain the alert names. A notification is split by key, like drills are:
alerts of different domains never share a transaction. Alerts of runbooks that do not
correlate stay one part, grouped as Alertmanager grouped them.

Pure: no I/O, so ingest can split before it opens a transaction.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta

from bot.alerts.payload import WebhookAlert, WebhookPayload
from bot.runbooks.catalog import Catalog
from bot.runbooks.loader import LoadedRunbook
from bot.runbooks.schema import DOMAIN_PREFIX, Correlate, Runbook
from bot.topology import Domain, Topology, node_of, storage_of
from bot.topology_settings import STORAGE, TopologySettings

NO_TOPOLOGY = Topology()
"""Every node its own domain: what correlation by a level sees without a cluster."""


@dataclass(frozen=True)
class Key:
    """One correlation key: a runbook, its group_by values and the domain among them."""

    runbook: str
    values: tuple[tuple[str, str], ...]
    """(group_by entry, value), in group_by's order."""
    domain: Domain
    window: timedelta
    min_nodes: int

    @property
    def digest(self) -> str:
        """What the key's incidents carry as `correlation_key`; a domain incident's group."""
        text = "\n".join(["correlate", self.runbook, *(f"{k}={v}" for k, v in self.values)])
        return hashlib.sha256(text.encode()).hexdigest()

    def node_digest(self, node: str | None) -> str:
        """The group of the runbook's node incident for `node` (one per runbook and node)."""
        return node_group(self.runbook, node)

    @property
    def text(self) -> str:
        """`overheating row/a`: how the log names the key."""
        rest = [f"{k}={v}" for k, v in self.values if not k.startswith(DOMAIN_PREFIX)]
        return " ".join([self.runbook, self.domain.name, *rest])


def node_group(runbook: str, node: str | None) -> str:
    text = f"correlate node\n{runbook}\n{node or ''}"
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass(frozen=True)
class Part:
    """Alerts of one notification that are ingested together: one key's, or (key None)
    the ones grouped as Alertmanager grouped them."""

    payload: WebhookPayload
    loaded: LoadedRunbook | None
    key: Key | None = None


def correlation_of(runbook: Runbook, settings: TopologySettings) -> Correlate | None:
    """How the runbook correlates; None when its group_by names no domain."""
    if domain_entry(runbook, settings) is None:
        return None
    return runbook.correlate or Correlate()


def domain_entry(runbook: Runbook, settings: TopologySettings) -> str | None:
    """The group_by entry that names the runbook's domain (`domain.row`, `storage`)."""
    for entry in runbook.group_by:
        if entry.startswith(DOMAIN_PREFIX) or entry in settings.storage_labels:
            return entry
    return None


def labels_of(payload: WebhookPayload, alert: WebhookAlert) -> dict[str, str]:
    """An alert's labels over the notification's common ones: what runbooks match."""
    return {**payload.common_labels, **alert.labels}


def key_of(
    runbook: Runbook,
    labels: Mapping[str, str],
    settings: TopologySettings,
    topology: Topology,
) -> Key | None:
    """The alert's correlation key under `runbook`; None when the runbook does not
    correlate."""
    correlate = correlation_of(runbook, settings)
    if correlate is None:
        return None
    node = node_of(settings, labels)
    values: list[tuple[str, str]] = []
    domain: Domain | None = None
    for entry in runbook.group_by:
        if entry.startswith(DOMAIN_PREFIX):
            level = entry.removeprefix(DOMAIN_PREFIX)
            if level == STORAGE:
                found = storage_of(settings, labels) or Domain("node", node or "")
            else:
                found = topology.domain_of(node or "", level)
            domain = domain or found
            values.append((entry, found.name))
        elif entry in settings.storage_labels and labels.get(entry):
            found = Domain(STORAGE, labels[entry])
            domain = domain or found
            values.append((entry, labels[entry]))
        else:
            values.append((entry, labels.get(entry, "")))
    if domain is None:  # the storage label is missing: the alert is about its node alone
        domain = Domain("node", node or "")
    return Key(runbook.id, tuple(values), domain, correlate.window, correlate.min_nodes)


def split(
    payload: WebhookPayload,
    catalog: Catalog | None,
    settings: TopologySettings,
    topology: Topology | None,
) -> list[Part]:
    """The notification's parts: the alerts of runbooks that do not correlate first (as
    Alertmanager grouped them, their runbook the first firing alert's), then one part per
    correlation key."""
    if catalog is None:
        return [Part(payload, None)]
    snapshot = topology or NO_TOPOLOGY
    plain: list[WebhookAlert] = []
    keyed: dict[Key, tuple[LoadedRunbook, list[WebhookAlert]]] = {}
    for alert in payload.alerts:
        labels = labels_of(payload, alert)
        loaded = catalog.match(labels)
        key = None if loaded is None else key_of(loaded.runbook, labels, settings, snapshot)
        if key is None or loaded is None:
            plain.append(alert)
        else:
            keyed.setdefault(key, (loaded, []))[1].append(alert)
    parts: list[Part] = []
    if plain:
        part = payload if not keyed else payload.model_copy(update={"alerts": plain})
        parts.append(Part(part, catalog.match(trigger_labels(part))))
    for key in sorted(keyed, key=lambda k: k.digest):
        loaded, alerts = keyed[key]
        parts.append(Part(payload.model_copy(update={"alerts": alerts}), loaded, key))
    return parts


def trigger_labels(payload: WebhookPayload) -> dict[str, str]:
    """The labels a runbook matches a group by: the first firing alert's over the common
    ones."""
    first = next((a for a in payload.alerts if a.firing), payload.alerts[0])
    return {**payload.common_labels, **first.labels}

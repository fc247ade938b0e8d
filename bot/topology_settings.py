"""The `topology` setting: the failure-domain levels of the fleet and the node label that
holds each, widest first (row, rack, leaf switch, power feed). Pure data at the config
layer; `bot.topology` reads the nodes' labels and answers which domain a node is in.

    topology:
      levels:
        - {name: row,  label: topology.example.com/row}
        - {name: rack, label: topology.example.com/rack}
        - {name: leaf, label: topology.example.com/ib-leaf}
        - {name: power, label: topology.example.com/pdu}

A node without a level's label is its own domain at that level. Storage domains are not
node labels: they come from the alert (`storage_labels`, the first one it carries).
"""

from __future__ import annotations

from datetime import timedelta

from pydantic import BaseModel, ConfigDict, Field, model_validator

from bot.durations import Duration

LEVEL_PATTERN = r"^[a-z][a-z0-9_]{0,30}$"
"""A level's name: what `group_by: [domain.row]` and the log say."""
LABEL_KEY_PATTERN = (
    r"^([a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$"
)
"""A Kubernetes label key: an optional DNS-subdomain prefix and a name."""
STORAGE = "storage"
"""The level every topology has last: the storage server or mount an alert names."""


class Level(BaseModel):
    """One failure-domain level and the node label that names a node's domain in it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=LEVEL_PATTERN)
    label: str = Field(pattern=LABEL_KEY_PATTERN, max_length=316)


class TopologySettings(BaseModel):
    """The failure-domain levels, widest first, and where a node's and a storage's name are."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    levels: list[Level] = Field(default_factory=list, max_length=16)
    """Widest first. Empty (the default): every node is its own domain."""
    node_labels: list[str] = Field(
        default_factory=lambda: ["node", "Hostname", "kubernetes_node", "nodename"],
        min_length=1,
        max_length=16,
    )
    """Alert labels that name the node, tried in order (DCGM says `Hostname`,
    kube-state-metrics `node`)."""
    storage_labels: list[str] = Field(
        default_factory=lambda: ["storage", "server", "mount"], min_length=1, max_length=16
    )
    """Alert labels that name the storage a storage alert is about, tried in order."""
    max_staleness: Duration = Field(timedelta(seconds=60))
    """How old the cached node labels may grow when the watch is broken before they are
    listed again (the watch keeps them current otherwise)."""

    @model_validator(mode="after")
    def _distinct(self) -> TopologySettings:
        names = [level.name for level in self.levels]
        if STORAGE in names:
            raise ValueError(
                f"`{STORAGE}` is the level of storage domains, named by the alert "
                "(storage_labels): pick another name for this level"
            )
        if "node" in names:
            raise ValueError("`node` is every node's own domain: pick another level name")
        for kind, values in (("name", names), ("label", [lv.label for lv in self.levels])):
            doubled = sorted({v for v in values if values.count(v) > 1})
            if doubled:
                raise ValueError(f"topology level {kind} {', '.join(doubled)} is given twice")
        if not timedelta(seconds=1) <= self.max_staleness <= timedelta(hours=1):
            raise ValueError("topology.max_staleness is 1s to 1h")
        return self

    def level(self, name: str) -> Level | None:
        return next((level for level in self.levels if level.name == name), None)

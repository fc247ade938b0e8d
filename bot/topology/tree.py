"""The failure-domain tree at one moment: which domain each node is in, at each level.

A `Topology` is an immutable snapshot built from the nodes' labels (`from_labels`); the
cache (`bot.topology.cache`) keeps one current. A domain is named `level/value`
(`row/a`, `leaf/ib-leaf-07`). A node without a level's label is its own domain there
(`node/gpu-node-02`), so correlation never joins it to anything by that level.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime

from bot.topology_settings import STORAGE, Level, TopologySettings

NODE = "node"
"""The level of a node's own domain."""


@dataclass(frozen=True, order=True)
class Domain:
    """One failure domain: a level and the value its label has (`row`, `a`)."""

    level: str
    value: str

    @property
    def name(self) -> str:
        """`row/a`: how the log, the card and the CLI name it."""
        return f"{self.level}/{self.value}"

    @property
    def own(self) -> bool:
        """True for a node's own domain (the label was missing, or the level is `node`)."""
        return self.level == NODE

    @classmethod
    def parse(cls, name: str) -> Domain:
        level, _, value = name.partition("/")
        if not level or not value:
            raise ValueError(f"a domain is named level/value (row/a), not {name!r}")
        return cls(level, value)


@dataclass(frozen=True)
class Topology:
    """Each known node's domain at each level, and each domain's nodes."""

    levels: tuple[Level, ...] = ()
    nodes: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    """node -> level name -> the value of the level's label (levels it lacks are absent)."""
    read_at: datetime | None = None
    """When the labels were read; None for a topology never read (no cluster)."""

    @classmethod
    def from_labels(
        cls,
        settings: TopologySettings,
        labels: Mapping[str, Mapping[str, str]],
        read_at: datetime | None = None,
    ) -> Topology:
        """From each node's labels (node -> label -> value)."""
        nodes: dict[str, dict[str, str]] = {}
        for node, node_labels in labels.items():
            nodes[node] = {
                level.name: node_labels[level.label]
                for level in settings.levels
                if node_labels.get(level.label)
            }
        return cls(tuple(settings.levels), nodes, read_at)

    def level_names(self) -> list[str]:
        return [level.name for level in self.levels]

    def knows(self, node: str) -> bool:
        return node in self.nodes

    def domain_of(self, node: str, level: str) -> Domain:
        """The node's domain at `level`; its own domain where it lacks the level's label,
        is not known, or `level` is `node`."""
        value = self.nodes.get(node, {}).get(level)
        return Domain(level, value) if value else Domain(NODE, node)

    def domains_of(self, node: str) -> list[Domain]:
        """The node's domains, widest first, its own domain last."""
        found = [self.domain_of(node, level.name) for level in self.levels]
        return [d for d in found if not d.own] + [Domain(NODE, node)]

    def members(self, domain: Domain) -> list[str]:
        """The nodes of `domain`, sorted; a node's own domain holds just it."""
        if domain.own or domain.level == STORAGE:
            return [domain.value] if domain.own else []
        return sorted(
            n for n, levels in self.nodes.items() if levels.get(domain.level) == domain.value
        )

    def contains(self, domain: Domain, node: str) -> bool:
        if domain.own:
            return node == domain.value
        return self.nodes.get(node, {}).get(domain.level) == domain.value

    def tree(self) -> dict[str, dict[str, list[str]]]:
        """level -> value -> sorted nodes, for every level and every domain in it."""
        out: dict[str, dict[str, list[str]]] = {}
        for level in self.levels:
            by_value: dict[str, list[str]] = {}
            for node, levels in self.nodes.items():
                if level.name in levels:
                    by_value.setdefault(levels[level.name], []).append(node)
            out[level.name] = {v: sorted(ns) for v, ns in sorted(by_value.items())}
        return out


def node_of(settings: TopologySettings, labels: Mapping[str, str]) -> str | None:
    """The node an alert is about: the first of `node_labels` it carries, else None."""
    for key in settings.node_labels:
        value = labels.get(key)
        if value:
            return value
    return None


def storage_of(settings: TopologySettings, labels: Mapping[str, str]) -> Domain | None:
    """The storage domain an alert names (`storage/nfs-01`), else None."""
    for key in settings.storage_labels:
        value = labels.get(key)
        if value:
            return Domain(STORAGE, value)
    return None


def nodes_of(settings: TopologySettings, alerts: Iterable[Mapping[str, str]]) -> list[str]:
    """The distinct nodes a set of alerts' labels name, sorted."""
    return sorted({n for labels in alerts if (n := node_of(settings, labels)) is not None})

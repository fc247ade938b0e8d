"""The failure domains as a forest, for people to read (`runbook-bot topology`), and where
a set of nodes sits in it.

Levels need not nest (a leaf switch spans two racks): a domain's parent is the narrowest
domain of a wider level (one before it in `topology.levels`) that holds all its nodes, so
a rack sits under its row, a power feed serving one rack under that rack, and a leaf
switch of two racks under the row, beside its racks. `nest` orders the forest for
printing, widest first, each domain followed by its children, names in `natural` order.
`enclosing` says where a set of nodes (an incident's) belongs: the narrowest domains
holding all of them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from bot.topology.tree import Domain, Topology


@dataclass
class Branch:
    """One domain in the forest: its nodes, its depth (0 for a root) and its parent."""

    domain: Domain
    nodes: frozenset[str]
    depth: int = 0
    parent: Domain | None = None
    children: list[Branch] = field(default_factory=list)


def nest(topology: Topology) -> list[Branch]:
    """Every domain of the topology, parents before their children, widest level first
    and by name within a level."""
    placed: list[Branch] = []
    for level, values in topology.tree().items():
        for value in sorted(values, key=natural):
            nodes = values[value]
            branch = Branch(Domain(level, value), frozenset(nodes))
            parent = _narrowest(b for b in placed if branch.nodes <= b.nodes)
            if parent is not None:
                branch.parent, branch.depth = parent.domain, parent.depth + 1
                parent.children.append(branch)
            placed.append(branch)
    ordered: list[Branch] = []

    def visit(branch: Branch) -> None:
        ordered.append(branch)
        for child in branch.children:
            visit(child)

    for branch in placed:
        if branch.parent is None:
            visit(branch)
    return ordered


def enclosing(branches: list[Branch], nodes: Iterable[str]) -> list[Domain]:
    """The narrowest domains holding every one of `nodes`: those none of whose children
    also holds them all (one per branch of the forest that does). Empty when no domain
    holds them all, or for no nodes."""
    wanted = frozenset(nodes)
    if not wanted:
        return []
    holding = [b for b in branches if wanted <= b.nodes]
    return [b.domain for b in holding if not any(wanted <= child.nodes for child in b.children)]


def natural(name: str) -> tuple[tuple[int, int, str], ...]:
    """A sort key putting names as people count them: rack-9 before rack-10, and row z
    before row aa (a data hall's letters run a..z, aa, ab, ...)."""
    return tuple(
        (0, int(part), "") if part.isdigit() else (1, len(part), part)
        for part in re.findall(r"\d+|\D+", name)
    )


def _narrowest(candidates: Iterable[Branch]) -> Branch | None:
    # The smallest holder; on a tie (a power feed that serves exactly one rack) the deeper.
    return min(candidates, key=lambda b: (len(b.nodes), -b.depth), default=None)

"""The failure-domain tree (row, rack, leaf switch, power feed) read from node labels, and
which domain a node is in. `tree` holds the snapshot and its questions; `cache` keeps one
current from the Kubernetes API (list, then watch, with a bounded staleness): whoever
needs the topology holds a `NodeCache` and asks `current()` for the snapshot."""

from bot.topology.cache import NodeCache, cluster_configured
from bot.topology.tree import NODE, Domain, Topology, node_of, nodes_of, storage_of

__all__ = [
    "NODE",
    "Domain",
    "NodeCache",
    "Topology",
    "cluster_configured",
    "node_of",
    "nodes_of",
    "storage_of",
]

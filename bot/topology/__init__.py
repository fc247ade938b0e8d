"""The failure-domain tree (row, rack, leaf switch, power feed) read from node labels, and
which domain a node is in. `tree` holds the snapshot and its questions; `cache` keeps one
current from the Kubernetes API (list, then watch, with a bounded staleness)."""

from bot.topology.tree import NODE, Domain, Topology, node_of, nodes_of, storage_of

__all__ = ["NODE", "Domain", "Topology", "node_of", "nodes_of", "storage_of"]

"""InfiniBand actions: is each HCA port of a node up, and at the rate the fabric expects.

`ibstat` runs on the node through a `k8s.node_job` Job and comes back as text; `ibstat`
(the module) parses it into adapters and ports without doing any I/O, and `ports`
registers the read-only action `ib.port_status`, which judges every InfiniBand port
against the seed's check (`State: Active`, `Rate: 200`) and names the bad ones.
"""

__all__: list[str] = []

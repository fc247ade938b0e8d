"""A simulated GPU cluster: a Kubernetes API server on loopback, for the demo, drills,
benchmarks and tests.

Data flows one way: a `Scenario` (YAML, `scenario.load`, or `presets`) seeds a `Cluster`
(objects in a `Store` behind one lock). The ASGI app in `api` serves it as the real API
does, JSON only (lists, gets, patches, deletes, evictions, logs, and watches replayed from
the store's change history), to the official Python client and to real kubectl. The
`kubelet` thread moves time: terminating pods vanish after their grace period,
controllers recreate pods elsewhere, Job pods run the scenario's command table. Tests
arrange trouble and read the outcome through `Cluster` hooks (stuck pods, injected
failures, `snapshot()`, the request log), never over HTTP. `server.running()` serves it
on 127.0.0.1 in a thread; `server.run()` is the `runbook-bot sim` command. Given
`RedfishOptions`, it also serves the machines' BMCs over Redfish (`redfish`) on a port of
their own. Given `Rbac` (`rbac`: the rules shipped RBAC grants a service account), it
answers that account's token 403 for anything else, as the real API does.

`fleet` lays out a fleet of 1,000 nodes with its failure domains (rows, racks, leaf
switches, power feeds, NFS servers); `storms` makes those domains fail, in the sim and as
the alerts Prometheus would send Alertmanager (`storms.push`).

Only `bot.cli` imports this package; it imports nothing above `bot.clock`/`bot.errors`.
"""

from bot.sim.cluster import Cluster, RecordedRequest, Snapshot
from bot.sim.fleet import Fleet, fleet
from bot.sim.presets import crowded_node, seed
from bot.sim.rbac import Rbac
from bot.sim.redfish import RedfishOptions
from bot.sim.scenario import Scenario, ScenarioInvalid, load
from bot.sim.server import SimHandle, run, running

__all__ = [
    "Cluster",
    "Fleet",
    "Rbac",
    "RecordedRequest",
    "RedfishOptions",
    "Scenario",
    "ScenarioInvalid",
    "SimHandle",
    "Snapshot",
    "crowded_node",
    "fleet",
    "load",
    "run",
    "running",
    "seed",
]

"""Drain benchmark: k8s.drain against real `kubectl drain`, on one crowded node and on a
row of 32 nodes.

One node: two fresh simulators of `crowded_node(pods=110, under_pdb=20)` in real time:
gpu-node-01 runs 90 ReplicaSet pods and 20 StatefulSet pods under a PodDisruptionBudget
that lets one be down at a time (grace 1 s, replacements Ready 0.5 s after binding), so
the budget makes both drains wait. On the first, k8s.drain runs through the registry as
the CLI would; on the second, `kubectl drain gpu-node-01 --ignore-daemonsets
--delete-emptydir-data`. Target: ours/kubectl <= 1.0.

Fleet: 64 GPU nodes; gpu-node-01..32 (the row) carry 16 ReplicaSets of 4 to 8 replicas,
each under a budget of maxUnavailable 1, whose pods span neighbouring nodes (replica k of
set w on node 2w + k), and two unbudgeted batch pods each; the other 32 nodes are empty
and take the replacements. Ours drains the 32 nodes four at a time (a pool of four
threads calling the real k8s.drain, as a `for_each` step with `max_parallel: 4` would,
with the approval's allowance for the 32 nodes); kubectl drains them one after another on
a fresh simulator of the same scenario. Target: ours/kubectl <= 0.5.

    .venv/bin/python bench/drain.py [--pods N] [--under-pdb N] [--timeout SECONDS]
                                    [--fleet-nodes N] [--parallel N] [--case one|fleet|both]

Prints each drain's wall time, pods evicted and API requests (from the simulator's request
log) and the ratios ours/kubectl (PASS, else MISS; a miss is not an error). Exit 1 when
kubectl is missing or a drain fails to empty its nodes.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.results import Results, add_option
from bot.actions import ActionContext, execute, registry
from bot.actions.context import Allowance
from bot.clock import SystemClock
from bot.config import load_settings
from bot.sim import SimHandle, crowded_node, running
from bot.sim.scenario import Scenario, parse

NODE = "gpu-node-01"
TARGET_RATIO = 1.0
FLEET_TARGET_RATIO = 0.5


@dataclass(frozen=True)
class Run:
    name: str
    ok: bool
    seconds: float
    evicted: int
    left_on_node: int
    requests: Counter[str]
    detail: str


def census(sim: SimHandle) -> tuple[int, Counter[str]]:
    log = sim.cluster.requests_made()
    kinds: Counter[str] = Counter()
    kinds["total"] = len(log)
    for request in log:
        if request.path.endswith("/eviction"):
            kinds[f"eviction {request.status}"] += 1
        else:
            kinds[request.method] += 1
    evicted = kinds["eviction 201"] + sum(
        1 for r in log if r.method == "DELETE" and "/pods/" in r.path and r.status == 200
    )
    return evicted, kinds


def fleet(nodes: int) -> Scenario:
    """`nodes` GPU nodes with budgeted ReplicaSets spanning neighbours, and as many empty."""
    workloads: list[dict[str, Any]] = []
    for w in range(nodes // 2):
        replicas = 4 + w % 5
        workloads.append(
            {
                "kind": "ReplicaSet",
                "namespace": "ml",
                "name": f"serve-{w:02d}",
                "replicas": replicas,
                "gpus": 1,
                "image": "busybox:1.36",
                "nodes": [_name((2 * w + k) % nodes) for k in range(replicas)],
                "budget": {"name": f"serve-{w:02d}-pdb", "max_unavailable": 1},
            }
        )
    workloads.append(
        {
            "kind": "ReplicaSet",
            "namespace": "batch",
            "name": "workers",
            "replicas": 2 * nodes,
            "gpus": 1,
            "image": "busybox:1.36",
            "nodes": [_name(n) for n in range(nodes)],
        }
    )
    data = {
        "name": f"pdb-fleet-{nodes}",
        "termination_grace_seconds": 1,
        "startup_seconds": 0.5,
        "nodes": [{"count": 2 * nodes}],
        "workloads": workloads,
    }
    return parse(data, source="bench/drain.py")


def _name(index: int) -> str:
    return f"gpu-node-{index + 1:02d}"


def _left(sim: SimHandle, nodes: list[str]) -> int:
    snapshot = sim.cluster.snapshot()
    return sum(len(snapshot.pods_on(node)) for node in nodes)


def ours(sim: SimHandle, nodes: list[str], timeout: float, parallel: int = 1) -> Run:
    """k8s.drain on each node, `parallel` at a time, under one allowance for all of them."""
    settings = load_settings()
    allowance = Allowance(frozenset(nodes), len(nodes), "row/bench") if len(nodes) > 1 else None
    drain = registry.get("k8s.drain")

    def one(node: str) -> Any:
        # The wall clock: the drain polls and waits in real seconds, as kubectl does.
        ctx = ActionContext(
            actor="bench",
            settings=settings,
            clock=SystemClock(),
            kube_factory=sim.api_client,
            allowance=allowance,
        )
        return execute(drain, {"node": node, "timeout": f"{timeout}s"}, ctx).result

    started = time.monotonic()
    with ThreadPoolExecutor(parallel, thread_name_prefix="bench-drain") as pool:
        results = list(pool.map(one, nodes))
    seconds = time.monotonic() - started
    evicted, kinds = census(sim)
    failed = [r.summary for r in results if not r.ok]
    detail = failed[0] if failed else results[-1].summary
    ok = not failed
    return Run("k8s.drain", ok, seconds, evicted, _left(sim, nodes), kinds, detail)


def theirs(sim: SimHandle, kubectl: str, nodes: list[str], timeout: float) -> Run:
    """`kubectl drain` on each node, one after another."""
    codes, detail = [], ""
    with tempfile.TemporaryDirectory(prefix="bench-drain-") as home:
        config = sim.write_kubeconfig(Path(home) / "kubeconfig")
        command = [kubectl, "--kubeconfig", str(config), "--cache-dir", f"{home}/cache"]
        flags = ["--ignore-daemonsets", "--delete-emptydir-data", f"--timeout={timeout:.0f}s"]
        env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
        started = time.monotonic()
        for node in nodes:
            done = subprocess.run(
                [*command, "drain", node, *flags],
                capture_output=True,
                text=True,
                timeout=timeout + 60,
                env=env,
                check=False,
            )
            codes.append(done.returncode)
            last = (done.stdout.strip().splitlines() or [""])[-1]
            if done.returncode != 0 and not detail:
                detail = done.stderr.strip()[-300:]
            detail = detail or last
        seconds = time.monotonic() - started
    evicted, kinds = census(sim)
    ok = all(code == 0 for code in codes)
    return Run("kubectl drain", ok, seconds, evicted, _left(sim, nodes), kinds, detail)


def show(run: Run) -> None:
    kinds = ", ".join(f"{k} {v}" for k, v in sorted(run.requests.items()) if k != "total")
    print(
        f"{run.name:<14} {run.seconds:7.2f} s  evicted {run.evicted:3d}  left on node "
        f"{run.left_on_node:3d}  API requests {run.requests['total']:4d} ({kinds})"
    )
    print(f"{'':<14} {run.detail}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pods", type=int, default=110)
    parser.add_argument("--under-pdb", type=int, default=20)
    parser.add_argument("--timeout", type=float, default=300.0, help="each drain's timeout (s)")
    parser.add_argument("--fleet-nodes", type=int, default=32, help="nodes the fleet case drains")
    parser.add_argument("--parallel", type=int, default=4, help="our drains at once (fleet)")
    parser.add_argument("--case", choices=("one", "fleet", "both"), default="both")
    add_option(parser)
    args = parser.parse_args()
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        print("bench/drain.py: kubectl is not on PATH", file=sys.stderr)
        return 1
    parameters = {
        "pods": args.pods,
        "under_pdb": args.under_pdb,
        "timeout": args.timeout,
        "fleet_nodes": args.fleet_nodes,
        "parallel": args.parallel,
    }
    results = Results("drain", "Drain against kubectl drain", parameters)
    runs: list[Run] = []
    if args.case in ("one", "both"):
        scenario = crowded_node(pods=args.pods, under_pdb=args.under_pdb)
        print(f"one node: {scenario.name}, {args.under_pdb} pods under a maxUnavailable=1 budget")
        runs += compare(scenario, [NODE], kubectl, args.timeout, 1, "", TARGET_RATIO, results)
    if args.case in ("fleet", "both"):
        scenario = fleet(args.fleet_nodes)
        nodes = [_name(n) for n in range(args.fleet_nodes)]
        print(
            f"fleet: {scenario.name}, {len(nodes)} nodes drained, ours {args.parallel} at a "
            f"time, kubectl one after another; {args.fleet_nodes // 2} budgets of "
            "maxUnavailable 1 across them"
        )
        runs += compare(
            scenario,
            nodes,
            kubectl,
            args.timeout,
            args.parallel,
            "fleet: ",
            FLEET_TARGET_RATIO,
            results,
        )
    results.write(args.json)
    drained = all(r.ok and r.left_on_node == 0 for r in runs)
    return 0 if drained else 1


def compare(
    scenario: Scenario,
    nodes: list[str],
    kubectl: str,
    timeout: float,
    parallel: int,
    prefix: str,
    target: float,
    results: Results,
) -> list[Run]:
    """Ours and kubectl's drains of `nodes`, each on a fresh simulator of `scenario`."""
    with running(scenario) as sim:
        mine = ours(sim, nodes, timeout, parallel)
    with running(scenario) as sim:
        reference = theirs(sim, kubectl, nodes, timeout)
    show(mine)
    show(reference)
    ratio = mine.seconds / reference.seconds
    verdict = "PASS" if ratio <= target else "MISS"
    print(f"{prefix}ratio ours/kubectl {ratio:.3f} (target <= {target}): {verdict}")
    kubectl_s = ("kubectl drain", reference.seconds, "s")
    results.metric(f"{prefix}k8s.drain time", mine.seconds, "s", peer=kubectl_s)
    results.metric(f"{prefix}drain time ratio ours/kubectl", ratio, "x", target=target)
    for run in (mine, reference):
        results.metric(f"{prefix}{run.name}: pods evicted", run.evicted, "pods")
        results.metric(f"{prefix}{run.name}: API requests", run.requests["total"], "requests")
    return [mine, reference]


if __name__ == "__main__":
    sys.exit(main())

"""Drain benchmark: k8s.drain against real `kubectl drain` on the same crowded node.

Two fresh simulators of `crowded_node(pods=110, under_pdb=20)` in real time: gpu-node-01
runs 90 ReplicaSet pods and 20 StatefulSet pods under a PodDisruptionBudget that lets one
be down at a time (grace 1 s, replacements Ready 0.5 s after binding), so the budget makes
both drains wait and retry. On the first, k8s.drain runs through the registry as the CLI
would; on the second, `kubectl drain gpu-node-01 --ignore-daemonsets
--delete-emptydir-data`. Each has a timeout, so the run is bounded.

    .venv/bin/python bench/drain.py [--pods N] [--under-pdb N] [--timeout SECONDS]

Prints each drain's wall time, pods evicted and API requests (from the simulator's request
log) and the ratio ours/kubectl; the target is <= 1.0 (PASS, else MISS; a miss is not an
error). Exit 1 when kubectl is missing or either drain fails to empty the node.
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
from dataclasses import dataclass
from pathlib import Path

from bench.results import Results, add_option
from bot.actions import ActionContext, execute, registry
from bot.clock import SystemClock
from bot.config import load_settings
from bot.sim import SimHandle, crowded_node, running

NODE = "gpu-node-01"
TARGET_RATIO = 1.0


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


def ours(sim: SimHandle, timeout: float) -> Run:
    # The wall clock: the drain polls and retries in real seconds, as kubectl does.
    ctx = ActionContext(
        actor="bench", settings=load_settings(), clock=SystemClock(), kube_factory=sim.api_client
    )
    started = time.monotonic()
    outcome = execute(registry.get("k8s.drain"), {"node": NODE, "timeout": f"{timeout}s"}, ctx)
    seconds = time.monotonic() - started
    evicted, kinds = census(sim)
    left = len(sim.cluster.snapshot().pods_on(NODE))
    return Run(
        "k8s.drain", outcome.result.ok, seconds, evicted, left, kinds, outcome.result.summary
    )


def theirs(sim: SimHandle, kubectl: str, timeout: float) -> Run:
    with tempfile.TemporaryDirectory(prefix="bench-drain-") as home:
        config = sim.write_kubeconfig(Path(home) / "kubeconfig")
        command = [kubectl, "--kubeconfig", str(config), "--cache-dir", f"{home}/cache"]
        flags = ["--ignore-daemonsets", "--delete-emptydir-data", f"--timeout={timeout:.0f}s"]
        env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
        started = time.monotonic()
        done = subprocess.run(
            [*command, "drain", NODE, *flags],
            capture_output=True,
            text=True,
            timeout=timeout + 60,
            env=env,
            check=False,
        )
        seconds = time.monotonic() - started
    evicted, kinds = census(sim)
    left = len(sim.cluster.snapshot().pods_on(NODE))
    last = (done.stdout.strip().splitlines() or [""])[-1]
    detail = last if done.returncode == 0 else done.stderr.strip()[-300:]
    return Run("kubectl drain", done.returncode == 0, seconds, evicted, left, kinds, detail)


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
    add_option(parser)
    args = parser.parse_args()
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        print("bench/drain.py: kubectl is not on PATH", file=sys.stderr)
        return 1
    scenario = crowded_node(pods=args.pods, under_pdb=args.under_pdb)
    print(f"scenario: {scenario.name}, {args.under_pdb} pods under a maxUnavailable=1 budget")
    with running(scenario) as sim:
        mine = ours(sim, args.timeout)
    with running(scenario) as sim:
        reference = theirs(sim, kubectl, args.timeout)
    show(mine)
    show(reference)
    ratio = mine.seconds / reference.seconds
    verdict = "PASS" if ratio <= TARGET_RATIO else "MISS"
    print(f"ratio ours/kubectl {ratio:.3f} (target <= {TARGET_RATIO}): {verdict}")
    parameters = {"pods": args.pods, "under_pdb": args.under_pdb, "timeout": args.timeout}
    results = Results("drain", "Drain against kubectl drain", parameters)
    kubectl_s = ("kubectl drain", reference.seconds, "s")
    results.metric("k8s.drain time", mine.seconds, "s", peer=kubectl_s)
    results.metric("drain time ratio ours/kubectl", ratio, "x", target=TARGET_RATIO)
    for run in (mine, reference):
        results.metric(f"{run.name}: pods evicted", run.evicted, "pods")
        results.metric(f"{run.name}: API requests", run.requests["total"], "requests")
    results.write(args.json)
    drained = all(r.ok and r.left_on_node == 0 for r in (mine, reference))
    return 0 if drained else 1


if __name__ == "__main__":
    sys.exit(main())

"""BMC benchmark: what the bot adds on top of the BMC, in the two numbers an operator feels.

1. IPMI overhead: `IpmiBmc.power_state()` (argv built, password through a pipe,
   output parsed) against the bare `ipmitool ... chassis power status` it runs, each N
   times against OpenIPMI's `ipmi_sim` on loopback. Target: median ratio <= 1.10.
2. Confirmation lag: how long after the BMC reaches the new power state the action says
   so. `bmc.power_off`, `bmc.power_on` and `bmc.power_cycle` run through the registry
   against the simulator's Redfish BMCs in real time (off takes 3 s, on 5 s); the moment
   the machine switched is its SEL record, the moment we knew is when the action returned.
   Target: lag <= 1.5 s (the poll interval grows to 1 s).

    .venv/bin/python bench/bmc.py [--calls N]

Prints each figure against its target (PASS or MISS; a miss is not an error). Exit 1 when
ipmi_sim or ipmitool is missing or an action fails.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from kubernetes import client
from pydantic import SecretStr

from bench.results import Results, add_option
from bot.actions import ActionContext, execute, registry
from bot.actions.bmc.ipmi import IpmiBmc
from bot.actions.bmc.protocol import BmcTarget, Credentials
from bot.config import load_settings
from bot.sim import running, seed
from bot.sim.redfish import RedfishOptions

OVERHEAD_TARGET = 1.10
LAG_TARGET = 1.5
NODE = "gpu-node-02"


def verdict(ok: bool) -> str:
    return "PASS" if ok else "MISS"


def timed(fn: object, calls: int) -> list[float]:
    seconds = []
    for _ in range(calls):
        started = time.perf_counter()
        fn()  # type: ignore[operator]
        seconds.append(time.perf_counter() - started)
    return seconds


def ipmi_overhead(calls: int, workdir: Path, results: Results) -> float:
    from tests.support import ipmi_sim  # the emulator set-up the tests use

    with ipmi_sim.running(workdir) as sim:
        target = BmcTarget(
            node=NODE, protocol="ipmi", address=sim.address, port=sim.port, cipher_suite=3
        )
        bmc = IpmiBmc(target, Credentials(sim.username, SecretStr(sim.password)), timeout=10)
        argv = ["ipmitool", "-I", "lanplus", "-H", sim.address, "-p", str(sim.port)]
        argv += ["-U", sim.username, "-N", "2", "-R", "1", "-Z", "-C", "3"]
        env = {"PATH": os.environ["PATH"], "LANG": "C"}

        def bare() -> None:
            # The password through a pipe, as the bot passes it: the same work for ipmitool.
            with ipmi_sim.password_pipe(sim.password) as fd:
                subprocess.run(
                    [*argv, "-f", f"/dev/fd/{fd}", "chassis", "power", "status"],
                    env=env,
                    capture_output=True,
                    check=True,
                    timeout=10,
                    pass_fds=(fd,),
                )

        timed(bare, 3)  # warm both paths: page cache, ipmi_sim's session table
        ours = statistics.median(timed(bmc.power_state, calls))
        raw = statistics.median(timed(bare, calls))
    ratio = ours / raw
    results.metric("IPMI power status, ours (median)", ours, "s", peer=("bare ipmitool", raw, "s"))
    results.metric("IPMI overhead ratio ours/bare", ratio, "x", target=OVERHEAD_TARGET)
    print(
        f"IPMI power status, median of {calls}: ours {ours * 1000:.1f} ms, bare ipmitool "
        f"{raw * 1000:.1f} ms, ratio {ratio:.3f} (target <= {OVERHEAD_TARGET}) "
        f"{verdict(ratio <= OVERHEAD_TARGET)}"
    )
    return ratio


def confirmation_lags(workdir: Path, results: Results) -> dict[str, float]:
    options = RedfishOptions("admin", "bench-password")
    lags: dict[str, float] = {}
    with running(seed(), time_scale=1.0, redfish=options) as sim:
        settings = load_settings(bmc=sim.bmc_settings(workdir / "password"))
        cordon = {"spec": {"unschedulable": True}}  # runbooks cordon before powering off
        client.CoreV1Api(sim.api_client()).patch_node(
            NODE, cordon, _content_type="application/merge-patch+json"
        )
        for name, event in (
            ("bmc.power_off", "Power off/down"),
            ("bmc.power_on", "Power on"),
            ("bmc.power_cycle", "Power on"),
        ):
            ctx = ActionContext(actor="bench", settings=settings, kube_factory=sim.api_client)
            result = execute(registry.get(name), {"node": NODE}, ctx).result
            known = datetime.now(UTC)
            if not result.ok:
                print(f"{name} failed: {result.summary}", file=sys.stderr)
                raise SystemExit(1)
            switched = [r.time for r in sim.cluster.machine(NODE).sel if r.event == event][-1]
            lags[name] = (known - switched).total_seconds()
            results.metric(f"{name} confirmation lag", lags[name], "s", target=LAG_TARGET)
            print(
                f"{name}: the BMC switched at {switched:%H:%M:%S.%f}, the action knew "
                f"{lags[name]:.2f} s later (target <= {LAG_TARGET}) "
                f"{verdict(lags[name] <= LAG_TARGET)}"
            )
    return lags


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=30, help="power status calls per path")
    add_option(parser)
    args = parser.parse_args()
    results = Results("bmc", "BMC actions", {"calls": args.calls})
    with tempfile.TemporaryDirectory(prefix="bench-bmc-") as tmp:
        ipmi_overhead(args.calls, Path(tmp) / "ipmi", results)
        confirmation_lags(Path(tmp), results)
    results.write(args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())

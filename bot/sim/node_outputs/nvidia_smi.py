"""`nvidia-smi` on a node: its options, `-L`, and `--gpu-reset`; the queries are `queries`.

A reset is the only command with an effect: it applies the pending row remaps (clearing
the volatile ECC count) when the run ends, and is refused for a GPU that fell off the bus
or that a pod still holds.
"""

from __future__ import annotations

from bot.sim.hardware import Machine
from bot.sim.node_outputs import gpus, queries
from bot.sim.node_outputs.answers import Answer
from bot.sim.node_outputs.gpus import Obj


def render(machine: Machine, users: dict[int, Obj], args: list[str]) -> Answer | None:
    opts = _options(args)
    if "--query-gpu" in opts:
        return queries.query_gpu(machine, users, opts)
    if "--query-compute-apps" in opts:
        return queries.query_apps(machine, users, opts)
    if "--gpu-reset" in opts:
        return _reset(machine, users, opts)
    if "--list-gpus" in opts:
        lines = [
            f"GPU {g.index}: {gpus.product(machine)} (UUID: {g.uuid})"
            for g in gpus.present(machine)
        ]
        return Answer("".join(line + "\n" for line in lines), seconds=0.5)
    return None


def _options(args: list[str]) -> dict[str, str | None]:
    short = {"-i": "--id", "-r": "--gpu-reset", "-L": "--list-gpus"}
    takes_value = {"--id", "--query-gpu", "--query-compute-apps", "--format"}
    opts: dict[str, str | None] = {}
    rest = iter(args)
    for arg in rest:
        if arg.startswith("--") and "=" in arg:
            key, value = arg.split("=", 1)
            opts[key] = value
            continue
        key = short.get(arg, arg)
        opts[key] = next(rest, None) if key in takes_value else None
    return opts


def _reset(machine: Machine, users: dict[int, Obj], opts: dict[str, str | None]) -> Answer:
    selected = opts.get("--id")
    wanted = {s.strip() for s in selected.split(",")} if selected else None
    targets = [g for g in machine.gpus if wanted is None or str(g.index) in wanted]
    if not targets:
        return Answer("No devices were found\n", exit_code=6, seconds=0.5)
    lost = [g for g in targets if not g.present]
    if lost:
        text = "".join(
            f"Unable to determine the device handle for GPU {g.pci_bus_id}: GPU is lost.  "
            "Reboot the system to recover this GPU\n"
            for g in lost
        )
        return Answer(text, exit_code=15, seconds=0.5)
    busy = [g for g in targets if g.index in users]
    if busy:
        many = len(busy) > 1
        text = (
            "The following GPUs could not be reset:\n"
            + "".join(f"  GPU {g.pci_bus_id}: In use by another client\n" for g in busy)
            + f"\n{len(busy)} device{'s are' if many else ' is'} currently being used by one "
            "or more other processes (e.g., Fabric Manager, CUDA application, graphics "
            "application such as an X server, or a monitoring application such as another "
            "instance of nvidia-smi). Please first kill all processes using "
            f"{'these devices' if many else 'this device'} and all compute applications "
            "running in the system.\n"
        )
        return Answer(text, exit_code=255)

    def apply() -> None:
        for gpu in targets:
            gpu.resets += 1

    text = "".join(f"GPU {g.pci_bus_id} was successfully reset.\n" for g in targets)
    return Answer(text + "All done.\n", seconds=3.0, effect=apply)

"""What a node's own tools print, derived from its machine: nvidia-smi, dcgmi and ibstat.

A Job pod pinned to a node runs a command; when the scenario's table has no exact (or
node-specific) entry for it, `answer` renders what the real tool would print from
`cluster.machines[node]` and the pods on the node, in the real tools' formats:
`nvidia-smi --query-gpu` and `--query-compute-apps` CSV (`queries`), `--gpu-reset` and
`-L` (`nvidia_smi`), `dcgmi diag -r N [-j]` (DCGM 3.x, `dcgmi`) and `ibstat` (`ibstat`).
A GPU that fell off the bus is absent from nvidia-smi (the others keep their indices),
fails dcgmi and cannot be reset.

Which pod holds which GPU, and what every tool agrees on about the GPUs, is in `gpus`.
A reset is the only command with an effect: `Answer.effect` (`answers`), applied by the
Job controller when the run ends. DCGM levels are compressed to seconds so demos do not
wait.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from bot.sim.node_outputs import dcgmi, ibstat, nvidia_smi
from bot.sim.node_outputs.answers import Answer
from bot.sim.node_outputs.dcgmi import DCGM_FAILED
from bot.sim.node_outputs.gpus import gpu_users

if TYPE_CHECKING:
    from bot.sim.cluster import Cluster

__all__ = ["DCGM_FAILED", "Answer", "answer", "gpu_users"]


def answer(cluster: Cluster, node: str, argv: list[str]) -> Answer | None:
    """What `argv` prints on `node`, or None for a command this package does not render."""
    machine = cluster.machines.get(node)
    if machine is None or not argv:
        return None
    program, args = os.path.basename(argv[0]), argv[1:]
    if program == "nvidia-smi":
        return nvidia_smi.render(machine, gpu_users(cluster, node), args)
    if program == "dcgmi":
        return dcgmi.render(machine, args)
    if program == "ibstat":
        return ibstat.render(machine, args)
    return None

"""`gpu.reset` (disruptive): `nvidia-smi --gpu-reset -i N` on a node, only if the GPU is idle.

A reset applies pending row remaps and page retirements and clears a hung GPU, but it
kills whatever still runs there, and the driver refuses it while any process holds the
GPU. So the bot looks first: one node Job maps indices to UUIDs (`--query-gpu`), another
lists compute processes (`--query-compute-apps`, which names GPUs by UUID). A GPU with
processes is refused with the list; a GPU nvidia-smi cannot see (fallen off the bus) is
refused with the way out (power cycle). Only then does a privileged Job run the reset.
A dry run still looks (those Jobs only read) and validates the reset Job server-side.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from pydantic import BaseModel, Field

from bot.actions.context import ActionContext
from bot.actions.gpu import nvidia_smi
from bot.actions.kubernetes import node_job, nodes
from bot.actions.registry import Risk, action
from bot.actions.types import GpuIndex, Result
from bot.errors import PermanentActionError

TIMEOUT = timedelta(minutes=1)
RESET_TIMEOUT = timedelta(minutes=3)
RETRY_DELAY = 30.0
APPS_FIELDS = ("gpu_uuid", "pid", "process_name", "used_memory")
SHOWN_PROCESSES = 5


class ResetParams(nodes.NodeParams):
    gpu: GpuIndex = Field(description="the GPU's index, as nvidia-smi numbers it")


class ComputeProcess(BaseModel):
    gpu_uuid: str
    pid: int
    process_name: str
    used_memory_mib: int | None = None

    def __str__(self) -> str:
        memory = f" ({self.used_memory_mib} MiB)" if self.used_memory_mib is not None else ""
        return f"pid {self.pid} {self.process_name}{memory}"


class GpuReset(Result):
    node: str
    gpu: int
    uuid: str | None = None
    bus_id: str | None = None
    processes: list[ComputeProcess] = Field(default_factory=list)
    reset: bool = Field(False, description="nvidia-smi reported the GPU reset")
    output: str = ""


@action(
    "gpu.reset",
    params=ResetParams,
    result=GpuReset,
    risk=Risk.DISRUPTIVE,
    description="Reset one GPU (nvidia-smi --gpu-reset -i N) after checking that no process "
    "uses it; applies pending row remaps. Refused, with the processes, while it is in use.",
    dry_run=True,
)
def reset(ctx: ActionContext, params: ResetParams) -> GpuReset:
    node, index = params.node, params.gpu
    reading = replace(ctx, dry_run=False)
    listing = _run(
        reading, node, ["nvidia-smi", "--query-gpu=index,uuid,pci.bus_id", "--format=csv,noheader"]
    )
    gpus = {
        g.index: g
        for g in nvidia_smi.parse_query_gpu(
            listing.log_tail, fields=["index", "uuid", "pci.bus_id"]
        ).gpus
    }
    gpu = gpus.get(index)
    if gpu is None or not gpu.uuid:
        seen = ", ".join(str(i) for i in sorted(gpus)) or "none"
        raise PermanentActionError(
            f"GPU {index} is not visible to nvidia-smi on {node} (it lists {seen}): a GPU that "
            "fell off the bus (XID 79) cannot be reset; power-cycle the node through its BMC, "
            "then run gpu.diag level=3"
        )
    # In the node's PID namespace: from a container's own, other containers' processes
    # may not be listed, and an empty list would read as an idle GPU.
    apps = _run(
        reading,
        node,
        [
            "nvidia-smi",
            f"--query-compute-apps={','.join(APPS_FIELDS)}",
            "--format=csv,noheader,nounits",
        ],
        host_pid=True,
    )
    try:
        processes = [p for p in parse_compute_apps(apps.log_tail) if p.gpu_uuid == gpu.uuid]
    except ValueError as exc:
        raise PermanentActionError(
            f"cannot tell whether GPU {index} on {node} is in use ({exc}); not resetting it"
        ) from exc
    if processes:
        shown = "; ".join(str(p) for p in processes[:SHOWN_PROCESSES])
        more = (
            f" and {len(processes) - SHOWN_PROCESSES} more"
            if len(processes) > SHOWN_PROCESSES
            else ""
        )
        raise PermanentActionError(
            f"GPU {index} on {node} is in use by {len(processes)} process"
            f"{'es' if len(processes) > 1 else ''}: {shown}{more}; drain its workloads first "
            "(k8s.drain, or pod_selector for the pods on this GPU), then reset"
        )
    command = ["nvidia-smi", "--gpu-reset", "-i", str(index)]
    run = node_job.run_checked(
        ctx,
        node,
        command,
        retry_delay=RETRY_DELAY,
        failed=f"the reset of GPU {index} on {node} did not run",
        timeout=RESET_TIMEOUT,
        privileged=True,
    )
    base = {"node": node, "gpu": index, "uuid": gpu.uuid, "bus_id": gpu.bus_id}
    if run.dry_run:
        return GpuReset(
            ok=True,
            summary=f"would reset GPU {index} ({gpu.bus_id}) on {node}: no process uses it "
            "(dry run)",
            dry_run=True,
            **base,
        )
    if run.exit_code != 0 or "successfully reset" not in run.log_tail:
        raise PermanentActionError(_refusal(node, index, run))
    return GpuReset(
        ok=True,
        summary=f"GPU {index} ({gpu.bus_id}) on {node} was reset; verify with gpu.diag level=2 "
        "before returning it to service",
        **base,
        reset=True,
        output=run.log_tail,
    )


def parse_compute_apps(text: str) -> list[ComputeProcess]:
    """Parse `--query-compute-apps=gpu_uuid,pid,process_name,used_memory
    --format=csv,noheader,nounits`. A process name may itself hold commas."""
    out = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip() or line.strip().lower().startswith("no running"):
            continue
        cells = [c.strip() for c in line.split(",")]
        if len(cells) < 4:
            raise ValueError(f"nvidia-smi --query-compute-apps line {number}: {line.strip()!r}")
        uuid, pid, memory = cells[0], cells[1], cells[-1]
        try:
            out.append(
                ComputeProcess(
                    gpu_uuid=uuid,
                    pid=int(pid),
                    process_name=", ".join(cells[2:-1]),
                    used_memory_mib=int(memory) if memory.isdigit() else None,
                )
            )
        except ValueError:
            raise ValueError(
                f"nvidia-smi --query-compute-apps line {number}: pid {pid!r} is not a number"
            ) from None
    return out


def _run(
    ctx: ActionContext, node: str, command: list[str], *, host_pid: bool = False
) -> node_job.NodeJobResult:
    run = node_job.run_checked(
        ctx,
        node,
        command,
        retry_delay=RETRY_DELAY,
        missing="set node_job_image to an image the NVIDIA container toolkit serves",
        timeout=TIMEOUT,
        host_pid=host_pid,
    )
    if run.exit_code != 0:
        last = next((ln.strip() for ln in reversed(run.log_tail.splitlines()) if ln.strip()), "")
        raise PermanentActionError(
            f"`{' '.join(command)}` failed on {node} (exit {run.exit_code}): "
            f"{last[:200] or 'no output'}; the bot will not reset a GPU it cannot inspect: run "
            "gpu.health_snapshot, and power-cycle through the BMC if the driver lost the GPU"
        )
    return run


def _refusal(node: str, index: int, run: node_job.NodeJobResult) -> str:
    """What nvidia-smi said, and what to do about it."""
    said = " ".join(line.strip() for line in run.log_tail.splitlines() if line.strip())[:300]
    text = run.log_tail.lower()
    if "in use" in text:
        advice = (
            "something still holds the GPU (a process that started since the check, or an "
            "agent: nv-hostengine/DCGM, dcgm-exporter, Fabric Manager, persistenced); stop "
            "it or drain the node, then retry; if it persists, reboot through the BMC"
        )
    elif "is lost" in text or "fallen off" in text or run.exit_code == 15:
        advice = "the GPU has fallen off the bus: power-cycle the node through its BMC"
    elif "insufficient permissions" in text or run.exit_code == 4:
        advice = "the reset Job must run as root and privileged; check the namespace's policy"
    elif "not supported" in text or run.exit_code == 3:
        advice = (
            "this GPU cannot be reset alone (e.g. NVLink-connected GPUs that must be reset "
            "together); drain the node and reboot it"
        )
    else:
        advice = "drain the node and reboot it through the BMC"
    return (
        f"GPU {index} on {node} was not reset (nvidia-smi exit {run.exit_code}: {said}); {advice}"
    )

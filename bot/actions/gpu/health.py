"""`gpu.health_snapshot` (read): every GPU on a node as nvidia-smi sees it, judged.

A node Job runs `nvidia-smi --query-gpu=<FIELDS> --format=csv`; `nvidia_smi` parses it
by header name. The rows are compared with the node's `nvidia.com/gpu` capacity (the
device plugin keeps capacity when a device turns unhealthy): a GPU that fell off the bus
(XID 79) is simply not listed, so a short count is a finding, not an action error. When
the surviving indices leave a gap, the gap names the GPU; when NVML renumbered them, only
the count and the bus ids can. Findings also cover heat (>= 85 C), uncorrected ECC,
pending row remaps or page retirements, failed remaps, clock slowdowns (the active
throttle reasons, decoded) and anything nvidia-smi printed instead of a row. Fields an
older driver does not know are dropped one by one and the query retried.
"""

from __future__ import annotations

import re
from dataclasses import replace
from datetime import timedelta
from typing import Literal

from pydantic import BaseModel, Field

from bot.actions.context import ActionContext
from bot.actions.gpu import nvidia_smi
from bot.actions.kubernetes import api, node_job, nodes
from bot.actions.registry import Risk, action
from bot.actions.types import Result
from bot.errors import PermanentActionError

GPU = "nvidia.com/gpu"
HOT_C = 85
TIMEOUT = timedelta(minutes=1)
RETRY_DELAY = 30.0
FIELDS = (
    "index",
    "uuid",
    "name",
    "pci.bus_id",
    "temperature.gpu",
    "utilization.gpu",
    "memory.used",
    "memory.total",
    "power.draw",
    "ecc.errors.uncorrected.aggregate.total",
)
# Not every driver or GPU knows these; a refused one is dropped and the query rerun.
OPTIONAL_FIELDS = (
    "retired_pages.pending",
    "remapped_rows.pending",
    "remapped_rows.failure",
    "clocks_throttle_reasons.active",
)
_INVALID_FIELD = re.compile(r'Field "(?P<field>[^"]+)" is not a valid field to query')

FindingKind = Literal[
    "missing",
    "hot",
    "ecc",
    "remap_pending",
    "remap_failed",
    "retirement_pending",
    "slowdown",
    "nvidia_smi",
]


class GpuState(BaseModel):
    index: int
    uuid: str | None = None
    name: str | None = None
    bus_id: str | None = None
    temperature_c: int | None = None
    utilization_pct: int | None = None
    memory_used_mib: int | None = None
    memory_total_mib: int | None = None
    power_draw_w: float | None = None
    ecc_uncorrected: int | None = Field(None, description="aggregate uncorrected ECC errors")
    retired_pages_pending: bool | None = None
    remapped_rows_pending: bool | None = None
    remapped_rows_failure: bool | None = None
    clock_event_reasons: list[str] = Field(default_factory=list, description="active, decoded")
    healthy: bool = True


class Finding(BaseModel):
    kind: FindingKind
    gpu: int | None = Field(None, description="GPU index; None for the node as a whole")
    message: str


class HealthSnapshot(Result):
    node: str
    expected_gpus: int = Field(0, description="the node's nvidia.com/gpu capacity")
    visible_gpus: int = 0
    missing_count: int = 0
    missing: list[int] = Field(default_factory=list, description="indices known to be missing")
    gpus: list[GpuState] = Field(default_factory=list)
    findings: list[Finding] = Field(default_factory=list)
    healthy: bool = False


@action(
    "gpu.health_snapshot",
    params=nodes.NodeParams,
    result=HealthSnapshot,
    risk=Risk.READ,
    description="nvidia-smi on a node: each GPU's temperature, memory, power, ECC, pending "
    "remaps and throttling, and GPUs missing against nvidia.com/gpu capacity, as findings.",
    dry_run=True,
)
def health_snapshot(ctx: ActionContext, params: nodes.NodeParams) -> HealthSnapshot:
    node = api.read_node(ctx, params.node)
    expected = int((node.status.capacity or {}).get(GPU, 0))
    run, fields = _query(ctx, params.node)
    lines = run.log_tail.splitlines()
    header = next((i for i, line in enumerate(lines) if line.strip().startswith("index")), None)
    if header is None:
        return _unreadable(ctx, params.node, expected, run)
    try:
        parsed = nvidia_smi.parse_query_gpu("\n".join(lines[header:]))
    except ValueError as exc:
        raise PermanentActionError(
            f"nvidia-smi on {params.node} printed what it should not ({exc}); run "
            f"`nvidia-smi --query-gpu={','.join(fields)} --format=csv` on the node to see why"
        ) from exc
    notes = [line.strip() for line in lines[:header] if line.strip()] + parsed.messages
    gpus = [_state(gpu) for gpu in parsed.gpus]
    missing_count = max(0, expected - len(gpus))
    missing = _missing(expected, gpus) if missing_count else []
    findings = _missing_findings(expected, gpus, missing, missing_count)
    findings += [f for gpu in gpus for f in _gpu_findings(gpu)]
    findings += [Finding(kind="nvidia_smi", message=f"nvidia-smi: {note}") for note in notes]
    for gpu in gpus:
        gpu.healthy = not any(f.gpu == gpu.index for f in findings)
    healthy = not findings
    summary = f"{params.node}: " + (
        f"all {len(gpus)} GPUs healthy"
        if healthy
        else f"{len(gpus)}/{expected} GPUs visible; " + "; ".join(f.message for f in findings)
    )
    return HealthSnapshot(
        ok=True,
        summary=summary[:1000],
        dry_run=ctx.dry_run,
        node=params.node,
        expected_gpus=expected,
        visible_gpus=len(gpus),
        missing_count=missing_count,
        missing=missing,
        gpus=gpus,
        findings=findings,
        healthy=healthy,
    )


def _query(ctx: ActionContext, node: str) -> tuple[node_job.NodeJobResult, list[str]]:
    """Run the query, dropping optional fields the driver refuses (one Job per refusal)."""
    fields = [*FIELDS, *OPTIONAL_FIELDS]
    # A read runs even in a dry run: its Job only reads, and is gone afterwards.
    reading = replace(ctx, dry_run=False)
    while True:
        command = ["nvidia-smi", f"--query-gpu={','.join(fields)}", "--format=csv"]
        run = node_job.run_checked(
            reading,
            node,
            command,
            retry_delay=RETRY_DELAY,
            missing="use an image the NVIDIA container toolkit serves (set node_job_image), "
            "or check the GPU operator's toolkit on the node",
            timeout=TIMEOUT,
        )
        refused = _INVALID_FIELD.search(run.log_tail)
        if (
            run.exit_code != 0
            and refused
            and refused["field"] in set(OPTIONAL_FIELDS) & set(fields)
        ):
            fields.remove(refused["field"])
            ctx.progress(f"nvidia-smi on {node} does not know {refused['field']}; asking without")
            continue
        return run, fields


def _unreadable(
    ctx: ActionContext, node: str, expected: int, run: node_job.NodeJobResult
) -> HealthSnapshot:
    """nvidia-smi printed no rows at all: the driver cannot reach the GPUs."""
    last = next((ln.strip() for ln in reversed(run.log_tail.splitlines()) if ln.strip()), "")
    said = last[:200] or "no output"
    summary = (
        f"{node}: nvidia-smi exited {run.exit_code} without listing any GPU: {said}; "
        "a GPU the driver cannot reach has usually fallen off the bus (XID 79): check "
        "`dmesg | grep -i xid` (gpu.classify_xid), cordon, drain, power-cycle through the BMC"
    )
    return HealthSnapshot(
        ok=False,
        summary=summary,
        dry_run=ctx.dry_run,
        node=node,
        expected_gpus=expected,
        missing_count=expected,
        findings=[Finding(kind="nvidia_smi", message=f"nvidia-smi: {said}")],
    )


def _state(gpu: nvidia_smi.GpuQuery) -> GpuState:
    return GpuState(
        index=gpu.index,
        uuid=gpu.uuid,
        name=gpu.name,
        bus_id=gpu.bus_id,
        temperature_c=gpu.temperature_c,
        utilization_pct=gpu.utilization_pct,
        memory_used_mib=gpu.memory_used_mib,
        memory_total_mib=gpu.memory_total_mib,
        power_draw_w=gpu.power_draw_w,
        ecc_uncorrected=gpu.ecc_uncorrected_total,
        retired_pages_pending=gpu.retired_pages_pending,
        remapped_rows_pending=gpu.remapped_rows_pending,
        remapped_rows_failure=gpu.remapped_rows_failure,
        clock_event_reasons=gpu.clock_event_reasons,
    )


def _missing(expected: int, gpus: list[GpuState]) -> list[int]:
    """Missing indices when the survivors show a gap; [] when NVML renumbered them 0..n-1,
    because then any of the cards could be the one that left."""
    seen = sorted(gpu.index for gpu in gpus)
    if seen == list(range(len(seen))):
        return []
    return sorted(set(range(expected)) - set(seen))


def _missing_findings(
    expected: int, gpus: list[GpuState], missing: list[int], count: int
) -> list[Finding]:
    act = "cordon, drain, power-cycle through the BMC, then gpu.diag level=3"
    if missing:
        return [
            Finding(
                kind="missing",
                gpu=index,
                message=f"GPU {index} missing: fell off the bus? XID 79 ({act})",
            )
            for index in missing
        ]
    if not count:
        return []
    buses = ", ".join(g.bus_id or "?" for g in sorted(gpus, key=lambda g: g.index))
    return [
        Finding(
            kind="missing",
            message=f"{count} of {expected} GPUs missing: fell off the bus? XID 79; the "
            f"indices were renumbered, so compare the bus ids still seen ({buses}) with the "
            f"node's inventory to find the card ({act})",
        )
    ]


def _gpu_findings(gpu: GpuState) -> list[Finding]:
    found: list[tuple[FindingKind, str]] = []
    name = f"GPU {gpu.index}"
    if gpu.temperature_c is not None and gpu.temperature_c >= HOT_C:
        found.append(
            (
                "hot",
                f"{name} at {gpu.temperature_c} C (>= {HOT_C} C): check its cooling (fans and "
                "inlet temperature on the BMC)",
            )
        )
    if gpu.ecc_uncorrected:
        found.append(
            (
                "ecc",
                f"{name} has {gpu.ecc_uncorrected} uncorrected ECC errors (aggregate); "
                "> 10 a week is the watch list, > 50 takes the card out",
            )
        )
    if gpu.remapped_rows_failure:
        found.append(("remap_failed", f"{name} row remapping failed: the card needs an RMA"))
    if gpu.remapped_rows_pending:
        found.append(
            (
                "remap_pending",
                f"{name} has a row remap pending: drain it and reset the GPU (gpu.reset)",
            )
        )
    if gpu.retired_pages_pending:
        found.append(
            (
                "retirement_pending",
                f"{name} has a page retirement pending: drain it and reset the GPU (gpu.reset)",
            )
        )
    slowdown = [r for r in gpu.clock_event_reasons if r not in nvidia_smi.BENIGN_REASONS]
    if slowdown:
        found.append(("slowdown", f"{name} clocks slowed: {', '.join(slowdown)}"))
    return [Finding(kind=kind, gpu=gpu.index, message=message) for kind, message in found]

"""`gpu.diag` (change): DCGM diagnostics on a node, `dcgmi diag -r N -j`, per test per GPU.

Level 1 checks the deployment in seconds; level 2 (about two minutes) adds PCIe, memory
and bandwidth tests and is the gate before a node is uncordoned; level 3 (about 15
minutes) adds compute and power stress and is run after a node comes back from a crash
or an XID 79. The Job waits at most 2, 10 and 30 minutes. The stress levels load every
GPU, so the node should be drained first. The JSON report is parsed by `dcgmi`; a run
that fails a test is still a run that did its work: `ok` is true and `passed` false.
"""

from __future__ import annotations

from datetime import timedelta

from pydantic import BaseModel, Field

from bot.actions.context import ActionContext
from bot.actions.gpu import dcgmi
from bot.actions.kubernetes import node_job, nodes
from bot.actions.registry import Risk, action
from bot.actions.types import ImageRef, Result
from bot.errors import PermanentActionError

DCGM_IMAGE = "nvcr.io/nvidia/cloud-native/dcgm:3.3.5-1-ubuntu22.04"
TIMEOUTS = {1: timedelta(minutes=2), 2: timedelta(minutes=10), 3: timedelta(minutes=30)}
RETRY_DELAY = 60.0
LOG_BYTES = 256 * 1024  # r3 on 8 GPUs with info lines is tens of KiB of JSON


class DiagParams(nodes.NodeParams):
    level: int = Field(
        2,
        ge=1,
        le=3,
        description="1 quick; 2 medium, the gate before uncordon; 3 long, after a crash",
    )
    image: ImageRef | None = Field(None, description=f"image with dcgmi (default {DCGM_IMAGE})")


class DiagOutcome(BaseModel):
    category: str
    test: str
    gpu: int | None = Field(None, description="None: a check of the whole node")
    status: dcgmi.Status
    info: list[str] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)
    error_ids: list[int] = Field(default_factory=list, description="DCGM_FR_* codes")


class GpuDiag(Result):
    node: str
    level: int
    passed: bool = False
    exit_code: int | None = None
    dcgm_version: str | None = None
    driver_version: str | None = None
    gpus: dict[int, dcgmi.Status] = Field(default_factory=dict, description="worst per GPU")
    failed_gpus: list[int] = Field(default_factory=list)
    failures: list[str] = Field(default_factory=list, description="one line per failed test")
    warnings: list[str] = Field(default_factory=list, description="one line per Warn result")
    tests: list[DiagOutcome] = Field(default_factory=list)


@action(
    "gpu.diag",
    params=DiagParams,
    result=GpuDiag,
    risk=Risk.CHANGE,
    description="DCGM diagnostics (dcgmi diag -r 1|2|3) on a node, per test per GPU; level 2 "
    "is the gate before uncordon, level 3 after a crash. Drain the node first.",
    dry_run=True,
)
def diag(ctx: ActionContext, params: DiagParams) -> GpuDiag:
    node, level = params.node, params.level
    command = ["dcgmi", "diag", "-r", str(level), "-j"]
    run = node_job.run_checked(
        ctx,
        node,
        command,
        retry_delay=RETRY_DELAY,
        failed=f"dcgmi diag -r {level} did not complete on {node}",
        missing=f"pass image= a DCGM image (e.g. {DCGM_IMAGE})",
        image=params.image or DCGM_IMAGE,
        # dcgmi talks to DCGM's host engine at localhost:5555: on the node's network that
        # is the GPU operator's nvidia-dcgm, the engine that owns the GPUs.
        host_network=True,
        timeout=TIMEOUTS[level],
        log_bytes=LOG_BYTES,
    )
    if run.dry_run:
        return GpuDiag(
            ok=True,
            summary=f"would run `{' '.join(command)}` on {node} (dry run)",
            dry_run=True,
            node=node,
            level=level,
        )
    try:
        report = dcgmi.parse(run.log_tail)
    except ValueError as exc:
        raise PermanentActionError(
            f"dcgmi diag -r {level} on {node} exited {run.exit_code} without a report ({exc}); "
            "check that DCGM's host engine runs on the node (the GPU operator's nvidia-dcgm)"
        ) from exc
    if report.runtime_error:
        raise PermanentActionError(
            f"dcgmi diag -r {level} could not run on {node}: {report.runtime_error[:300]}; "
            "check DCGM's host engine on the node, and that no job holds the GPUs"
        )
    if not report.results:
        raise PermanentActionError(
            f"dcgmi diag -r {level} on {node} exited {run.exit_code} with a report of no "
            "tests; run it on the node (dcgmi diag -r 1) to see why"
        )
    outcomes = [_outcome(r) for r in report.results]
    failures = [_line(r) for r in report.with_status("Fail")]
    warnings = [_line(r) for r in report.with_status("Warn")]
    failed_gpus = report.failed_gpus()
    if report.passed:
        gpus = len(report.by_gpu())
        summary = f"dcgmi diag -r {level} passed on {node} ({len(report.results)} results" + (
            f", {gpus} GPUs)" if gpus else ", deployment checks)"
        )
        if warnings:
            summary += f", with {len(warnings)} warning{'s' * (len(warnings) > 1)}: {warnings[0]}"
    else:
        where = ", ".join(f"GPU {g}" for g in failed_gpus) or "the node"
        summary = (
            f"dcgmi diag -r {level} FAILED on {node} ({where}): "
            + "; ".join(failures[:3])
            + (f"; and {len(failures) - 3} more" if len(failures) > 3 else "")
        )
    return GpuDiag(
        ok=True,
        summary=summary[:1000],
        node=node,
        level=level,
        passed=report.passed,
        exit_code=run.exit_code,
        dcgm_version=report.version,
        driver_version=report.driver_version,
        gpus=report.by_gpu(),
        failed_gpus=failed_gpus,
        failures=failures,
        warnings=warnings,
        tests=outcomes,
    )


def _outcome(result: dcgmi.DiagResult) -> DiagOutcome:
    return DiagOutcome(
        category=result.category,
        test=result.test,
        gpu=result.gpu,
        status=result.status,
        info=result.info,
        warnings=[w.message for w in result.warnings],
        error_ids=[w.error_id for w in result.warnings if w.error_id is not None],
    )


def _line(result: dcgmi.DiagResult) -> str:
    said = "; ".join(w.message for w in result.warnings) or "; ".join(result.info)
    where = f" on GPU {result.gpu}" if result.gpu is not None else ""
    return f"{result.test}{where}" + (f": {said}" if said else "")

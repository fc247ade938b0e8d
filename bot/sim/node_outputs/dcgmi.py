"""`dcgmi diag -r N [-j]` on a node, as DCGM 3.x prints it: JSON with -j, else the table.

Level 1 runs the deployment checks; level 2 adds PCIe, GPU Memory and Memory Bandwidth
per GPU; levels 3 and 4 add Diagnostic, Targeted Stress and Targeted Power. A GPU that
fell off the bus fails every per-GPU test (and the deployment's device count check); an
uncorrected ECC error whose rows are not yet remapped fails GPU Memory and the row-remap
check; a GPU at or above the slowdown temperature fails the stress tests. A run with a
failure exits as DCGM does. Levels take seconds here, not minutes, so demos do not wait.
"""

from __future__ import annotations

import json

from bot.sim.hardware import Gpu, Machine
from bot.sim.node_outputs.answers import Answer
from bot.sim.node_outputs.gpus import DRIVER, HOT_C, Obj

DCGM_VERSION = "3.3.5"
DCGM_SECONDS = {1: 3.0, 2: 12.0, 3: 45.0, 4: 90.0}
# DCGM exits with its dcgmReturn_t, negative, as a byte: -30 (NVVS error) is 226.
DCGM_FAILED = 226

DEPLOYMENT = (
    "Denylist",
    "NVML Library",
    "CUDA Main Library",
    "Permissions and OS Blocks",
    "Persistence Mode",
    "Environment Variables",
    "Page Retirement/Row Remap",
    "Graphics Processes",
    "Inforom",
)
# (category, test) added at each level; level 4 runs what level 3 does here.
PER_GPU = {
    2: [("Integration", "PCIe"), ("Hardware", "GPU Memory"), ("Stress", "Memory Bandwidth")],
    3: [("Hardware", "Diagnostic"), ("Stress", "Targeted Stress"), ("Stress", "Targeted Power")],
}
STRESS = frozenset({"Memory Bandwidth", "Diagnostic", "Targeted Stress", "Targeted Power"})
H100_DEVICE_ID = "2330"


def render(machine: Machine, args: list[str]) -> Answer | None:
    if not args or args[0] != "diag":
        return None
    level: str | None = None
    as_json = False
    rest = iter(args[1:])
    for arg in rest:
        if arg in ("-r", "--run"):
            level = next(rest, None)
        elif arg.startswith("--run="):
            level = arg.split("=", 1)[1]
        elif arg in ("-j", "--json"):
            as_json = True
    if level not in ("1", "2", "3", "4"):
        return None
    categories = _diag(machine, int(level))
    failed = any(
        r["status"] == "Fail" for c in categories for t in c["tests"] for r in t["results"]
    )
    doc = {
        "DCGM GPU Diagnostic": {
            "Driver Version Detected": DRIVER,
            "GPU Device IDs": [H100_DEVICE_ID for _ in machine.gpus],
            "GPU Device Serials": {str(g.index): g.serial for g in machine.gpus},
            "test_categories": categories,
            "version": DCGM_VERSION,
        }
    }
    # jsoncpp's styled writer: three-space indent, " : ", keys in byte order.
    text = (
        json.dumps(doc, indent=3, separators=(",", " : "), sort_keys=True) + "\n"
        if as_json
        else _diag_table(machine, categories)
    )
    return Answer(text, exit_code=DCGM_FAILED if failed else 0, seconds=DCGM_SECONDS[int(level)])


def _diag(machine: Machine, level: int) -> list[Obj]:
    lost = [g for g in machine.gpus if not g.present]
    pending = [g for g in machine.gpus if g.present and g.ecc_uncorrected and not g.resets]
    software = []
    for name in DEPLOYMENT:
        warnings: list[Obj] = []
        if name == "Permissions and OS Blocks" and lost:
            warnings = [
                _warning(
                    20,
                    8,
                    4,
                    "The number of devices NVML returns is different than the number of "
                    "devices in /dev.",
                )
            ]
        if name == "Page Retirement/Row Remap":
            warnings = [
                _warning(
                    85, 10, 6, f"GPU {g.index} had memory errors and row remappings are pending"
                )
                for g in pending
            ]
        software.append({"name": name, "results": [_result(None, warnings)]})
    categories: list[Obj] = [{"category": "Deployment", "tests": software}]
    for added in range(2, min(level, 3) + 1):
        for category, test in PER_GPU[added]:
            entry = {"name": test, "results": [_gpu_result(g, test) for g in machine.gpus]}
            found = next((c for c in categories if c["category"] == category), None)
            if found is None:
                categories.append({"category": category, "tests": [entry]})
            else:
                found["tests"].append(entry)
    return categories


def _gpu_result(gpu: Gpu, test: str) -> Obj:
    warnings = []
    if not gpu.present:
        message = (
            f"API call nvmlDeviceGetHandleByIndex_v2 failed for GPU {gpu.index}: 'GPU is lost'"
        )
        warnings.append(_warning(65, 15, 2, message))
    elif test == "GPU Memory" and gpu.ecc_uncorrected and not gpu.resets:
        message = (
            f"Detected {gpu.ecc_uncorrected} volatile double-bit ECC error(s) in GPU {gpu.index}."
        )
        warnings.append(_warning(4, 10, 6, message))
    elif test in STRESS and gpu.temperature >= HOT_C:
        message = (
            f"Temperature {round(gpu.temperature)} of GPU {gpu.index} exceeded user-specified "
            f"maximum allowed temperature {HOT_C}"
        )
        warnings.append(_warning(42, 9, 4, message))
    return _result(gpu.index, warnings)


def _result(gpu: int | None, warnings: list[Obj]) -> Obj:
    result: Obj = {"status": "Fail" if warnings else "Pass"}
    if gpu is not None:
        result["gpu_id"] = str(gpu)
    if warnings:
        result["warnings"] = warnings
    return result


def _warning(code: int, category: int, severity: int, message: str) -> Obj:
    return {
        "error_category": category,
        "error_id": code,
        "error_severity": severity,
        "warning": message,
    }


def _diag_table(machine: Machine, categories: list[Obj]) -> str:
    """The text table `dcgmi diag -r N` prints without -j."""

    def row(left: str, right: str) -> str:
        return f"| {left:<25} | {right:<46} |"

    def band(name: str) -> str:
        return f"+-----  {name}  ".ljust(28, "-") + "+" + "-" * 48 + "+"

    lines = [
        "Successfully ran diagnostic for group.",
        "+" + "-" * 27 + "+" + "-" * 48 + "+",
        row("Diagnostic", "Result"),
        "+" + "=" * 27 + "+" + "=" * 48 + "+",
        band("Metadata"),
        row("DCGM Version", DCGM_VERSION),
        row("Driver Version Detected", DRIVER),
        row("GPU Device IDs Detected", ",".join(H100_DEVICE_ID for _ in machine.gpus)),
    ]
    for category in categories:
        lines.append(band(category["category"]))
        for test in category["tests"]:
            results = test["results"]
            statuses = {r["status"] for r in results}
            if "gpu_id" not in results[0]:
                lines.append(row(test["name"], results[0]["status"]))
            elif len(statuses) == 1:
                lines.append(row(test["name"], f"{statuses.pop()} - All"))
            else:
                for status in sorted(statuses):
                    ids = ", ".join(r["gpu_id"] for r in results if r["status"] == status)
                    lines.append(row(test["name"], f"{status} - GPU: {ids}"))
            for result in results:
                for warning in result.get("warnings", []):
                    lines.append(row("Warning", warning["warning"]))
    lines.append("+" + "-" * 27 + "+" + "-" * 48 + "+")
    return "".join(line + "\n" for line in lines)

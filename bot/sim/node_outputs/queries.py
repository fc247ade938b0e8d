"""`nvidia-smi --query-gpu` and `--query-compute-apps`: the CSV nvidia-smi prints.

Fields are checked against the ones the real tool knows (with its aliases), the header
carries units unless `nounits`, and a renamed field keeps its new name in the header. A
busy GPU runs warm, full and drawing power; an idle one reports the Idle clock reason.
"""

from __future__ import annotations

import hashlib

from bot.sim.hardware import IDLE_TEMPERATURE, Gpu, Machine
from bot.sim.node_outputs import gpus
from bot.sim.node_outputs.answers import Answer
from bot.sim.node_outputs.gpus import DRIVER, HOT_C, Obj

BUSY_WARMER_C = 28
UNITS = {"utilization": "%", "memory": "MiB", "power": "W", "clocks": "MHz"}
# Aliases nvidia-smi accepts, and the name its header prints for a renamed field.
ALIASES = {"gpu_name": "name", "gpu_uuid": "uuid", "gpu_bus_id": "pci.bus_id"}
HEADER_NAMES = {
    "clocks_throttle_reasons.active": "clocks_event_reasons.active",
    "used_memory": "used_gpu_memory",
}
GPU_FIELDS = frozenset(
    {
        "index", "count", "name", "uuid", "serial", "pci.bus_id", "driver_version", "pstate",
        "persistence_mode", "temperature.gpu", "utilization.gpu", "utilization.memory",
        "memory.total", "memory.used", "memory.free", "power.draw", "power.limit",
        "ecc.errors.uncorrected.aggregate.total", "ecc.errors.uncorrected.volatile.total",
        "ecc.errors.corrected.aggregate.total", "ecc.errors.corrected.volatile.total",
        "retired_pages.pending", "remapped_rows.pending", "remapped_rows.failure",
        "clocks_event_reasons.active", "clocks_throttle_reasons.active",
    }
)  # fmt: skip
APP_FIELDS = frozenset(
    {"gpu_uuid", "gpu_name", "gpu_bus_id", "gpu_serial", "pid", "process_name", "name",
     "used_memory", "used_gpu_memory"}
)  # fmt: skip


def query_gpu(machine: Machine, users: dict[int, Obj], opts: dict[str, str | None]) -> Answer:
    fields, bad = _fields(opts["--query-gpu"], GPU_FIELDS)
    shown = gpus.present(machine, opts.get("--id"))
    if bad is None and not shown:
        return Answer("No devices were found\n", exit_code=6)
    rows = []
    for gpu in shown:
        values = _gpu_values(machine, gpu, busy=gpu.index in users)
        rows.append([values.get(ALIASES.get(f, f), "") for f in fields])
    return _csv(fields, rows, opts.get("--format"), bad)


def query_apps(machine: Machine, users: dict[int, Obj], opts: dict[str, str | None]) -> Answer:
    fields, bad = _fields(opts["--query-compute-apps"], APP_FIELDS)
    rows = []
    for gpu in gpus.present(machine, opts.get("--id")):
        if gpu.index in users:
            values = _app_values(machine, gpu, users[gpu.index])
            rows.append([values[f] for f in fields] if bad is None else [])
    return _csv(fields, rows, opts.get("--format"), bad)


def _fields(raw: str | None, known: frozenset[str]) -> tuple[list[str], str | None]:
    fields = [f.strip() for f in (raw or "").split(",") if f.strip()]
    return fields, next((f for f in fields if f not in known and ALIASES.get(f) not in known), None)


def _csv(fields: list[str], rows: list[list[str]], fmt: str | None, bad: str | None) -> Answer:
    if bad is not None:
        return Answer(f'Field "{bad}" is not a valid field to query.\n\n', exit_code=2)
    flags = {f.strip() for f in (fmt or "").split(",")}
    if "csv" not in flags:
        return Answer(
            "Invalid combination of input arguments. Please run 'nvidia-smi -h' for help.\n",
            exit_code=2,
        )
    units = [_unit(f) for f in fields]
    lines = (
        []
        if "noheader" in flags
        else [", ".join(_header(f, u) for f, u in zip(fields, units, strict=True))]
    )
    for row in rows:
        cells = [
            cell if "nounits" in flags or not unit or cell.startswith("[") else f"{cell} {unit}"
            for cell, unit in zip(row, units, strict=True)
        ]
        lines.append(", ".join(cells))
    return Answer("".join(line + "\n" for line in lines))


def _unit(field: str) -> str | None:
    field = HEADER_NAMES.get(field, field)
    if field == "used_gpu_memory":
        return "MiB"
    return UNITS.get(field.split(".", 1)[0]) if "." in field else None


def _header(field: str, unit: str | None) -> str:
    name = HEADER_NAMES.get(field, field)
    return f"{name} [{unit}]" if unit else name


def _gpu_values(machine: Machine, gpu: Gpu, *, busy: bool) -> dict[str, str]:
    total, used = gpus.memory_total(machine), gpus.memory_used(machine)
    pending = gpu.ecc_uncorrected > 0 and gpu.resets == 0
    temperature = (
        max(gpu.temperature, IDLE_TEMPERATURE + BUSY_WARMER_C) if busy else gpu.temperature
    )
    reasons = _reasons(temperature, busy)
    return {
        "index": str(gpu.index),
        "count": str(len(gpus.present(machine))),
        "name": gpus.product(machine),
        "uuid": gpu.uuid,
        "serial": gpu.serial,
        "pci.bus_id": gpu.pci_bus_id,
        "driver_version": DRIVER,
        "pstate": "P0",
        "persistence_mode": "Enabled",
        "temperature.gpu": str(round(temperature)),
        "utilization.gpu": "97" if busy else "0",
        "utilization.memory": "61" if busy else "0",
        "memory.total": str(total),
        "memory.used": str(used if busy else 0),
        "memory.free": str(total - used if busy else total),
        "power.draw": "652.31" if busy else "71.48",
        "power.limit": "700.00",
        "ecc.errors.uncorrected.aggregate.total": str(gpu.ecc_uncorrected),
        "ecc.errors.uncorrected.volatile.total": str(gpu.ecc_uncorrected if pending else 0),
        "ecc.errors.corrected.aggregate.total": "0",
        "ecc.errors.corrected.volatile.total": "0",
        # Hopper remaps rows instead of retiring pages.
        "retired_pages.pending": "[N/A]",
        "remapped_rows.pending": "Yes" if pending else "No",
        "remapped_rows.failure": "No",
        "clocks_event_reasons.active": reasons,
        "clocks_throttle_reasons.active": reasons,
    }


def _reasons(temperature: float, busy: bool) -> str:
    bits = 0x0 if busy else 0x1  # Idle
    if temperature >= HOT_C:
        bits |= 0x20  # SW Thermal Slowdown
    if temperature >= HOT_C + 5:
        bits |= 0x40  # HW Thermal Slowdown
    return f"0x{bits:016x}"


def _app_values(machine: Machine, gpu: Gpu, pod: Obj) -> dict[str, str]:
    digest = hashlib.sha256(f"{pod['metadata']['uid']}/{gpu.index}".encode()).hexdigest()
    images = " ".join(c.get("image", "") for c in pod["spec"].get("containers") or [])
    process = (
        "/opt/tritonserver/bin/tritonserver" if "tritonserver" in images else "/usr/bin/python3"
    )
    used = str(gpus.memory_used(machine))
    return {
        "gpu_uuid": gpu.uuid,
        "gpu_name": gpus.product(machine),
        "gpu_bus_id": gpu.pci_bus_id,
        "gpu_serial": gpu.serial,
        "pid": str(1000 + int(digest[:6], 16) % 4_000_000),
        "process_name": process,
        "name": process,
        "used_memory": used,
        "used_gpu_memory": used,
    }

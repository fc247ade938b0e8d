"""Parsers for `nvidia-smi` output, as a node Job captures it: text in, typed models out.

Two shapes: `nvidia-smi --query-gpu=... --format=csv[,noheader][,nounits]`, mapped by the
header's column names (so any subset and order of fields works), and `nvidia-smi -q`, of
which only the fields the runbooks read are kept. Nothing here runs a command or reads a
file; malformed output raises `ValueError` naming the line.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError

# NVML's clocks event (throttle) reason bits, named as `nvidia-smi -q` prints them.
CLOCK_EVENT_BITS = {
    0x1: "Idle",
    0x2: "Applications Clocks Setting",
    0x4: "SW Power Cap",
    0x8: "HW Slowdown",
    0x10: "Sync Boost",
    0x20: "SW Thermal Slowdown",
    0x40: "HW Thermal Slowdown",
    0x80: "HW Power Brake Slowdown",
    0x100: "Display Clock Setting",
}
# Reasons that mean the clocks are low by choice, not because the GPU is in trouble.
BENIGN_REASONS = frozenset({"Idle", "Applications Clocks Setting", "Display Clock Setting"})

# --query-gpu field (header name without its unit) -> GpuQuery field. The driver prints
# clocks_throttle_reasons.active under its newer name, clocks_event_reasons.active.
COLUMNS = {
    "index": "index",
    "name": "name",
    "uuid": "uuid",
    "pci.bus_id": "bus_id",
    "temperature.gpu": "temperature_c",
    "utilization.gpu": "utilization_pct",
    "memory.used": "memory_used_mib",
    "memory.total": "memory_total_mib",
    "power.draw": "power_draw_w",
    "ecc.errors.uncorrected.aggregate.total": "ecc_uncorrected_total",
    "ecc.errors.corrected.aggregate.total": "ecc_corrected_total",
    "retired_pages.pending": "retired_pages_pending",
    "remapped_rows.pending": "remapped_rows_pending",
    "remapped_rows.failure": "remapped_rows_failure",
    "clocks_event_reasons.active": "clock_event_bits",
    "clocks_throttle_reasons.active": "clock_event_bits",
}
_HEADER = re.compile(r"^(?P<name>[^\[]+?)\s*(?:\[(?P<unit>[^\]]+)\])?$")


def _absent(value: str | None) -> str | None:
    """`[N/A]`, `[Not Supported]`, `[GPU requires reset]`, `N/A`: no value."""
    if value is None:
        return None
    text = value.strip()
    if not text or text == "N/A" or (text.startswith("[") and text.endswith("]")):
        return None
    return text


def _hex(value: Any) -> Any:
    return int(value, 0) if isinstance(value, str) else value


class _Parsed(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class GpuQuery(_Parsed):
    """One row of `--query-gpu` output; a field is None when not queried or not available."""

    index: int = Field(ge=0)
    name: str | None = None
    uuid: str | None = None
    bus_id: str | None = None
    temperature_c: int | None = None
    utilization_pct: int | None = None
    memory_used_mib: int | None = None
    memory_total_mib: int | None = None
    power_draw_w: float | None = None
    ecc_uncorrected_total: int | None = None
    ecc_corrected_total: int | None = None
    retired_pages_pending: bool | None = None
    remapped_rows_pending: bool | None = None
    remapped_rows_failure: bool | None = None
    clock_event_bits: Annotated[int | None, BeforeValidator(_hex)] = None
    other: dict[str, str | None] = Field(default_factory=dict, description="unmapped columns")

    @property
    def clock_event_reasons(self) -> list[str]:
        bits = self.clock_event_bits or 0
        return [name for bit, name in CLOCK_EVENT_BITS.items() if bits & bit]


class QueryGpuOutput(_Parsed):
    gpus: list[GpuQuery]
    messages: list[str] = Field(
        default_factory=list,
        description="lines that are not rows, e.g. 'Unable to determine the device handle'",
    )


def parse_query_gpu(text: str, *, fields: Sequence[str] | None = None) -> QueryGpuOutput:
    """Parse `--query-gpu ... --format=csv`. With `noheader`, pass the queried `fields` in
    order (as given to --query-gpu); otherwise the first line is the header."""
    lines = [line for line in text.splitlines() if line.strip()]
    if fields is None:
        if not lines:
            raise ValueError("nvidia-smi --query-gpu output is empty (no header line)")
        header, lines = [c.strip() for c in lines[0].split(",")], lines[1:]
    else:
        header = list(fields)
    columns = [_column(name) for name in header]
    if "index" not in [name for name, _ in columns]:
        raise ValueError(f"nvidia-smi --query-gpu output has no index column: {header}")
    gpus: list[GpuQuery] = []
    messages: list[str] = []
    for number, line in enumerate(lines, start=1 if fields is not None else 2):
        cells = [c.strip() for c in line.split(",")]
        if len(cells) != len(columns):
            messages.append(line.strip())
            continue
        row: dict[str, Any] = {"other": {}}
        for (name, unit), cell in zip(columns, cells, strict=True):
            if unit and cell.endswith(f" {unit}"):
                cell = cell.removesuffix(f" {unit}")
            value = _absent(cell)
            if name in COLUMNS:
                row[COLUMNS[name]] = value
            else:
                row["other"][name] = value
        try:
            gpus.append(GpuQuery.model_validate(row))
        except ValidationError as exc:
            raise ValueError(f"nvidia-smi --query-gpu line {number}: {_problems(exc)}") from exc
    return QueryGpuOutput(gpus=gpus, messages=messages)


def _column(header: str) -> tuple[str, str | None]:
    match = _HEADER.match(header.strip())
    if not match:
        raise ValueError(f"not a --query-gpu column name: {header!r}")
    return match["name"], match["unit"]


def missing_gpus(expected: int, parsed: QueryGpuOutput | Sequence[GpuQuery]) -> list[int]:
    """Indices in 0..expected-1 with no row: a GPU that fell off the bus is not listed.

    NVML numbers the GPUs it can see, so after a device leaves the PCI bus the survivors
    may be renumbered and the gap shows up at the end; the count is the reliable signal,
    and the bus ids (`GpuQuery.bus_id`) say which card it was.
    """
    gpus = parsed.gpus if isinstance(parsed, QueryGpuOutput) else parsed
    return sorted(set(range(expected)) - {gpu.index for gpu in gpus})


class GpuDetail(_Parsed):
    """The fields of one GPU's `nvidia-smi -q` section that runbooks read."""

    bus_id: str
    product_name: str | None = None
    uuid: str | None = None
    minor_number: int | None = None
    recovery_action: str | None = None
    pending_page_blacklist: bool | None = None
    remapped_rows_pending: bool | None = None
    remapped_rows_failure: bool | None = None
    remapped_rows_uncorrectable: int | None = None
    active_clock_event_reasons: list[str] = Field(default_factory=list)
    pending: dict[str, str | None] = Field(
        default_factory=dict, description="every '... Pending' line, as grep -i pending shows"
    )
    xid_lines: list[str] = Field(default_factory=list, description="lines mentioning XID")

    @property
    def slowdown_reasons(self) -> list[str]:
        """Active reasons other than idling or a clock setting: heat, power, hardware."""
        return [r for r in self.active_clock_event_reasons if r not in BENIGN_REASONS]


class QueryReport(_Parsed):
    driver_version: str | None = None
    cuda_version: str | None = None
    attached_gpus: int | None = None
    gpus: list[GpuDetail]


_GPU_SECTION = re.compile(r"^GPU (?P<bus>[0-9A-Fa-f]+:[0-9A-Fa-f]+:[0-9A-Fa-f]+\.[0-9A-Fa-f])\s*$")
_KEY_VALUE = re.compile(r"^(?P<key>.+?)\s*:(?:\s+(?P<value>.*))?$")
_REASON_SECTIONS = ("Clocks Event Reasons", "Clocks Throttle Reasons")
# Older drivers call the page blacklist "Pending Page Retirement".
_PAGE_PENDING = ("Pending Page Blacklist", "Pending Page Retirement")

Entry = tuple[tuple[str, ...], str | None]


def parse_query(text: str) -> QueryReport:
    """Parse `nvidia-smi -q` (also `-q -d PERFORMANCE` and other `-d` subsets)."""
    top: list[Entry] = []
    sections: list[tuple[str, list[Entry]]] = []
    for key, path, value in _walk(text):
        if path == () and key is None and value is not None:
            sections.append((value, []))  # a `GPU <bus id>` line opens a section
        elif key is not None:
            (sections[-1][1] if sections else top).append((path + (key,), value))
    facts = {path[-1]: value for path, value in top}
    gpus = [_gpu(bus, entries) for bus, entries in sections]
    try:
        return QueryReport.model_validate(
            {
                "driver_version": facts.get("Driver Version"),
                "cuda_version": facts.get("CUDA Version"),
                "attached_gpus": facts.get("Attached GPUs"),
                "gpus": gpus,
            }
        )
    except ValidationError as exc:
        raise ValueError(f"nvidia-smi -q header: {_problems(exc)}") from exc


def _walk(text: str) -> list[tuple[str | None, tuple[str, ...], str | None]]:
    """(key, enclosing sections, value) per line; a GPU header is (None, (), bus id)."""
    out: list[tuple[str | None, tuple[str, ...], str | None]] = []
    stack: list[tuple[int, str]] = []
    for raw in text.splitlines():
        line = raw.rstrip()
        if not line.strip() or line.startswith("="):
            continue
        gpu = _GPU_SECTION.match(line)
        if gpu:
            stack = []
            out.append((None, (), gpu["bus"]))
            continue
        indent = len(line) - len(line.lstrip())
        while stack and stack[-1][0] >= indent:
            stack.pop()
        pair = _KEY_VALUE.match(line.strip())
        if pair:
            out.append((pair["key"], tuple(name for _, name in stack), _absent(pair["value"])))
        else:
            stack.append((indent, line.strip()))
    return out


def _gpu(bus: str, entries: list[Entry]) -> GpuDetail:
    def first(section: str | None, *keys: str) -> str | None:
        for path, value in entries:
            if path[-1] in keys and (section is None or section in path[:-1]):
                return value
        return None

    lines = [f"{path[-1]}: {value or 'N/A'}" for path, value in entries]
    reasons = [
        path[-1]
        for path, value in entries
        if value == "Active" and any(s in path[:-1] for s in _REASON_SECTIONS)
    ]
    pending = {"/".join(p): v for p, v in entries if "pending" in p[-1].lower()}
    fields: dict[str, Any] = {
        "bus_id": first(None, "Bus Id") or bus,
        "product_name": first(None, "Product Name"),
        "uuid": first(None, "GPU UUID"),
        "minor_number": first(None, "Minor Number"),
        "recovery_action": first(None, "GPU Recovery Action"),
        "pending_page_blacklist": first("Retired Pages", *_PAGE_PENDING),
        "remapped_rows_pending": first("Remapped Rows", "Pending"),
        "remapped_rows_failure": first("Remapped Rows", "Remapping Failure Occurred"),
        "remapped_rows_uncorrectable": first("Remapped Rows", "Uncorrectable Error"),
        "active_clock_event_reasons": reasons,
        "pending": pending,
        "xid_lines": [line for line in lines if "xid" in line.lower()],
    }
    try:
        return GpuDetail.model_validate(fields)
    except ValidationError as exc:
        raise ValueError(f"nvidia-smi -q section for GPU {bus}: {_problems(exc)}") from exc


def _problems(exc: ValidationError) -> str:
    return "; ".join(f"{e['loc'][0]}: {e['msg']}" for e in exc.errors())

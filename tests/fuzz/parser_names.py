"""The parsers atheris fuzzes, by name: importable without side effects (the harness
re-imports the parsers' modules instrumented, which must never happen in the pytest
process, where the actions are registered once)."""

from __future__ import annotations

NAMES = (
    "ipmitool.power_state",
    "ipmitool.sel_entries",
    "ipmitool.readings",
    "ipmitool.mc_info",
    "ipmitool.failure",
    "nvidia_smi.parse_query_gpu",
    "nvidia_smi.parse_query",
    "nvidia_smi.parse_compute_apps",
    "dcgmi.parse",
    "ibstat.parse",
)

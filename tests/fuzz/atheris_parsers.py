"""The atheris harness for the parsers of node tool output (run by test_parsers_atheris.py
in a subprocess, one parser per process: libFuzzer runs once per process).

    python -m tests.fuzz.atheris_parsers PARSER [libFuzzer flags] CORPUS_DIR

Each parser takes the text a tool printed and returns typed facts, or raises `ValueError`
naming what it could not read (its documented error). Any other exception is a crash:
atheris prints it with the input and exits non-zero.
"""

from __future__ import annotations

import contextlib
import importlib
import sys
from collections.abc import Callable
from typing import Any

import atheris

# Import what the parsers stand on first, uninstrumented: instrumenting everything loaded
# (atheris.instrument_all) takes half a minute; only the parsers' own code needs coverage.
import bot.actions  # noqa: F401
from tests.fuzz.parser_names import NAMES

PARSER_MODULES = [
    "bot.actions.bmc.ipmitool",
    "bot.actions.gpu.dcgmi",
    "bot.actions.gpu.nvidia_smi",
    "bot.actions.gpu.reset",
    "bot.actions.infiniband.ibstat",
]
for name in PARSER_MODULES:
    sys.modules.pop(name, None)  # imported already: import again, instrumented
with atheris.instrument_imports(include=PARSER_MODULES):
    ipmitool, dcgmi, nvidia_smi, reset, ibstat = map(importlib.import_module, PARSER_MODULES)

PARSERS: dict[str, Callable[[str], Any]] = {
    "ipmitool.power_state": ipmitool.power_state,
    "ipmitool.sel_entries": ipmitool.sel_entries,
    "ipmitool.readings": ipmitool.readings,
    "ipmitool.mc_info": ipmitool.mc_info,
    "ipmitool.failure": ipmitool.failure,
    "nvidia_smi.parse_query_gpu": nvidia_smi.parse_query_gpu,
    "nvidia_smi.parse_query": nvidia_smi.parse_query,
    "nvidia_smi.parse_compute_apps": reset.parse_compute_apps,
    "dcgmi.parse": dcgmi.parse,
    "ibstat.parse": ibstat.parse,
}
"""Parser name -> the function; the fixtures that seed each are in test_parsers_atheris.py."""
assert tuple(PARSERS) == NAMES, "tests/fuzz/parser_names.py lists the parsers fuzzed"


def _crashes_on_boom(text: str) -> None:
    """A parser with a bug, so the test can show a crash is caught (a `KeyError`)."""
    if "boom" in text:
        raise KeyError(text)
    raise ValueError("not boom")


PROBES: dict[str, Callable[[str], Any]] = {"probe.crashes_on_boom": _crashes_on_boom}


def main(argv: list[str]) -> None:
    name, flags = argv[1], argv[2:]
    parse = {**PARSERS, **PROBES}[name]

    def one_input(data: bytes) -> None:
        with contextlib.suppress(ValueError):  # the parser's documented refusal
            parse(data.decode("utf-8", errors="replace"))

    atheris.Setup([argv[0], *flags], one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main(sys.argv)

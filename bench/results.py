"""The benchmarks' figures as JSON, one format for all: what `--json PATH` writes.

A benchmark builds one `Results`, adds a `metric` per figure it judges (value, unit, the
target it is judged against, or the peer it is compared with) and a `series` per
distribution worth drawing, then `write`s it. The verdict and the ratio are computed here
from the same comparison the script prints, so every file reads the same way:

    {"benchmark": "drain", "title": "...", "date": "2026-11-30T10:20:00+00:00",
     "machine": {"cores": 2, "python": "3.11.7", "platform": "...", "cpu": "..."},
     "parameters": {"pods": 110, ...},
     "metrics": [{"name": "drain time ratio", "backend": null, "value": 0.73, "unit": "x",
                  "target": {"op": "<=", "value": 1.0}, "peer": {"name": "kubectl drain",
                  "value": 56.6, "unit": "s"}, "ratio": 0.73, "verdict": "PASS"}, ...],
     "series": [{"name": "...", "backend": null, "unit": "s", "percentiles": [101 values]}]}

`ratio` is value / target for a target in the metric's own unit, value / peer for a metric
compared with a peer; `verdict` is PASS, MISS, or INFO for a figure without a target.
"""

from __future__ import annotations

import json
import math
import os
import platform
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

OPERATORS = {
    "<": lambda value, limit: value < limit,
    "<=": lambda value, limit: value <= limit,
    ">=": lambda value, limit: value >= limit,
    ">": lambda value, limit: value > limit,
}
VERDICTS = ("PASS", "MISS", "INFO")


def machine() -> dict[str, Any]:
    """The facts that make two runs comparable: cores, Python, the CPU model."""
    cpu = platform.processor() or platform.machine()
    try:
        info = Path("/proc/cpuinfo").read_text().splitlines()
        cpu = next(ln.split(":", 1)[1].strip() for ln in info if ln.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return {
        "cores": os.cpu_count() or 1,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpu": cpu,
    }


def percentiles(values: list[float]) -> list[float]:
    """p0, p1, ... p100 of `values` (nearest rank): a distribution in 101 numbers."""
    ordered = sorted(values)
    if not ordered:
        return []
    count = len(ordered)
    return [ordered[min(count - 1, max(0, math.ceil(q / 100 * count) - 1))] for q in range(101)]


def finite(value: float) -> float | None:
    """`value`, or None for NaN and infinity (which JSON cannot carry)."""
    value = float(value)
    return value if math.isfinite(value) else None


class Results:
    """One run's figures; `write` puts them in a file, `--json` style."""

    def __init__(self, benchmark: str, title: str, parameters: dict[str, Any]) -> None:
        self.benchmark = benchmark
        self.title = title
        self.parameters = dict(parameters)
        self.date = datetime.now(UTC).isoformat(timespec="seconds")
        self.metrics: list[dict[str, Any]] = []
        self.series: list[dict[str, Any]] = []

    def metric(
        self,
        name: str,
        value: float,
        unit: str,
        *,
        target: float | None = None,
        op: str = "<=",
        backend: str | None = None,
        peer: tuple[str, float, str] | None = None,
    ) -> str:
        """Record one figure; its verdict.

        With `peer` = (name, value, unit) the metric is compared with that peer: `ratio`
        is value / peer value, and a `target` (if any) limits the value itself (e.g.
        drain seconds ratio <= 1.0 is `value=ratio, unit="x", target=1.0`).
        """
        if op not in OPERATORS:
            raise ValueError(f"unknown comparison {op!r}: use one of {', '.join(OPERATORS)}")
        value = float(value)
        verdict = "INFO"
        if target is not None:
            verdict = "PASS" if OPERATORS[op](value, target) else "MISS"
        ratio: float | None = None
        if peer is not None and peer[1]:
            ratio = value / peer[1]
        elif target:
            ratio = value / target
        if ratio is not None and not math.isfinite(ratio):
            ratio = None
        self.metrics.append(
            {
                "name": name,
                "backend": backend,
                "value": finite(value),
                "unit": unit,
                "target": None if target is None else {"op": op, "value": float(target)},
                "peer": None
                if peer is None
                else {"name": peer[0], "value": finite(peer[1]), "unit": peer[2]},
                "ratio": ratio,
                "verdict": verdict,
            }
        )
        return verdict

    def distribution(
        self, name: str, values: list[float], unit: str, *, backend: str | None = None
    ) -> None:
        """Record a distribution (as 101 percentiles) for the charts."""
        self.series.append(
            {
                "name": name,
                "backend": backend,
                "unit": unit,
                "count": len(values),
                "percentiles": percentiles(values),
            }
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "benchmark": self.benchmark,
            "title": self.title,
            "date": self.date,
            "machine": machine(),
            "parameters": self.parameters,
            "metrics": self.metrics,
            "series": self.series,
        }

    def write(self, path: str | Path | None) -> None:
        """Write the JSON file (its folder created); nothing when `path` is None."""
        if path is not None:
            write_json(path, self.as_dict())


def write_json(path: str | Path, data: dict[str, Any]) -> None:
    """`data` as indented JSON in `path` (its folder created); NaN refused, not written."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(data, indent=2, allow_nan=False) + "\n")


def read_json(path: str | Path) -> dict[str, Any]:
    """A JSON object from `path` (summary.json, or a results file unchecked)."""
    data = json.loads(Path(path).read_text())
    if not isinstance(data, dict):
        raise ValueError(f"{path}: a JSON object is expected")
    return data


def load(path: str | Path) -> dict[str, Any]:
    """Read one results file, refusing one that is not in this format (says which key)."""
    data = read_json(path)
    for key in ("benchmark", "date", "machine", "parameters", "metrics"):
        if key not in data:
            raise ValueError(f"{path}: not a results file: no {key!r}; rerun bench/run_all.py")
    for metric in data["metrics"]:
        if metric.get("verdict") not in VERDICTS:
            raise ValueError(f"{path}: metric {metric.get('name')!r} has no valid verdict")
    return data


def add_option(parser: Any) -> None:
    """The `--json PATH` option every benchmark takes."""
    parser.add_argument(
        "--json", metavar="PATH", default=None, help="also write the figures to PATH as JSON"
    )


if __name__ == "__main__":  # pragma: no cover - a module, not a script
    sys.exit("bench/results.py is a helper; run bench/run_all.py")

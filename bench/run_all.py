"""Run every benchmark, collect its figures, judge them, draw the charts.

Each benchmark runs as a subprocess of this one with `--json`, one after the other (they
would otherwise compete for the same cores): `bench/<script>.py ... --json
<results>/<name>.json`, its printed report saved beside it as `<name>.txt`. Its peak RSS is
the `ru_maxrss` that `os.wait4` returns for it: the largest resident set of the benchmark
process and of every descendant it waited for (the `runbook-bot serve` and `worker`
processes, Alertmanager, kubectl, ipmitool), i.e. the biggest single process of the run,
not a sum. The ingest benchmark also reports `serve`'s own VmHWM.

    .venv/bin/python bench/run_all.py             # the documented sizes (~20 min)
    .venv/bin/python bench/run_all.py --quick     # small sizes, a smoke run (~4 min)
    .venv/bin/python bench/run_all.py --only drain --only bmc

Writes `<results>/<name>.json` and `<results>/summary.json`, prints one table of every
judged figure against its target (or its ratio to the peer it is compared with), draws the
charts (bench/charts.py; needs `pip install -e '.[bench]'`) and, for a full run into
bench/results, regenerates the summary in docs/performance.md (bench/report.py). Exit 1
when a benchmark MISSes a target or fails; 2 on bad usage. `--quick` writes to
bench/results/quick so that a smoke run never replaces the real figures.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench import report  # noqa: E402
from bench import results as results_file  # noqa: E402

PYTHON = sys.executable


@dataclass(frozen=True)
class Benchmark:
    name: str
    script: str
    full: tuple[str, ...]
    quick: tuple[str, ...]
    budget: float
    """Seconds a full run may take before it is stopped (a quick run gets a third)."""


BENCHMARKS = (
    Benchmark("ingest", "ingest.py", (), ("--seconds", "3", "--batches", "300"), 600),
    Benchmark("ingest_sqlite", "ingest_sqlite.py", (), ("--seconds", "3", "--batches", "300"), 300),
    # The webhook against a bare endpoint, 1,000-node payloads; storm reads its ratio.
    Benchmark("ingest_peer", "ingest.py", ("--peer",), ("--peer", "--seconds", "3"), 300),
    Benchmark("storm", "storm.py", (), ("--small",), 600),
    Benchmark(
        "alert_to_card", "alert_to_card.py", (), ("--incidents", "15", "--interval", "1.2"), 1500
    ),
    Benchmark("drain", "drain.py", (), ("--pods", "30", "--under-pdb", "4"), 900),
    Benchmark("bmc", "bmc.py", (), ("--calls", "5"), 300),
    Benchmark(
        "timers", "timers.py", (), ("--timers", "400", "--workers", "2", "--window", "5"), 900
    ),
    Benchmark(
        "timers_burst",
        "timers.py",
        ("--burst",),
        ("--burst", "--timers", "400", "--workers", "2"),
        900,
    ),
    Benchmark("postmortem", "postmortem.py", (), ("--entries", "500", "--runs", "3"), 600),
    Benchmark(
        "console", "console.py", (), ("--entries", "500", "--incidents", "50", "--runs", "3"), 900
    ),
    Benchmark("card", "card.py", (), ("--runs", "20"), 300),
)
NAMES = tuple(b.name for b in BENCHMARKS)


@dataclass(frozen=True)
class Outcome:
    name: str
    command: list[str]
    exit_code: int
    seconds: float
    peak_rss_kib: int
    timed_out: bool
    load: tuple[float, float] = (0.0, 0.0)
    """The 1-minute load average when it started and when it ended: how busy the machine was."""


def run_one(bench: Benchmark, quick: bool, out: Path) -> Outcome:
    json_path, text_path = out / f"{bench.name}.json", out / f"{bench.name}.txt"
    json_path.unlink(missing_ok=True)
    args = bench.quick if quick else bench.full
    command = [PYTHON, str(ROOT / "bench" / bench.script), *args, "--json", str(json_path)]
    budget = bench.budget / 3 if quick else bench.budget
    started = time.monotonic()
    load_before = os.getloadavg()[0]
    timed_out = False
    with text_path.open("wb") as log:
        # A session of its own, so a benchmark that overruns is stopped with its servers.
        proc = subprocess.Popen(
            command, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() - started > budget:
                timed_out = True
                os.killpg(proc.pid, signal.SIGTERM)
                time.sleep(5)
                if os.wait4(proc.pid, os.WNOHANG)[0] == 0:
                    os.killpg(proc.pid, signal.SIGKILL)
                pid, status, usage = os.wait4(proc.pid, 0)
                break
            time.sleep(0.2)
        proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here, not by Popen
    return Outcome(
        bench.name,
        command,
        proc.returncode,
        time.monotonic() - started,
        usage.ru_maxrss,  # KiB on Linux
        timed_out,
        (load_before, os.getloadavg()[0]),
    )


def command_line(outcome: Outcome) -> str:
    """The command as any clone runs it from its root: the interpreter left out, paths inside
    the checkout relative to it (summary.json is committed: it names no one's folders)."""
    words = [Path(w) for w in outcome.command[1:]]
    return " ".join(
        str(w.relative_to(ROOT)) if w.is_absolute() and w.is_relative_to(ROOT) else str(w)
        for w in words
    )


def rows(outcomes: list[Outcome], out: Path) -> tuple[list[dict[str, Any]], list[str]]:
    """Every metric of every results file (plus each run's peak RSS); the problems met."""
    found: list[dict[str, Any]] = []
    problems: list[str] = []
    for outcome in outcomes:
        path = out / f"{outcome.name}.json"
        if outcome.timed_out:
            problems.append(f"{outcome.name}: stopped after {outcome.seconds:.0f} s")
        elif outcome.exit_code != 0:
            problems.append(
                f"{outcome.name}: exit {outcome.exit_code}, see {path.with_suffix('.txt')}"
            )
        if not path.exists():
            problems.append(f"{outcome.name}: wrote no {path.name}; see {path.with_suffix('.txt')}")
            continue
        try:
            data = results_file.load(path)
        except ValueError as exc:
            problems.append(str(exc))
            continue
        found += [{"benchmark": outcome.name, **metric} for metric in data["metrics"]]
    for outcome in outcomes:
        found.append(
            {
                "benchmark": outcome.name,
                "name": "peak RSS (largest process)",
                "backend": None,
                "value": outcome.peak_rss_kib / 1024,
                "unit": "MiB",
                "target": None,
                "peer": None,
                "ratio": None,
                "verdict": "INFO",
            }
        )
    return found, problems


def table(found: list[dict[str, Any]]) -> list[str]:
    header = ("benchmark", "backend", "figure", "value", "target / peer", "ratio", "verdict")
    lines = [header]
    for m in found:
        ratio = "" if m.get("ratio") is None else f"{m['ratio']:.2f}"
        lines.append(
            (
                m["benchmark"],
                m.get("backend") or "",
                m["name"],
                report.number(m["value"], m["unit"]),
                report.against(m),
                ratio,
                m["verdict"],
            )
        )
    widths = [min(48, max(len(row[i]) for row in lines)) for i in range(len(header))]
    return [
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in lines
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes: a smoke run")
    parser.add_argument("--only", action="append", choices=NAMES, help="run only these")
    parser.add_argument("--results", type=Path, help="folder for the JSON (bench/results)")
    parser.add_argument("--images", type=Path, help="folder for the charts (docs/images)")
    parser.add_argument("--no-charts", action="store_true", help="skip charts and docs")
    args = parser.parse_args()
    default_out = ROOT / "bench" / "results" / ("quick" if args.quick else "")
    out: Path = (args.results or default_out).resolve()
    images: Path = args.images or (out / "images" if args.quick else ROOT / "docs" / "images")
    out.mkdir(parents=True, exist_ok=True)
    chosen = [b for b in BENCHMARKS if not args.only or b.name in args.only]
    load_before = os.getloadavg()
    started = datetime.now(UTC)
    outcomes = []
    for bench in chosen:
        print(f"running {bench.name} ...", flush=True)
        outcome = run_one(bench, args.quick, out)
        print(
            f"  {bench.name}: exit {outcome.exit_code} in {outcome.seconds:.0f} s, "
            f"peak RSS {outcome.peak_rss_kib / 1024:.0f} MiB, load average "
            f"{outcome.load[0]:.1f} -> {outcome.load[1]:.1f}",
            flush=True,
        )
        outcomes.append(outcome)
    found, problems = rows(outcomes, out)
    summary = {
        "date": started.isoformat(timespec="seconds"),
        "mode": "quick" if args.quick else "full",
        "machine": results_file.machine(),
        "load_average": {"before": load_before, "after": os.getloadavg()},
        "peak_rss": "os.wait4 ru_maxrss of each benchmark's process tree (largest process)",
        "benchmarks": [
            {
                "name": o.name,
                "command": command_line(o),
                "exit_code": o.exit_code,
                "seconds": round(o.seconds, 1),
                "peak_rss_mib": round(o.peak_rss_kib / 1024, 1),
                "timed_out": o.timed_out,
                "load_average": [round(x, 2) for x in o.load],
            }
            for o in outcomes
        ],
        "metrics": found,
        "problems": problems,
    }
    results_file.write_json(out / "summary.json", summary)
    print()
    for line in table(found):
        print(line)
    missed = [m for m in found if m["verdict"] == "MISS"]
    print()
    print(f"{len(found)} figures: {len(missed)} MISS; load average {load_before[0]:.2f} before")
    for problem in problems:
        print(f"problem: {problem}")
    if not args.no_charts:
        from bench import charts  # matplotlib: the `bench` extra

        for path in charts.draw(out, images):
            print(f"chart: {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}")
        if not args.quick and args.results is None and args.only is None:
            report.update(out, ROOT / "docs" / "performance.md")
            print("docs/performance.md: summary regenerated")
    return 1 if missed or problems else 0


if __name__ == "__main__":
    sys.exit(main())

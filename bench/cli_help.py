"""CLI start-up benchmark: how long `runbook-bot --help` takes, against `python -c pass`.

Runs each command `--runs` times (10) as a fresh process, one after the other, and
reports the median and worst wall time of each: the interpreter's own start-up
(`python -c pass`), `runbook-bot --help`, and `runbook-bot config --reference` (a command
that loads the settings but no database, cluster or web library). `--help` loads only the
parser (bot/cli/__init__.py imports each command's module when that command runs), so its
median should stay within 0.3 s of the bare interpreter's; it took 0.8 s here (3 to 4 s
on a loaded machine) when every command's module was imported up front.

    .venv/bin/python bench/cli_help.py [--runs N]

PASS when `--help`'s median is within `TARGET` seconds of `python -c pass`'s, else MISS
(exit 1).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.results import Results, add_option  # noqa: E402

TARGET = 0.3
"""Seconds `runbook-bot --help` may add to the interpreter's start-up."""
TIMEOUT = 60.0
COMMANDS = {
    "python -c pass": [sys.executable, "-c", "pass"],
    "runbook-bot --help": [sys.executable, "-m", "bot.cli", "--help"],
    "runbook-bot config --reference": [sys.executable, "-m", "bot.cli", "config", "--reference"],
}


def timed(command: list[str], runs: int) -> list[float]:
    seconds = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run(command, cwd=ROOT, capture_output=True, check=True, timeout=TIMEOUT)
        seconds.append(time.perf_counter() - started)
    return seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=10)
    add_option(parser)
    args = parser.parse_args()
    results = Results("cli_help", "CLI start-up: runbook-bot --help", {"runs": args.runs})
    print(f"runbook-bot CLI start-up, {args.runs} runs each (median / worst)")
    medians = {}
    for name, command in COMMANDS.items():
        seconds = timed(command, args.runs)
        medians[name] = statistics.median(seconds)
        print(f"  {name:<32} {medians[name]:6.3f} s / {max(seconds):6.3f} s")
        results.distribution(name, seconds, "s")
    bare, helped = medians["python -c pass"], medians["runbook-bot --help"]
    verdict = results.metric("--help start-up over python -c pass", helped - bare, "s",
                             target=TARGET)  # fmt: skip
    results.metric("python -c pass", bare, "s")
    results.metric("config --reference", medians["runbook-bot config --reference"], "s")
    print(f"--help adds {helped - bare:.3f} s to the interpreter (target <= {TARGET} s): {verdict}")
    results.write(args.json)
    return 0 if verdict == "PASS" else 1


if __name__ == "__main__":
    sys.exit(main())

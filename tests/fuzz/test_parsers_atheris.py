"""atheris (libFuzzer for Python) on the parsers of ipmitool, nvidia-smi, dcgmi and ibstat
output, seeded with the real outputs recorded in tests/fixtures.

Each parser runs in its own process (tests/fuzz/atheris_parsers.py) for a bounded number
of runs and time, with a fixed seed; all run at once, so the whole test takes about
`FUZZ_SECONDS` (default 3) plus start-up. A parser may refuse input only with `ValueError`;
anything else is a crash, and the test fails with atheris's report of the input.
FUZZ_SECONDS=600 for a longer hunt than CI's.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fuzz.conftest import Tally
from tests.fuzz.parser_names import NAMES as PARSERS

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"
SECONDS = int(os.environ.get("FUZZ_SECONDS", "3"))
RUNS = int(os.environ.get("FUZZ_RUNS", "200000"))
SEEDS = {
    "ipmitool": [FIXTURES / "ipmitool"],
    "nvidia_smi": [FIXTURES / "nvidia-smi"],
    "dcgmi": [FIXTURES / "dcgmi"],
    "ibstat": [FIXTURES / "ibstat"],
}
"""Each tool's recorded outputs seed every parser of that tool."""


def _corpus(tool: str, target: Path) -> Path:
    target.mkdir(parents=True)
    for directory in SEEDS.get(tool, []):
        for path in sorted(directory.iterdir()):
            if path.is_file() and path.name != "README.md":
                shutil.copy(path, target / path.name)
    return target


def _start(name: str, corpus: Path, seconds: int, runs: int) -> subprocess.Popen[str]:
    command = [
        sys.executable,
        "-m",
        "tests.fuzz.atheris_parsers",
        name,
        "-seed=1",
        f"-runs={runs}",
        f"-max_total_time={seconds}",
        "-rss_limit_mb=1024",
        "-timeout=5",  # one input running longer than 5 s is a hang, a failure
        f"-artifact_prefix={corpus.parent}/{name}-",  # crash inputs land beside the corpus
        str(corpus),
    ]
    return subprocess.Popen(
        command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )


def _finish(process: subprocess.Popen[str], seconds: int) -> tuple[int, str]:
    try:
        output, _ = process.communicate(timeout=seconds + 60)
    except subprocess.TimeoutExpired:
        process.kill()
        output, _ = process.communicate()
        return -1, output + "\n(killed: the fuzzer did not stop at -max_total_time)"
    return process.returncode, output


@pytest.mark.timeout(SECONDS + 90)
def test_every_parser_returns_facts_or_a_value_error_for_any_input(
    tmp_path: Path, tally: Tally
) -> None:
    started = {
        name: _start(name, _corpus(name.split(".")[0], tmp_path / name), SECONDS, RUNS)
        for name in PARSERS
    }

    crashed = {}
    for name, process in started.items():
        code, output = _finish(process, SECONDS)  # they ran together: the first waits longest
        done = re.search(r"^Done (\d+) runs", output, re.MULTILINE)
        if code != 0 or done is None:
            crashed[name] = output[-3000:]
            continue
        tally.by_outcome[name] = int(done[1])
        tally.tried += int(done[1])

    assert crashed == {}, "\n\n".join(f"{name}:\n{text}" for name, text in crashed.items())
    assert set(tally.by_outcome) == set(PARSERS)


def test_a_crash_other_than_value_error_fails_with_the_exception(tmp_path: Path) -> None:
    corpus = tmp_path / "probe"
    corpus.mkdir()
    (corpus / "seed").write_text("a boom in the output\n")

    code, output = _finish(_start("probe.crashes_on_boom", corpus, 5, 1000), 5)

    assert code != 0
    assert "KeyError" in output and "Uncaught Python exception" in output, output[-2000:]

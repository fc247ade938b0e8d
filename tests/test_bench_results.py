"""The benchmarks' plumbing, not their figures: the JSON they write, the summary
docs/performance.md is generated from, the charts drawn from it. No timing is asserted:
benchmarks do not belong in the test suite, only what carries their results."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from bench import report, run_all
from bench import results as results_file
from bench.results import Results
from tests.support.ci import in_ci, skip_or_fail
from tests.support.databases import PG_ADMIN

ROOT = Path(__file__).resolve().parents[1]
PNG = b"\x89PNG\r\n\x1a\n"


def test_a_metric_is_judged_against_its_target() -> None:
    results = Results("demo", "Demo", {"size": 3})
    assert results.metric("p99", 80.0, "ms", target=100.0, op="<") == "PASS"
    assert results.metric("rate", 900.0, "alerts/s", target=1000.0, op=">=") == "MISS"
    assert results.metric("rss", 120.0, "MiB") == "INFO"
    assert results.metric("duplicates", 0, "timers", target=0) == "PASS"
    p99, rate, rss, duplicates = results.metrics
    assert p99["target"] == {"op": "<", "value": 100.0} and p99["ratio"] == pytest.approx(0.8)
    assert rate["ratio"] == pytest.approx(0.9) and rate["verdict"] == "MISS"
    assert rss["target"] is None and rss["ratio"] is None
    assert duplicates["ratio"] is None  # nothing to divide by


def test_a_metric_compared_with_a_peer_carries_the_ratio_to_it() -> None:
    results = Results("drain", "Drain", {})
    results.metric("k8s.drain time", 40.0, "s", peer=("kubectl drain", 50.0, "s"))
    (drain,) = results.metrics
    assert drain["peer"] == {"name": "kubectl drain", "value": 50.0, "unit": "s"}
    assert drain["ratio"] == pytest.approx(0.8) and drain["verdict"] == "INFO"


def test_a_figure_that_is_not_a_number_is_written_as_null(tmp_path: Path) -> None:
    results = Results("card", "Card", {})
    results.metric("p99", float("inf"), "ms", target=100.0, peer=("direct", float("nan"), "ms"))
    results.write(tmp_path / "card.json")
    (p99,) = json.loads((tmp_path / "card.json").read_text())["metrics"]
    assert p99["value"] is None and p99["peer"]["value"] is None and p99["ratio"] is None
    assert p99["verdict"] == "MISS"


def test_an_unknown_comparison_is_refused_naming_the_valid_ones() -> None:
    with pytest.raises(ValueError, match="unknown comparison '=<': use one of <, <="):
        Results("demo", "Demo", {}).metric("x", 1.0, "s", target=2.0, op="=<")


def test_the_file_has_the_machine_the_parameters_and_the_distributions(tmp_path: Path) -> None:
    results = Results("timers", "Timers", {"timers": 200, "burst": False})
    results.metric("lateness p99", 0.02, "s", target=2.0, op="<")
    results.distribution("timer lateness", [float(n) for n in range(200, 0, -1)], "s")
    path = tmp_path / "deep" / "timers.json"
    results.write(path)
    data = results_file.load(path)
    assert data["benchmark"] == "timers" and data["parameters"] == {"timers": 200, "burst": False}
    assert data["machine"]["cores"] == os.cpu_count()
    assert data["machine"]["python"] == sys.version.split()[0]
    assert data["date"].endswith("+00:00")
    (lateness,) = data["series"]
    assert lateness["count"] == 200 and len(lateness["percentiles"]) == 101
    assert lateness["percentiles"][0] == 1.0 and lateness["percentiles"][50] == 100.0
    assert lateness["percentiles"][99] == 198.0 and lateness["percentiles"][100] == 200.0


def test_a_file_in_another_format_is_refused_saying_what_is_missing(tmp_path: Path) -> None:
    path = tmp_path / "old.json"
    path.write_text(json.dumps({"benchmark": "x", "date": "d", "machine": {}, "metrics": []}))
    with pytest.raises(ValueError, match="no 'parameters'; rerun bench/run_all.py"):
        results_file.load(path)


def test_a_benchmark_writes_its_figures_with_json(tmp_path: Path) -> None:
    """The real postmortem benchmark at a tiny size, on SQLite and PostgreSQL."""
    database = f"runbook_bot_pm_{uuid.uuid4().hex[:8]}_bench"
    url = PG_ADMIN.rsplit("/", 1)[0].replace("postgresql://", "postgresql+psycopg://", 1)
    path = tmp_path / "postmortem.json"
    command = [sys.executable, "bench/postmortem.py", "--entries", "30", "--runs", "2"]
    command += ["--database-url", f"{url}/{database}", "--json", str(path)]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "draft" in done.stdout  # the printed report is still there
    data = results_file.load(path)
    assert data["parameters"] == {"entries": 30, "runs": 2}
    backends = {m["backend"] for m in data["metrics"]}
    assert backends == ({"sqlite", "postgresql"} if "skipped" not in done.stdout else {"sqlite"})
    if in_ci():
        assert "postgresql" in backends, "CI must run the PostgreSQL side too"
    worst = [m for m in data["metrics"] if m["name"] == "draft worst"]
    assert all(m["target"] == {"op": "<", "value": 1.0} for m in worst)
    assert all(m["verdict"] in ("PASS", "MISS") for m in worst)
    assert {s["count"] for s in data["series"]} == {2}


def fixture_results(folder: Path) -> None:
    """Results of every benchmark as run_all writes them, with made-up figures."""
    folder.mkdir(parents=True, exist_ok=True)
    values = [float(n) for n in range(1, 101)]
    ingest = Results("ingest", "Ingest", {"rate": 1000.0, "clients": 16})
    ingest.metric(
        "alerts/s back to back", 1234.0, "alerts/s", target=1000.0, op=">=", backend="postgresql"
    )
    ingest.metric("p99 at a steady rate", 120.0, "ms", target=100.0, op="<", backend="postgresql")
    ingest.distribution("steady latency", values, "ms", backend="postgresql")
    ingest.distribution("capacity latency", [v * 2 for v in values], "ms", backend="postgresql")
    ingest.metric("serve peak RSS (VmHWM)", 110.0, "MiB", backend="postgresql")
    card = Results("alert_to_card", "Card", {"incidents": 500, "interval": 1.2})
    card.distribution("Alertmanager direct Slack post", values, "ms")
    card.distribution("runbook-bot card", [v + 30 for v in values], "ms")
    card.distribution("overhead card - direct", [30.0] * 100, "ms")
    card.metric("card p99", 129.0, "ms", peer=("Alertmanager direct p99", 99.0, "ms"))
    card.metric("p99 overhead card - direct", 30.0, "ms", target=100.0)
    drain = Results("drain", "Drain", {"pods": 110, "under_pdb": 20, "timeout": 300.0})
    drain.metric("k8s.drain time", 41.6, "s", peer=("kubectl drain", 56.6, "s"))
    drain.metric("drain time ratio ours/kubectl", 41.6 / 56.6, "x", target=1.0)
    bmc = Results("bmc", "BMC", {"calls": 30})
    bmc.metric("IPMI power status, ours (median)", 0.031, "s", peer=("bare ipmitool", 0.03, "s"))
    bmc.metric("IPMI overhead ratio ours/bare", 1.03, "x", target=1.1)
    for name in ("bmc.power_off", "bmc.power_on", "bmc.power_cycle"):
        bmc.metric(f"{name} confirmation lag", 0.4, "s", target=1.5)
    spread = Results("timers", "Timers", {"timers": 10000, "workers": 3, "window": 30.0})
    spread.distribution("timer lateness", [v / 1000 for v in values], "s")
    spread.metric("lateness p99", 0.099, "s", target=2.0, op="<")
    spread.metric("lateness max", 0.1, "s", target=5.0, op="<")
    spread.metric("duplicate or lost timers", 0, "timers", target=0)
    burst = Results("timers", "Timers (burst)", {"timers": 10000, "workers": 3, "window": 30.0})
    burst.distribution("timer lateness", [v / 20 for v in values], "s")
    burst.metric("timers fired per second", 1938.0, "1/s")
    postmortem = Results("postmortem", "Postmortem", {"entries": 5000, "runs": 10})
    console = Results("console", "Console", {"entries": 5000, "incidents": 1000, "runs": 10})
    for backend in ("sqlite", "postgresql"):
        postmortem.metric("draft worst", 0.24, "s", target=1.0, op="<", backend=backend)
        console.metric(
            "incident page (5000 entries): worst", 0.033, "s", target=0.3, op="<", backend=backend
        )
        console.metric(
            "new log entry on the open page: worst", 0.47, "s", target=1.0, op="<", backend=backend
        )
    files = {
        "ingest": ingest,
        "alert_to_card": card,
        "drain": drain,
        "bmc": bmc,
        "timers": spread,
        "timers_burst": burst,
        "postmortem": postmortem,
        "console": console,
    }
    for name, results in files.items():
        results.date = "2026-11-30T10:00:00+00:00"
        results.write(folder / f"{name}.json")
    outcomes = [
        run_all.Outcome(name, ["python", f"bench/{name}.py"], 0, 60.0, 150 * 1024, False)
        for name in files
    ]
    found, problems = run_all.rows(outcomes, folder)
    summary = {
        "date": "2026-11-30T10:00:00+00:00",
        "mode": "full",
        "machine": {"cores": 2, "python": "3.11.7", "platform": "Linux", "cpu": "Xeon"},
        "load_average": {"before": [1.5, 1.0, 0.5], "after": [1.0, 1.0, 1.0]},
        "peak_rss": "os.wait4 ru_maxrss",
        "benchmarks": [
            {
                "name": n,
                "command": f"bench/{n}.py",
                "exit_code": 0,
                "seconds": 60.0,
                "peak_rss_mib": 150.0,
                "timed_out": False,
                "load_average": [1.5, 2.25],
            }
            for n in files
        ],
        "metrics": found,
        "problems": problems,
    }
    results_file.write_json(folder / "summary.json", summary)


def test_run_all_gathers_every_metric_and_each_runs_peak_rss(tmp_path: Path) -> None:
    fixture_results(tmp_path)
    summary = results_file.read_json(tmp_path / "summary.json")
    assert summary["problems"] == []
    missed = [(m["benchmark"], m["name"]) for m in summary["metrics"] if m["verdict"] == "MISS"]
    assert missed == [("ingest", "p99 at a steady rate")]
    rss = [m for m in summary["metrics"] if m["name"] == "peak RSS (largest process)"]
    assert len(rss) == 8 and {m["value"] for m in rss} == {150.0}
    lines = run_all.table(summary["metrics"])
    assert lines[0].split() == [
        "benchmark",
        "backend",
        "figure",
        "value",
        "target",
        "/",
        "peer",
        "ratio",
        "verdict",
    ]
    p99 = next(line for line in lines if "p99 at a steady rate" in line)
    assert "120 ms" in p99 and "< 100 ms" in p99 and "1.20" in p99 and p99.endswith("MISS")


def test_run_all_records_commands_relative_to_the_checkout() -> None:
    script, results = run_all.ROOT / "bench" / "drain.py", run_all.ROOT / "bench" / "results"
    command = [sys.executable, str(script), "--pods", "30", "--json", str(results / "d.json")]
    outcome = run_all.Outcome("drain", command, 0, 5.0, 1024, False)

    assert run_all.command_line(outcome) == "bench/drain.py --pods 30 --json bench/results/d.json"


def test_run_all_reports_a_benchmark_that_failed_or_wrote_nothing(tmp_path: Path) -> None:
    fixture_results(tmp_path)
    outcomes = [
        run_all.Outcome("drain", ["python", "bench/drain.py"], 1, 5.0, 1024, False),
        run_all.Outcome("ghost", ["python", "bench/ghost.py"], 0, 5.0, 1024, False),
        run_all.Outcome("bmc", ["python", "bench/bmc.py"], -15, 900.0, 1024, True),
    ]
    _, problems = run_all.rows(outcomes, tmp_path)
    assert problems[0].startswith("drain: exit 1, see ") and problems[0].endswith("drain.txt")
    assert problems[1].startswith("ghost: wrote no ghost.json; see ")
    assert problems[2] == "bmc: stopped after 900 s"


def doc_with_markers(path: Path) -> None:
    path.write_text(
        "# Performance\n\n## Summary\n\n<!-- results:start -->\nold figures\n"
        "<!-- results:end -->\n\n# Performance: drain\n\nHand-written detail.\n"
    )


def test_the_summary_is_regenerated_between_the_markers_only(tmp_path: Path) -> None:
    fixture_results(tmp_path / "results")
    doc = tmp_path / "performance.md"
    doc_with_markers(doc)
    report.update(tmp_path / "results", doc)
    first = doc.read_text()
    assert "old figures" not in first
    assert first.startswith("# Performance\n\n## Summary\n\n<!-- results:start -->\n")
    assert first.endswith("<!-- results:end -->\n\n# Performance: drain\n\nHand-written detail.\n")
    report.update(tmp_path / "results", doc)
    assert doc.read_text() == first  # the same files give the same text


def test_the_summary_has_every_judged_figure_the_charts_and_how_to_reproduce(
    tmp_path: Path,
) -> None:
    fixture_results(tmp_path)
    text = report.render(tmp_path)
    assert "2 cores (Xeon), Python 3.11.7; load average 1.50 when it started" in text
    assert "20 figures judged, 1 MISS" in text
    assert ".venv/bin/pip install -e '.[bench]' && .venv/bin/python bench/run_all.py" in text
    assert (
        "| ingest | p99 at a steady rate | PostgreSQL | 120 ms | < 100 ms | 1.20 | **MISS** |"
        in text
    )
    assert "| drain | k8s.drain time |  | 41.6 s | kubectl drain: 56.6 s | 0.73 | INFO |" in text
    assert "| drain | drain time ratio ours/kubectl |  | 0.73x | <= 1x | 0.73 | PASS |" in text
    assert "| console | incident page (5000 entries): worst | SQLite | 33 ms | < 300 ms |" in text
    assert "| timers | duplicate or lost timers |  | 0 timers | <= 0 timers |  | PASS |" in text
    assert "| bmc | `bench/bmc.py` | 0 | 60 s | 150 MiB | 1.5 -> 2.2 |" in text
    assert "serve peak RSS" not in text  # figures without target or peer stay in the JSON
    for name in ("overview", "ingest", "alert-to-card", "drain", "timers", "rss"):
        assert f"(images/perf-{name}.png)" in text


def test_a_doc_without_markers_gets_the_summary_on_top(tmp_path: Path) -> None:
    fixture_results(tmp_path / "results")
    doc = tmp_path / "performance.md"
    doc.write_text("# Performance: ingest\n\nDetail.\n")
    report.update(tmp_path / "results", doc)
    text = doc.read_text()
    assert text.startswith("# Performance\n\n## Summary\n\n<!-- results:start -->")
    assert text.endswith("<!-- results:end -->\n\n# Performance: ingest\n\nDetail.\n")


def test_a_doc_with_one_marker_is_left_alone_with_a_clear_error(tmp_path: Path) -> None:
    fixture_results(tmp_path / "results")
    doc = tmp_path / "performance.md"
    doc.write_text("<!-- results:start -->\nhalf\n")
    with pytest.raises(ValueError, match="only one of .* is there; restore the other"):
        report.update(tmp_path / "results", doc)
    assert doc.read_text() == "<!-- results:start -->\nhalf\n"


def charts_module() -> Any:
    try:
        from bench import charts
    except ImportError as exc:  # matplotlib is the `bench` extra
        skip_or_fail(str(exc), install="pip install -e '.[bench]'")
    return charts


def test_the_charts_are_drawn_from_the_results(tmp_path: Path) -> None:
    charts = charts_module()
    fixture_results(tmp_path / "results")
    written = charts.draw(tmp_path / "results", tmp_path / "images")
    names = sorted(path.name for path in written)
    assert names == sorted(
        f"perf-{n}.png"
        for n in (
            "ingest",
            "alert-to-card",
            "drain",
            "bmc",
            "timers",
            "postmortem",
            "console",
            "rss",
            "overview",
        )
    )
    for path in written:
        assert path.read_bytes().startswith(PNG) and path.stat().st_size > 5000


def test_only_the_charts_whose_results_are_there_are_drawn(tmp_path: Path) -> None:
    charts = charts_module()
    fixture_results(tmp_path / "all")
    (tmp_path / "some").mkdir()
    for name in ("drain.json", "timers_burst.json"):
        (tmp_path / "some" / name).write_bytes((tmp_path / "all" / name).read_bytes())
    written = charts.draw(tmp_path / "some", tmp_path / "images")
    assert sorted(path.name for path in written) == ["perf-drain.png", "perf-timers.png"]

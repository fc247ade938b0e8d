"""Charts of the benchmark results: bench/results/*.json -> docs/images/perf-*.png.

    .venv/bin/python bench/charts.py [--results bench/results] [--images docs/images]

One PNG per benchmark whose results file is there (a missing one is skipped, saying so),
plus an overview of every judged figure against its target and the peak RSS of each run
(from summary.json). matplotlib's Agg backend: no display needed. Needs the `bench` extra:
`.venv/bin/pip install -e '.[bench]'`.
"""

from __future__ import annotations

import argparse
import functools
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.axes import Axes  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench import results as results_file  # noqa: E402

OURS, PEER, LIMIT = "#1f6fb4", "#9a9a9a", "#c0392b"
PASS, MISS, INFO = "#2e8b57", "#c0392b", "#9a9a9a"
BACKENDS = {"sqlite": "SQLite", "postgresql": "PostgreSQL", None: ""}
plt.rcParams.update(
    {
        "figure.dpi": 110,
        "font.size": 10,
        "axes.spines.top": False,
        "axes.spines.right": False,
        "axes.grid": True,
        "grid.alpha": 0.3,
        "axes.titleweight": "bold",
    }
)

Data = dict[str, dict[str, Any]]


def metric(data: dict[str, Any], name: str, backend: str | None = None) -> dict[str, Any]:
    for m in data["metrics"]:
        if m["name"] == name and (backend is None or m["backend"] == backend):
            return dict(m)
    raise KeyError(f"{data['benchmark']}: no metric {name!r} ({backend or 'any backend'})")


def series(data: dict[str, Any], name: str, backend: str | None = None) -> dict[str, Any]:
    for s in data.get("series", []):
        if s["name"] == name and (backend is None or s["backend"] == backend):
            return dict(s)
    raise KeyError(f"{data['benchmark']}: no series {name!r}")


def colour(m: dict[str, Any]) -> str:
    return {"PASS": PASS, "MISS": MISS}.get(m["verdict"], INFO)


def label_bars(ax: Axes, bars: Any, texts: list[str], horizontal: bool = True) -> None:
    for bar, text in zip(bars, texts, strict=True):
        if horizontal:
            ax.annotate(text, (bar.get_width(), bar.get_y() + bar.get_height() / 2),
                        xytext=(4, 0), textcoords="offset points", va="center")  # fmt: skip
        else:
            ax.annotate(text, (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                        xytext=(0, 3), textcoords="offset points", ha="center")  # fmt: skip


def limit_line(ax: Axes, value: float, text: str, horizontal: bool = False) -> None:
    if horizontal:
        ax.axhline(value, color=LIMIT, linestyle="--", linewidth=1.2, label=text)
    else:
        ax.axvline(value, color=LIMIT, linestyle="--", linewidth=1.2, label=text)


def percentile_curve(ax: Axes, s: dict[str, Any], label: str, colour_: str) -> None:
    values = s["percentiles"]
    ax.plot(range(len(values)), values, color=colour_, linewidth=2, label=label)
    ax.set_xlabel("percentile")
    ax.set_xlim(0, 100)


def ingest(data: dict[str, Any]) -> Figure:
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.8), width_ratios=(2, 3))
    rate = metric(data, "alerts/s back to back")
    bars = left.bar(["back to back\n(capacity phase)"], [rate["value"]], color=colour(rate),
                    width=0.35)  # fmt: skip
    label_bars(left, bars, [f"{rate['value']:,.0f}/s  {rate['verdict']}"], horizontal=False)
    limit_line(left, rate["target"]["value"], "target >= 1,000 alerts/s", horizontal=True)
    left.set_ylabel("alerts/s")
    left.set_xlim(-0.8, 0.8)
    left.set_ylim(0, max(rate["value"], rate["target"]["value"]) * 1.3)
    left.set_title("Throughput (PostgreSQL)")
    left.legend(loc="lower right")
    p99 = metric(data, "p99 at a steady rate")
    steady = series(data, "steady latency")
    percentile_curve(right, steady, "steady phase, 1,000 alerts/s offered", OURS)
    capacity = series(data, "capacity latency")
    percentile_curve(right, capacity, "capacity phase (queueing, not judged)", PEER)
    limit_line(right, p99["target"]["value"], "p99 limit 100 ms", horizontal=True)
    right.plot([99], [p99["value"]], "o", color=colour(p99),
               label=f"steady p99 {p99['value']:.0f} ms  {p99['verdict']}")  # fmt: skip
    right.set_yscale("log")
    right.set_ylabel("request latency (ms, log)")
    right.set_title("Webhook latency by percentile")
    right.legend(loc="upper left", fontsize=8)
    return fig


def alert_to_card(data: dict[str, Any]) -> Figure:
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.8))
    direct = series(data, "Alertmanager direct Slack post")
    card = series(data, "runbook-bot card")
    percentile_curve(left, direct, "Alertmanager's own Slack post", PEER)
    percentile_curve(left, card, "runbook-bot's card", OURS)
    left.set_yscale("log")
    left.set_ylabel("ms after the alert reached Alertmanager (log)")
    left.set_title("Alert to Slack")
    left.legend(loc="upper left", fontsize=8)
    overhead = series(data, "overhead card - direct")
    p99 = metric(data, "p99 overhead card - direct")
    percentile_curve(right, overhead, "card - direct, per group", OURS)
    limit_line(right, p99["target"]["value"], "p99 limit 100 ms", horizontal=True)
    right.plot([99], [p99["value"]], "o", color=colour(p99),
               label=f"p99 {p99['value']:.1f} ms  {p99['verdict']}")  # fmt: skip
    right.set_yscale("log")
    right.set_ylabel("overhead (ms, log)")
    right.set_title("What the bot adds")
    right.legend(loc="upper left", fontsize=8)
    return fig


def drain(data: dict[str, Any]) -> Figure:
    fig, ax = plt.subplots(figsize=(8, 2.6))
    ours = metric(data, "k8s.drain time")
    ratio = metric(data, "drain time ratio ours/kubectl")
    bars = ax.barh(["kubectl drain", "k8s.drain"], [ours["peer"]["value"], ours["value"]],
                   color=[PEER, colour(ratio)], height=0.55)  # fmt: skip
    label_bars(ax, bars, [f"{ours['peer']['value']:.1f} s",
                          f"{ours['value']:.1f} s  (ratio {ratio['value']:.2f}, "
                          f"target <= 1.0: {ratio['verdict']})"])  # fmt: skip
    ax.set_xlabel("wall time to empty the node (s)")
    ax.set_xlim(0, max(ours["value"], ours["peer"]["value"]) * 1.7)
    params = data["parameters"]
    ax.set_title(f"Drain: {params['pods']} pods, {params['under_pdb']} under a PDB")
    return fig


def bmc(data: dict[str, Any]) -> Figure:
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.2))
    ours = metric(data, "IPMI power status, ours (median)")
    ratio = metric(data, "IPMI overhead ratio ours/bare")
    bars = left.barh(["bare ipmitool", "IpmiBmc"],
                     [ours["peer"]["value"] * 1000, ours["value"] * 1000],
                     color=[PEER, colour(ratio)], height=0.55)  # fmt: skip
    label_bars(left, bars, [f"{ours['peer']['value'] * 1000:.1f} ms",
                            f"{ours['value'] * 1000:.1f} ms ({ratio['value']:.2f}x)"])  # fmt: skip
    left.set_xlim(0, max(ours["value"], ours["peer"]["value"]) * 1000 * 1.6)
    left.set_xlabel("median power status call (ms)")
    left.set_title("IPMI overhead (target <= 1.10x)")
    lags = [m for m in data["metrics"] if m["name"].endswith("confirmation lag")]
    names = [m["name"].removesuffix(" confirmation lag") for m in lags]
    bars = right.barh(names, [m["value"] for m in lags], color=[colour(m) for m in lags],
                      height=0.55)  # fmt: skip
    label_bars(right, bars, [f"{m['value']:.2f} s" for m in lags])
    if lags:
        limit_line(right, lags[0]["target"]["value"], "limit 1.5 s")
    right.set_xlim(0, 2.0)
    right.set_xlabel("BMC switched -> action knew (s)")
    right.set_title("Power confirmation lag")
    right.legend(loc="lower right", fontsize=8)
    return fig


def timers(spread: dict[str, Any] | None, burst: dict[str, Any] | None) -> Figure:
    runs = [(name, d) for name, d in (("spread", spread), ("burst", burst)) if d is not None]
    fig, axes = plt.subplots(1, len(runs), figsize=(5 * len(runs), 3.6), squeeze=False)
    for ax, (name, data) in zip(axes[0], runs, strict=True):
        late = series(data, "timer lateness")
        params = data["parameters"]
        percentile_curve(ax, late, "lateness", OURS)
        if name == "spread":
            for which, text in (("lateness p99", "p99 limit 2 s"), ("lateness max", "max 5 s")):
                m = metric(data, which)
                limit_line(ax, m["target"]["value"], text, horizontal=True)
            p99 = metric(data, "lateness p99")
            ax.plot([99], [p99["value"]], "o", color=colour(p99),
                    label=f"p99 {p99['value']:.3f} s  {p99['verdict']}")  # fmt: skip
            ax.set_yscale("symlog", linthresh=0.001)
            ax.set_ylim(0, 10)
            title = f"{params['timers']:,} timers due over {params['window']:g} s"
        else:
            rate = metric(data, "timers fired per second")
            title = f"{params['timers']:,} due at once ({rate['value']:,.0f}/s; info)"
        ax.set_ylabel("fired_at - due_at (s)")
        ax.set_title(f"{title}, {params['workers']} workers", fontsize=10)
        ax.legend(loc="center left" if name == "spread" else "upper left", fontsize=8)
    return fig


def per_backend(data: dict[str, Any], names: list[tuple[str, str]], title: str) -> Figure:
    """Worst of N per request and backend, as a share of its target (1.0 = the target)."""
    backends = sorted({m["backend"] for m in data["metrics"]}, key=lambda b: b != "sqlite")
    fig, ax = plt.subplots(figsize=(9, 0.7 + 0.55 * len(names) * len(backends)))
    labels, values, colours, texts = [], [], [], []
    for name, label in reversed(names):
        for backend in reversed(backends):
            m = metric(data, name, backend)
            labels.append(f"{label} ({BACKENDS.get(backend, backend)})")
            values.append(m["ratio"] or 0.0)
            colours.append(colour(m))
            texts.append(
                f"{m['value'] * 1000:,.0f} ms of < {m['target']['value'] * 1000:,.0f} ms"
                f"  {m['verdict']}"
            )
    bars = ax.barh(labels, values, color=colours, height=0.6)
    label_bars(ax, bars, texts)
    limit_line(ax, 1.0, "the target")
    ax.set_xlim(0, max([1.0, *values]) * 1.6)
    ax.set_xlabel("worst of the runs, as a share of its target (lower is better)")
    ax.set_title(title)
    ax.legend(loc="lower right", fontsize=8)
    return fig


def postmortem(data: dict[str, Any]) -> Figure:
    return per_backend(data, [("draft worst", "draft")], "Postmortem draft, whole log")


def console(data: dict[str, Any]) -> Figure:
    names = [
        (m["name"], m["name"].removesuffix(": worst"))
        for m in data["metrics"]
        if m["name"].endswith(": worst") and m["backend"] == data["metrics"][0]["backend"]
    ]
    return per_backend(data, names, "Web console, worst request of each kind")


def rss(summary: dict[str, Any], ingest_data: dict[str, Any] | None) -> Figure:
    runs = [b for b in summary["benchmarks"] if b.get("peak_rss_mib")]
    labels = [b["name"] for b in runs]
    values = [b["peak_rss_mib"] for b in runs]
    if ingest_data is not None:
        labels.append("ingest: serve (VmHWM)")
        values.append(metric(ingest_data, "serve peak RSS (VmHWM)")["value"])
    fig, ax = plt.subplots(figsize=(8, 0.8 + 0.4 * len(labels)))
    colours = [OURS] * len(runs) + [PEER] * (len(labels) - len(runs))
    bars = ax.barh(labels[::-1], values[::-1], color=colours[::-1], height=0.6)
    label_bars(ax, bars, [f"{v:,.0f} MiB" for v in values[::-1]])
    ax.set_xlim(0, max(values, default=1) * 1.25)
    ax.set_xlabel("peak RSS of the largest process in the run (MiB)")
    ax.set_title("Peak memory per benchmark")
    return fig


def overview(summary: dict[str, Any]) -> Figure:
    """Every figure with a nonzero target, as the share of its limit it used."""
    judged = [m for m in summary["metrics"] if m.get("target") and m["target"]["value"]]
    judged = [m for m in judged if m["value"] is not None]
    labels, values, colours = [], [], []
    for m in reversed(judged):
        used = m["target"]["value"] / m["value"] if m["target"]["op"] in (">=", ">") else m["ratio"]
        backend = BACKENDS.get(m["backend"], m["backend"])
        labels.append(f"{m['benchmark']}: {m['name']}" + (f" ({backend})" if backend else ""))
        values.append(used or 0.0)
        colours.append(colour(m))
    fig, ax = plt.subplots(figsize=(9, 0.9 + 0.32 * len(labels)))
    bars = ax.barh(labels, values, color=colours, height=0.6)
    label_bars(ax, bars, [f"{v:.2f}" for v in values])
    limit_line(ax, 1.0, "the target")
    ax.set_xscale("log")
    ax.set_xlim(min([0.1, *[v for v in values if v > 0]]) / 2, max([1.0, *values]) * 3)
    ax.set_xlabel("share of the limit used, log scale (1.0 = the target; >= targets inverted)")
    ax.set_title("Every target, one run")
    ax.tick_params(axis="y", labelsize=8)
    ax.legend(loc="lower right", fontsize=8)
    return fig


def draw(results: Path, images: Path) -> list[Path]:
    """Draw every chart whose results are in `results`; the PNGs written."""
    loaded: Data = {}
    for path in sorted(results.glob("*.json")):
        data = results_file.load(path) if path.name != "summary.json" else None
        if data is not None:
            loaded[data["benchmark"] if path.stem != "timers_burst" else path.stem] = data
    summary_path = results / "summary.json"
    summary = results_file.read_json(summary_path) if summary_path.exists() else None
    makers: dict[str, Callable[[], Figure]] = {}
    one: tuple[tuple[str, Callable[[dict[str, Any]], Figure]], ...] = (
        ("ingest", ingest),
        ("alert-to-card", alert_to_card),
        ("drain", drain),
        ("bmc", bmc),
        ("postmortem", postmortem),
        ("console", console),
    )
    for name, draw_one in one:
        key = name.replace("-", "_")
        if key in loaded:
            makers[name] = functools.partial(draw_one, loaded[key])
    if "timers" in loaded or "timers_burst" in loaded:
        makers["timers"] = functools.partial(
            timers, loaded.get("timers"), loaded.get("timers_burst")
        )
    if summary is not None:
        makers["rss"] = functools.partial(rss, summary, loaded.get("ingest"))
        makers["overview"] = functools.partial(overview, summary)
    images.mkdir(parents=True, exist_ok=True)
    written = []
    for name, make in makers.items():
        fig = make()
        fig.tight_layout()
        path = images / f"perf-{name}.png"
        fig.savefig(path)
        plt.close(fig)
        written.append(path)
    return written


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--results", type=Path, default=ROOT / "bench" / "results")
    parser.add_argument("--images", type=Path, default=ROOT / "docs" / "images")
    args = parser.parse_args()
    if not args.results.is_dir():
        parser.error(f"{args.results} is not a folder: run bench/run_all.py first")
    written = draw(args.results, args.images)
    if not written:
        print(f"no results in {args.results}: run bench/run_all.py first", file=sys.stderr)
        return 1
    for path in written:
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())

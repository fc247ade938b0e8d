"""Alert storm benchmark: four failure domains fail within a minute; is it one incident each?

In one run, on PostgreSQL: the simulated cluster serves a fleet of 1,000 nodes with its
topology labels (`bot.sim.fleet`), the real Alertmanager (Debian's) routes as
deploy/alertmanager.yaml does (its routes and group_by; only group_wait is shortened, to
--group-wait, 1s) to `runbook-bot serve` (subprocess, its worker, Slack through the
in-process fake Slack at 1 message/s per channel, pages to a webhook target on the fake),
and within --within (60) seconds:

- a row of 32 nodes overheats (`storms.row_cooling`: 8 GPU alerts and one BMC alert a node),
- a leaf switch takes its 16 nodes off the fabric (`storms.leaf_down`: every HCA port),
- an NFS server fails for the 200 nodes that mount it (`storms.nfs_down`),
- 40 XIDs land on scattered nodes outside those domains (`storms.xid`, one each).

Each failure breaks the simulator too and its alerts are POSTed to Alertmanager as
Prometheus would. Measured, once every standing incident has its card and its page (or
--drain seconds passed): incidents per failure (target exactly 1 per domain and 40 for
the XIDs, each its own or merged), cards and pages per standing incident (one each), the
time from a domain's first alert to its card (p99 < 5 s), whether a critical card waited
behind a warning card or a card update (what the channel sent between the queueing of the
card and the card, none), serve's ingest (its /metrics; the ratio to a bare endpoint comes
from `bench/ingest.py --peer`, read from --peer-results) and serve's peak RSS (VmHWM,
< 300 MiB).

    .venv/bin/python bench/storm.py [--small] [--database-url URL] [--json PATH]

`--small`: a row of 8, a leaf of 4, an NFS server of 20 and 5 XIDs within 10 s on a
100-node fleet (the suite runs it: tests/test_bench_storm.py). Exit 1 on a setup failure
or an alert Alertmanager refused; 2 on bad arguments; a missed target is reported (MISS).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import random
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import httpx
import psycopg
import yaml
from sqlalchemy.engine import make_url

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the fakes live in tests/, which is not installed
from bench import scratch  # noqa: E402
from bench.alert_to_card import STOP_S, started, wait_ready  # noqa: E402
from bench.results import Results, add_option, read_json  # noqa: E402
from bot.sim import running, storms  # noqa: E402
from bot.sim.fleet import LEVELS, Fleet, fleet  # noqa: E402
from tests.support import fake_slack  # noqa: E402
from tests.support.alertmanager import BINARY, free_port  # noqa: E402

DEFAULT_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/runbook_bot_storm_bench"
DEPLOY = ROOT / "deploy" / "alertmanager.yaml"
PEER_RESULTS = ROOT / "bench" / "results" / "ingest_peer.json"
CHANNEL, SLACK_RATE, TOKEN = "C0STORM", 1.0, "storm-bench"
PAGES_PATH = "/services/T000/B000/PAGES"
TARGET_CARD_S, TARGET_RSS_MIB, TARGET_RATIO = 5.0, 300.0, 0.5
PUSH_TIMEOUT_S, QUIET_S, SEED = 5.0, 3.0, 20
BOT = str(Path(sys.executable).parent / "runbook-bot")
FAILURES = (RuntimeError, OSError, subprocess.SubprocessError, psycopg.Error, httpx.HTTPError)
KINDS = ("row", "leaf", "nfs", "xid")
KIND_OF = {
    "GPUTemperatureHigh": "row",
    "BMCTemperatureHigh": "row",
    "InfiniBandPortDown": "leaf",
    "SharedFilesystemUnreachable": "nfs",
    "GPUXIDError": "xid",
}
"""Which failure an incident is about: the alertname of its first alert."""


@dataclass(frozen=True)
class Size:
    nodes: int
    rack_size: int
    xids: int
    within: float
    drain: float

    def fleet(self) -> Fleet:
        # Rows of 4 racks, a leaf switch per 2 racks, 5 NFS servers: a row is 4 racks, a
        # leaf half a row, an NFS server a fifth of the fleet.
        return fleet(self.nodes, rack_size=self.rack_size, racks_per_row=4, racks_per_leaf=2)


FULL = Size(nodes=1000, rack_size=8, xids=40, within=60.0, drain=150.0)
SMALL = Size(nodes=100, rack_size=2, xids=5, within=10.0, drain=40.0)


@dataclass
class Failure:
    """One thing that breaks: when (seconds into the storm), and what it raised."""

    kind: str
    name: str
    at: float
    nodes: list[str]
    pushed: float = math.nan
    """When its alerts were POSTed to Alertmanager (this process's monotonic clock)."""
    alerts: int = 0


def plan(layout: Fleet, size: Size, rng: random.Random) -> list[Failure]:
    """Row a overheats at once, a leaf of row c goes at a quarter of the window, the last
    NFS server at half of it, and the XIDs are spread over the whole window, each on a
    node of none of those domains."""
    row = "a"
    third_row = layout.rows["c"][0]
    leaf = next(name for name, nodes in layout.leaves.items() if third_row in nodes)
    server = list(layout.nfs)[-1]
    broken = set(layout.rows[row]) | set(layout.leaves[leaf]) | set(layout.nfs[server])
    spare = [node for node in layout.nodes if node not in broken]
    xids = rng.sample(spare, size.xids)
    failures = [
        Failure("row", row, 0.0, layout.rows[row]),
        Failure("leaf", leaf, size.within * 0.25, layout.leaves[leaf]),
        Failure("nfs", server, size.within * 0.5, layout.nfs[server]),
    ]
    step = size.within / size.xids
    failures += [Failure("xid", node, step * (i + 0.5), [node]) for i, node in enumerate(xids)]
    return sorted(failures, key=lambda f: f.at)


def raise_alerts(failure: Failure, layout: Fleet, sim: Any) -> list[dict[str, Any]]:
    """Break the simulator as the failure does; the alerts Prometheus would send."""
    events: dict[str, Callable[[], list[dict[str, Any]]]] = {
        "row": lambda: storms.row_cooling(layout, failure.name, sim=sim),
        "leaf": lambda: storms.leaf_down(layout, failure.name, sim=sim),
        "nfs": lambda: storms.nfs_down(layout, failure.name, sim=sim),
        "xid": lambda: storms.xid(layout, failure.name, 79, sim=sim),
    }
    return events[failure.kind]()


def storm(am_url: str, failures: list[Failure], layout: Fleet, sim: Any) -> float:
    """Push every failure's alerts on schedule; the storm's start (monotonic)."""
    start = time.monotonic()
    for failure in failures:
        time.sleep(max(0.0, start + failure.at - time.monotonic()))
        alerts = raise_alerts(failure, layout, sim)
        failure.pushed, failure.alerts = time.monotonic(), len(alerts)
        storms.push(am_url, alerts, PUSH_TIMEOUT_S)
    return start


def am_config(webhook: str, token_file: Path, group_wait: str) -> dict[str, Any]:
    """deploy/alertmanager.yaml pointed at this run's bot, its group_wait shortened."""
    config: dict[str, Any] = yaml.safe_load(DEPLOY.read_text())
    route = next(r for r in config["route"]["routes"] if r["receiver"] == "runbook-bot")
    route["group_wait"] = group_wait
    for receiver in config["receivers"]:
        for hook in receiver.get("webhook_configs", []):
            hook["url"] = webhook
            hook["http_config"] = {"authorization": {"credentials_file": str(token_file)}}
    return config


def alertmanager(
    workdir: Path, webhook: str, group_wait: str, log: IO[bytes]
) -> tuple[str, contextlib.AbstractContextManager[None]]:
    token = workdir / "token"
    token.write_text(TOKEN)
    config = workdir / "alertmanager.yml"
    config.write_text(yaml.safe_dump(am_config(webhook, token, group_wait), sort_keys=False))
    url = f"http://127.0.0.1:{free_port()}"
    cmd = [str(BINARY), f"--config.file={config}", f"--storage.path={workdir / 'data'}"]
    cmd += [f"--web.listen-address={url[7:]}", f"--web.external-url={url}"]
    cmd += ["--cluster.listen-address=", "--log.level=warn"]
    return url, started(cmd, f"{url}/-/ready", "Alertmanager", log)


@dataclass
class Incident:
    number: int
    kind: str
    severity: str
    opened_wall: float
    merged_into: int | None
    nodes: set[str]
    queued_wall: float | None = None
    """When its first card was queued in the outbox (None: never): from then on, whatever
    the channel sends before the card went ahead of it."""


INCIDENTS = """SELECT i.number, i.severity, extract(epoch FROM i.opened_at), {merged},
    (SELECT a.alertname FROM alerts a WHERE a.incident_number = i.number ORDER BY a.id LIMIT 1),
    (SELECT array_agg(DISTINCT coalesce(a.labels ->> 'Hostname', a.labels ->> 'node'))
     FROM alerts a WHERE a.incident_number = i.number),
    (SELECT extract(epoch FROM min(o.created_at)) FROM chat_outbox o
     WHERE o.incident_number = i.number AND o.kind = 'card')
FROM incidents i ORDER BY i.number"""


def incidents(url: str) -> list[Incident]:
    target = make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)
    with psycopg.connect(target, connect_timeout=5) as conn:
        has_merged = conn.execute(
            "SELECT 1 FROM information_schema.columns "
            "WHERE table_name = 'incidents' AND column_name = 'merged_into'"
        ).fetchone()
        query = INCIDENTS.format(merged="i.merged_into" if has_merged else "NULL::integer")
        rows = conn.execute(query).fetchall()
    return [
        Incident(
            n,
            KIND_OF.get(name or "", "other"),
            sev,
            float(at),
            merged,
            set(nodes or []),
            float(queued) if queued is not None else None,
        )
        for n, sev, at, merged, name, nodes, queued in rows
    ]


@dataclass
class Observed:
    """What the fake Slack saw: the bot's cards, its paced calls in order, the pages."""

    cards: dict[int, list[fake_slack.Call]] = field(default_factory=dict)
    paced: list[fake_slack.Call] = field(default_factory=list)
    pages: Counter[int] = field(default_factory=Counter)


def observe(fake: fake_slack.FakeSlack) -> Observed:
    seen = Observed()
    for call in fake.calls():
        if call.status != 200 or call.params.get("channel") != CHANNEL:
            continue
        if call.method in fake_slack.PACED_METHODS:
            seen.paced.append(call)
        if call.method == "chat.postMessage" and not call.params.get("thread_ts"):
            payload = (call.params.get("metadata") or {}).get("event_payload") or {}
            if "incident" in payload:
                seen.cards.setdefault(int(payload["incident"]), []).append(call)
    for post in fake.incoming():
        if post.path.endswith(PAGES_PATH.rsplit("/", 1)[1]) and post.body.get("event") == "trigger":
            seen.pages[int(post.body["number"])] += 1
    seen.paced.sort(key=lambda call: call.monotonic)
    return seen


def settle(url: str, fake: fake_slack.FakeSlack, failures: list[Failure], seconds: float) -> None:
    """Wait until every failure has an incident and every standing incident its card and
    its page, and that held for QUIET_S (no new incident, card or page); at most `seconds`.
    Card updates and thread posts may go on: the figures are about cards and pages."""
    deadline, state, since = time.monotonic() + seconds, None, time.monotonic()
    while time.monotonic() < deadline:
        found = incidents(url)
        standing = [i for i in found if i.merged_into is None]
        seen = observe(fake)
        covered = all(any(i.nodes & set(f.nodes) for i in found) for f in failures)
        whole = covered and all(i.number in seen.cards and seen.pages[i.number] for i in standing)
        now = (len(found), sum(map(len, seen.cards.values())), sum(seen.pages.values()))
        if now != state:
            state, since = now, time.monotonic()
        elif whole and time.monotonic() - since >= QUIET_S:
            return
        time.sleep(0.5)


@dataclass
class Measured:
    failures: list[Failure]
    start: float
    incidents: list[Incident]
    seen: Observed
    hwm_kib: int
    metrics: dict[str, float]
    settled_s: float
    """From the storm's start until everything had its card and page (`settle`)."""


def scrape(text: str) -> dict[str, float]:
    """The ingest figures of serve's /metrics: POSTs, seconds in ingest, alerts by outcome."""
    found: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("#") or " " not in line:
            continue
        name, value = line.rsplit(" ", 1)
        if name.endswith(("ingest_seconds_count", "ingest_seconds_sum")) or (
            "alerts_ingested_total{" in name
        ):
            found[name.split("runbook_bot_")[-1]] = float(value)
    return found


def measure(args: argparse.Namespace, env: dict[str, str], log: IO[bytes]) -> Measured:
    size = SMALL if args.small else FULL
    layout = size.fleet()
    failures = plan(layout, size, random.Random(SEED))
    upgrade = subprocess.run([BOT, "db", "upgrade"], env=env, capture_output=True, timeout=60)
    if upgrade.returncode != 0:
        raise RuntimeError(f"runbook-bot db upgrade failed: {upgrade.stderr.decode().strip()}")
    with (
        running(layout.scenario) as sim,
        fake_slack.running() as fake,
        tempfile.TemporaryDirectory() as tmp,
    ):
        workdir = Path(tmp)
        fake.rate_limit(CHANNEL, SLACK_RATE, burst=3)
        pager = {"kind": "webhook", "url": fake.url + PAGES_PATH}
        levels = [{"after": "0m", "notify": ["target:pager"]}]
        escalation = {"targets": {"pager": pager}, "policies": {
            "critical": {"levels": levels, "repeat": 0},
            "warning": {"levels": levels, "repeat": 0, "working_hours_only": False},
        }}  # fmt: skip
        env |= {
            "RUNBOOK_BOT_SLACK_API_URL": fake.api_url,
            "RUNBOOK_BOT_KUBECONFIG": str(sim.write_kubeconfig(workdir / "kubeconfig")),
            "RUNBOOK_BOT_TOPOLOGY": json.dumps({"levels": LEVELS}),
            "RUNBOOK_BOT_ESCALATION": json.dumps(escalation),
        }
        port = free_port()
        webhook = f"http://127.0.0.1:{port}/webhooks/alertmanager"
        am_url, am = alertmanager(workdir, webhook, args.group_wait, log)
        with serving(port, env, log) as server, am:
            start = storm(am_url, failures, layout, sim)
            settle(args.database_url, fake, failures, size.drain)
            settled_s = time.monotonic() - start
            status = Path(f"/proc/{server.pid}/status").read_text().splitlines()
            hwm = int(next(ln.split()[1] for ln in status if ln.startswith("VmHWM")))
            metrics = scrape(httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text)
            seen = observe(fake)
    found = incidents(args.database_url)
    return Measured(failures, start, found, seen, hwm, metrics, settled_s)


@contextlib.contextmanager
def serving(port: int, env: dict[str, str], log: IO[bytes]) -> Iterator[subprocess.Popen[bytes]]:
    """`runbook-bot serve` (with its worker) on `port` until the block ends, once ready."""
    cmd = [BOT, "serve", "--host", "127.0.0.1", "--port", str(port)]
    process = subprocess.Popen(
        cmd, env=env, cwd=ROOT, stdin=subprocess.DEVNULL, stdout=log, stderr=log
    )
    try:
        wait_ready(f"http://127.0.0.1:{port}/readyz", process, "runbook-bot serve")
        yield process
    finally:
        process.terminate()
        try:
            process.wait(timeout=STOP_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=STOP_S)


def percentile(values: list[float], q: float) -> float:
    """Nearest rank; NaN for no values."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)] if ordered else math.nan


@dataclass
class Verdicts:
    """The figures the report prints and records, computed once."""

    by_kind: dict[str, list[Incident]]
    standing: list[Incident]
    cards: Counter[int]
    pages: Counter[int]
    domain_card_s: dict[str, float]
    xid_card_s: list[float]
    waited: list[tuple[int, list[str]]]
    """Critical cards sent after a warning card or a card update that the channel sent
    after the card was queued: (incident, what went first)."""
    domain_cards: dict[str, int] = field(default_factory=dict)
    """Cards and pages of every incident of a domain, merged ones too: what the channel and
    the on-call person got for it (target 1)."""
    domain_pages: dict[str, int] = field(default_factory=dict)


def judge(result: Measured) -> Verdicts:
    by_kind: dict[str, list[Incident]] = {kind: [] for kind in (*KINDS, "other")}
    for incident in result.incidents:
        by_kind[incident.kind].append(incident)
    standing = [i for i in result.incidents if i.merged_into is None]
    seen = result.seen
    cards = Counter({i.number: len(seen.cards.get(i.number, [])) for i in standing})
    pages = Counter({i.number: seen.pages[i.number] for i in standing})
    first_card = {n: min(c.monotonic for c in calls) for n, calls in seen.cards.items()}
    domain_card_s: dict[str, float] = {}
    domain_cards: dict[str, int] = {}
    domain_pages: dict[str, int] = {}
    xid_card_s: list[float] = []
    for failure in result.failures:
        mine = [
            i
            for i in by_kind[failure.kind]
            if i.merged_into is None and i.nodes & set(failure.nodes)
        ]
        arrived = [first_card[i.number] for i in mine if i.number in first_card]
        took = min(arrived) - failure.pushed if arrived else math.inf
        if failure.kind == "xid":
            xid_card_s.append(took)
            continue
        domain_card_s[failure.kind] = took
        every = [i.number for i in by_kind[failure.kind] if i.nodes & set(failure.nodes)]
        domain_cards[failure.kind] = sum(len(seen.cards.get(n, [])) for n in every)
        domain_pages[failure.kind] = sum(seen.pages[n] for n in every)
    severity = {i.number: i.severity for i in result.incidents}
    # A call in flight when the card was queued did not go ahead of it: the sender picks
    # the most urgent row at each send, so what counts is what it sent after the queueing.
    queued = {i.number: i.queued_wall or i.opened_wall for i in result.incidents}
    card_of = {id(call): n for n, calls in seen.cards.items() for call in calls}
    waited: list[tuple[int, list[str]]] = []
    for number, calls in seen.cards.items():
        if severity.get(number) != "critical":
            continue
        card = min(calls, key=lambda c: c.monotonic)
        ahead = []
        for call in seen.paced:
            if call.monotonic >= card.monotonic:
                break
            if call.wall < queued.get(number, math.inf):
                continue
            other = card_of.get(id(call))
            if call.method == "chat.update":
                ahead.append("an update")
            elif other is not None and severity.get(other) != "critical":
                ahead.append(f"the {severity.get(other)} card of INC-{other}")
        if ahead:
            waited.append((number, ahead))
    return Verdicts(
        by_kind,
        standing,
        cards,
        pages,
        domain_card_s,
        xid_card_s,
        waited,
        domain_cards,
        domain_pages,
    )


def peer_results(args: argparse.Namespace) -> Path:
    """--peer-results; by default ingest_peer.json beside --json (bench/run_all.py runs
    `ingest.py --peer` into the same folder just before), else in bench/results."""
    if args.peer_results is not None:
        return Path(args.peer_results)
    return Path(args.json).with_name("ingest_peer.json") if args.json else PEER_RESULTS


def peer_ratio(path: Path) -> tuple[float, float, float] | None:
    """(ratio, serve alerts/s, bare alerts/s) from `bench/ingest.py --peer`'s results."""
    try:
        metrics = {m["name"]: m for m in read_json(path)["metrics"]}
        figure = metrics["webhook alerts/s, 1,000-node payloads"]
        return float(figure["ratio"]), float(figure["value"]), float(figure["peer"]["value"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def verdict(met: bool) -> str:
    return "PASS" if met else "MISS"


def report(args: argparse.Namespace, result: Measured) -> int:
    size = SMALL if args.small else FULL
    found = judge(result)
    standing = {k: sum(i.merged_into is None for i in found.by_kind[k]) for k in KINDS}
    merged = {kind: len(found.by_kind[kind]) - standing[kind] for kind in KINDS}
    # A domain is one incident; an XID is its own incident or merged into another.
    extra = sum(abs(standing[k] - 1) for k in ("row", "leaf", "nfs"))
    extra += abs(len(found.by_kind["xid"]) - size.xids) + len(found.by_kind["other"])
    no_card = [i.number for i in found.standing if not found.cards[i.number]]
    no_page = [i.number for i in found.standing if not found.pages[i.number]]
    most_cards = max(found.cards.values(), default=0)
    most_pages = max(found.pages.values(), default=0)
    card_p99 = percentile(list(found.domain_card_s.values()), 0.99)
    rss = result.hwm_kib / 1024
    posts = result.metrics.get("ingest_seconds_count", 0.0)
    in_ingest = result.metrics.get("ingest_seconds_sum", 0.0) / max(posts, 1.0) * 1000
    alerts = sum(v for k, v in result.metrics.items() if "alerts_ingested_total" in k)
    peer = peer_ratio(peer_results(args))
    domains = {f.kind: f for f in result.failures if f.kind != "xid"}
    pushed = sum(f.alerts for f in result.failures)
    row, leaf, nfs = (domains[k] for k in ("row", "leaf", "nfs"))
    counted = ", ".join(
        f"{k} {standing[k]}" + (f" (+{merged[k]} merged)" if merged[k] else "") for k in KINDS
    )
    if found.by_kind["other"]:
        counted += f", other {len(found.by_kind['other'])}"
    latencies = ", ".join(f"{k} {v:.1f}" for k, v in found.domain_card_s.items())
    xid_p50, xid_p99 = (percentile(found.xid_card_s, q) for q in (0.5, 0.99))
    if peer is None:
        versus = f"not measured: run bench/ingest.py --peer --json {peer_results(args)}"
    else:
        versus = (
            f"webhook {peer[1]:,.0f} / bare endpoint {peer[2]:,.0f} alerts/s = {peer[0]:.2f} "
            f"(>= {TARGET_RATIO})  {verdict(peer[0] >= TARGET_RATIO)}  (bench/ingest.py --peer)"
        )
    per_domain = ", ".join(
        f"{k} {found.domain_cards[k]} / {found.domain_pages[k]}" for k in found.domain_cards
    )
    one_each = set(found.domain_cards.values()) | set(found.domain_pages.values()) == {1}
    channel = Counter(
        "thread" if c.params.get("thread_ts") else "update" if c.method == "chat.update" else "card"
        for c in result.seen.paced
    )
    lines = [
        ("machine", f"{os.cpu_count()} cores, shared by all processes"),
        ("setup", f"sim fleet of {size.nodes} nodes -> Alertmanager (deploy/alertmanager.yaml "
         f"routes, group_wait {args.group_wait}) -> serve -> PostgreSQL; Slack {SLACK_RATE:g} "
         "msg/s"),
        ("storm", f"within {size.within:g} s: row {row.name} ({len(row.nodes)} nodes, "
         f"{row.alerts} alerts), {leaf.name} ({len(leaf.nodes)} nodes, {leaf.alerts} alerts), "
         f"{nfs.name.split('.')[0]} ({len(nfs.nodes)} nodes, {nfs.alerts} alerts), "
         f"{size.xids} XIDs; {pushed:,} alerts"),
        ("settled", f"{result.settled_s:.1f} s after the first alert (at most "
         f"{size.within + size.drain:g})"),
        ("incidents", f"{counted}; target 1, 1, 1, {size.xids}  {verdict(extra == 0)}"),
        ("cards", f"{sum(found.cards.values())} for {len(found.standing)} standing incidents, "
         f"at most {most_cards} for one, {len(no_card)} without  "
         f"{verdict(not no_card and most_cards <= 1)}"),
        ("pages", f"{sum(found.pages.values())}, at most {most_pages} for one, {len(no_page)} "
         f"without  {verdict(not no_page and most_pages <= 1)}"),
        ("per domain", f"cards / pages of all its incidents, merged ones too: {per_domain}  "
         f"{verdict(one_each)}"),
        ("to card s", f"a domain's first alert POSTed -> its card: {latencies}; p99 "
         f"{card_p99:.1f} (< {TARGET_CARD_S:g})  {verdict(card_p99 < TARGET_CARD_S)}"),
        ("  XIDs", f"alert -> card p50 {xid_p50:.1f}  p99 {xid_p99:.1f} s"),
        ("channel", f"{channel['card']} cards, {channel['update']} updates, "
         f"{channel['thread']} thread posts sent by the bot"),
        ("card order", f"{len(found.waited)} critical cards waited behind a warning card or an "
         f"update  {verdict(not found.waited)}"),
        *[("", f"INC-{n}: behind {', '.join(ahead[:3])}") for n, ahead in found.waited[:5]],
        ("ingest", f"{posts:.0f} notifications, {alerts:.0f} alerts, {in_ingest:.1f} ms mean "
         "in ingest (/metrics)"),
        ("vs bare", versus),
        ("serve RSS", f"{rss:.0f} MiB peak (VmHWM; < {TARGET_RSS_MIB:g})  "
         f"{verdict(rss < TARGET_RSS_MIB)}"),
    ]  # fmt: skip
    print("runbook-bot alert storm benchmark" + (" (--small)" if args.small else ""))
    for name, text in lines:
        print(f"  {name:<12} {text}")
    write_json(args, result, found, standing, extra, card_p99, peer)
    return 0


def write_json(
    args: argparse.Namespace,
    result: Measured,
    found: Verdicts,
    counts: dict[str, int],
    extra: int,
    card_p99: float,
    peer: tuple[float, float, float] | None,
) -> None:
    size = SMALL if args.small else FULL
    parameters = {"small": args.small, "nodes": size.nodes, "xids": size.xids,
                  "within": size.within, "group_wait": args.group_wait}  # fmt: skip
    results = Results("storm", "Alert storm: four failure domains in a minute", parameters)
    for kind in KINDS:
        results.metric(f"{kind} incidents standing", counts[kind], "incidents")
    results.metric("xid incidents", len(found.by_kind["xid"]), "incidents")
    results.metric("incidents off target", extra, "incidents", target=0)
    results.metric("standing incidents", len(found.standing), "incidents")
    no_card = sum(1 for n in found.cards if not found.cards[n])
    no_page = sum(1 for n in found.pages if not found.pages[n])
    results.metric("cards", sum(found.cards.values()), "cards")
    results.metric("most cards for one incident", max(found.cards.values(), default=0), "cards",
                   target=1)  # fmt: skip
    results.metric("incidents without a card", no_card, "incidents", target=0)
    results.metric("most cards for one failure domain", max(found.domain_cards.values()),
                   "cards", target=1)  # fmt: skip
    results.metric("most pages for one failure domain", max(found.domain_pages.values()),
                   "pages", target=1)  # fmt: skip
    results.metric("pages", sum(found.pages.values()), "pages")
    results.metric("most pages for one incident", max(found.pages.values(), default=0), "pages",
                   target=1)  # fmt: skip
    results.metric("incidents without a page", no_page, "incidents", target=0)
    results.metric("first alert of a domain to its card p99", card_p99, "s",
                   target=TARGET_CARD_S, op="<")  # fmt: skip
    results.metric("critical cards behind a warning card or update", len(found.waited), "cards",
                   target=0)  # fmt: skip
    results.metric("serve peak RSS (VmHWM)", result.hwm_kib / 1024, "MiB",
                   target=TARGET_RSS_MIB, op="<")  # fmt: skip
    if peer is not None:
        results.metric("webhook / bare endpoint (ingest --peer)", peer[0], "x",
                       target=TARGET_RATIO, op=">=")  # fmt: skip
    results.distribution("XID alert to card", [s * 1000 for s in found.xid_card_s], "ms")
    results.write(args.json)


def run(args: argparse.Namespace) -> int:
    url: str = args.database_url
    if scratch.refused(url):
        return 2
    env = {**os.environ, "RUNBOOK_BOT_DATABASE_URL": url, "RUNBOOK_BOT_LOG_LEVEL": "warning"}
    env |= {"RUNBOOK_BOT_WEBHOOK_TOKEN": TOKEN, "RUNBOOK_BOT_SLACK_CHANNEL": CHANNEL}
    env |= {"RUNBOOK_BOT_SLACK_BOT_TOKEN": fake_slack.BOT_TOKEN, "RUNBOOK_BOT_SLACK_MODE": "http"}
    env |= {"RUNBOOK_BOT_SLACK_SIGNING_SECRET": "bench", "RUNBOOK_BOT_SLACK_RATE": str(SLACK_RATE)}
    result = scratch.measured([url], lambda log: measure(args, env, log), FAILURES, label="log")
    return 1 if result is None else report(args, result)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database-url", default=DEFAULT_URL, help=f"default {DEFAULT_URL}")
    parser.add_argument("--small", action="store_true", help="the suite's size (< 60 s)")
    parser.add_argument("--group-wait", default="1s", help="Alertmanager's group_wait (1s)")
    parser.add_argument(
        "--peer-results",
        default=None,
        help="bench/ingest.py --peer's JSON, for the ratio to a bare endpoint (default: "
        "ingest_peer.json beside --json, else bench/results/ingest_peer.json)",
    )
    add_option(parser)
    args = parser.parse_args()
    try:
        return run(args)
    except KeyboardInterrupt:
        print("interrupted; processes stopped and database dropped", file=sys.stderr)
        return 130


if __name__ == "__main__":
    raise SystemExit(main())

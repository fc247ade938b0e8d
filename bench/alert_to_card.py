"""Alert-to-card benchmark: how much later than Alertmanager's own Slack post the card lands.

One real Alertmanager (Debian's 0.25) routes every group to one receiver with two
integrations: a webhook to `runbook-bot serve` (PostgreSQL, its worker process sending the
Slack outbox) and Alertmanager's own `slack_configs`, the path a user would otherwise take.
Both post to one in-process fake Slack (tests/support/fake_slack.py) that stamps every
arrival on this process's monotonic clock. One receiver, not two routes, so both
integrations fire from the same flush of the same aggregation group: they start together
and the difference is the bot's alone (ingest, commit, wake-up, outbox, Web API call).

N groups (distinct Hostname, GPUXIDError xid 79, DCGM-style labels, one alert each) are
POSTed to /api/v2/alerts, one every --interval s: the bot posts at most `slack_rate` (1)
messages a second per channel by design, and the fake answers faster ones with 429 as
Slack does. Each group's direct post is matched by its title (the Hostname); its card is
the first chat.postMessage outside a thread whose blocks name the Hostname.

The runbook the alert matches (runbooks/gpu-xid.yaml) runs steps that log to the incident,
so the channel also carries card updates and thread posts, which share its 1 message/s.
A card may therefore wait for the channel's next slot: the report splits each card's
overhead into that wait (previous bot call in the channel + 1/slack_rate, after the direct
post) and the rest, and shows the channel's load: near slack_rate, cards queue. Avoid an
--interval near 5 s: uvicorn (the fake's, serve's) closes idle keep-alive connections after
5 s, Alertmanager may reuse one as it closes, and retries ~0.5 s later (`retried` counts it).

    .venv/bin/python bench/alert_to_card.py [--incidents 500] [--interval 1.2] [--database-url URL]

Exit 1 on a missing card, a refused alert or a setup failure; 2 on bad arguments. Target:
p99 of (card arrival - direct arrival) <= 100 ms; a miss is reported (MISS), not an error.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import IO, Any

import httpx
import psycopg
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the fakes live in tests/, which is not installed
from bench import scratch  # noqa: E402
from bench.results import Results, add_option  # noqa: E402
from tests.support import fake_slack  # noqa: E402
from tests.support.alertmanager import BINARY, free_port, sample  # noqa: E402

DEFAULT_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/runbook_bot_alert_to_card_bench"
TARGET_P99_MS = 100.0
CHANNEL, SLACK_RATE = "C0BENCH", 1.0
HOOK_PATH = "/services/T000/B000/XXXX"
TOKEN = "alert-to-card-bench"
HOST = re.compile(r"gpu-bench-\d{4}")
READY_S, DRAIN_S, STOP_S = 30.0, 60.0, 10.0
QUIET_S = 3.0
BOT = str(Path(sys.executable).parent / "runbook-bot")
FAILURES = (RuntimeError, OSError, subprocess.SubprocessError, psycopg.Error, httpx.HTTPError)


@dataclass
class Group:
    """One alert group: when its alert was POSTed and when each path reached the fake."""

    node: int
    posted: float = math.nan
    direct: float = math.nan
    card: float = math.nan
    slot: float = -math.inf
    """When the channel was next free for the bot (last bot call before the card + 1/rate)."""
    behind: str = ""
    """What that last call was: a card, an update or a thread post."""

    @property
    def host(self) -> str:
        return f"gpu-bench-{self.node:04d}"


def alert(group: Group) -> dict[str, Any]:
    """One XID 79 on GPU 0 of the group's node, labelled as dcgm-exporter labels it."""
    now, node, host = datetime.now(UTC), group.node, group.host
    labels = {"alertname": "GPUXIDError", "Hostname": host, "job": "dcgm", "gpu": "0"}
    labels |= {"UUID": f"GPU-{node:08x}-0000-0000-0000-000000000000", "device": "nvidia0"}
    labels |= {"instance": f"10.{node // 250}.{node % 250}.1:9400", "xid": "79"}
    labels |= {"modelName": "NVIDIA H200", "pci_bus_id": "00000000:18:00.0"}
    return {
        "labels": labels | {"severity": "critical"},
        "annotations": {"summary": f"{host} GPU 0 XID 79"},
        "startsAt": now.isoformat(),
        # Past the run, so Alertmanager's resolve_timeout never resolves it mid-run.
        "endsAt": (now + timedelta(hours=2)).isoformat(),
        "generatorURL": "http://prometheus:9090/graph?g0.expr=DCGM_EXP_XID_ERRORS_COUNT",
    }


def am_config(webhook: str, slack_hook: str) -> dict[str, Any]:
    """Every group notified once, at once, to the bot and to Slack directly."""
    direct = {
        "api_url": slack_hook,
        "channel": "#bench",
        "send_resolved": False,
        "title": "{{ .GroupLabels.Hostname }}",
        "text": "{{ .GroupLabels.alertname }} on {{ .GroupLabels.Hostname }}",
    }
    bot = {"url": webhook, "http_config": {"authorization": {"credentials": TOKEN}}}
    route = {"receiver": "both", "group_by": ["alertname", "Hostname"], "group_wait": "0s"}
    route |= {"group_interval": "1h", "repeat_interval": "4h"}
    receiver = {"name": "both", "webhook_configs": [bot], "slack_configs": [direct]}
    return {"route": route, "receivers": [receiver]}


def wait_ready(url: str, process: subprocess.Popen[bytes], what: str) -> None:
    deadline = time.monotonic() + READY_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{what} exited with code {process.returncode} before ready")
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(url, timeout=2.0).status_code == 200:
                return
        time.sleep(0.1)
    raise RuntimeError(f"{what} not ready within {READY_S:.0f} s")


@contextlib.contextmanager
def started(cmd: list[str], ready: str, what: str, log: IO[bytes], **kw: Any) -> Iterator[None]:
    """Run `cmd` until the block ends; ready when GET `ready` answers 200."""
    process = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=log, **kw)
    try:
        wait_ready(ready, process, what)
        yield
    finally:
        process.terminate()
        try:
            process.wait(timeout=STOP_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=STOP_S)


def alertmanager(
    workdir: Path, webhook: str, slack_hook: str, log: IO[bytes]
) -> tuple[str, contextlib.AbstractContextManager[None]]:
    config = workdir / "alertmanager.yml"
    config.write_text(yaml.safe_dump(am_config(webhook, slack_hook), sort_keys=False))
    url = f"http://127.0.0.1:{free_port()}"
    cmd = [str(BINARY), f"--config.file={config}", f"--storage.path={workdir / 'data'}"]
    cmd += [f"--web.listen-address={url[7:]}", f"--web.external-url={url}"]
    cmd += ["--cluster.listen-address=", "--log.level=warn"]
    return url, started(cmd, f"{url}/-/ready", "Alertmanager", log)


def fire(am_url: str, groups: list[Group], interval: float) -> None:
    """POST one new group every `interval` s, on a fixed schedule (no drift)."""
    start = time.monotonic()
    with httpx.Client(timeout=5.0) as http:
        for i, group in enumerate(groups):
            time.sleep(max(0.0, start + i * interval - time.monotonic()))
            body = [alert(group)]
            group.posted = time.monotonic()
            answer = http.post(f"{am_url}/api/v2/alerts", json=body)
            if answer.status_code != 200:
                raise RuntimeError(f"Alertmanager refused {group.host}: {answer.text[:300]}")


def cards(fake: fake_slack.FakeSlack) -> dict[str, float]:
    """Hostname -> arrival of its card (the first top-level post naming it)."""
    found: dict[str, float] = {}
    for call in fake.calls("chat.postMessage"):
        if call.status != 200 or call.params.get("thread_ts") or "metadata" not in call.params:
            continue
        match = HOST.search(json.dumps(call.params.get("blocks")))
        if match and match.group() not in found:
            found[match.group()] = call.monotonic
    return found


def direct_posts(fake: fake_slack.FakeSlack) -> dict[str, float]:
    found: dict[str, float] = {}
    for post in fake.incoming():
        found.setdefault(post.body["attachments"][0]["title"], post.monotonic)
    return found


def bot_calls(fake: fake_slack.FakeSlack) -> list[tuple[float, str]]:
    """The bot's paced calls (posts and updates) in its channel, in order: arrival, kind."""
    found = []
    for call in fake.calls():
        if call.method in fake_slack.PACED_METHODS and call.params.get("channel") == CHANNEL:
            kind = "update" if call.method == "chat.update" else "card"
            kind = "thread" if call.params.get("thread_ts") else kind
            found.append((call.monotonic, kind))
    return sorted(found)


def warm_up(am_url: str, fake: fake_slack.FakeSlack) -> float:
    """One group before the measured ones, so the worker process has started and
    connected; wait for its card, then for the channel to be quiet. Its latency."""
    group = Group(0)
    fire(am_url, [group], 0.0)
    deadline = time.monotonic() + READY_S
    while group.host not in (found := cards(fake)):
        if time.monotonic() > deadline:
            raise RuntimeError(f"no card for the warm-up alert within {READY_S:.0f} s")
        time.sleep(0.1)
    deadline = time.monotonic() + READY_S  # its runbook's updates and thread post follow
    while time.monotonic() - bot_calls(fake)[-1][0] < QUIET_S and time.monotonic() < deadline:
        time.sleep(0.1)
    return found[group.host] - group.posted


def collect(fake: fake_slack.FakeSlack, groups: list[Group]) -> None:
    """Wait (up to DRAIN_S after the last POST) for both arrivals of every group."""
    deadline = time.monotonic() + DRAIN_S
    hosts, got, direct = {g.host for g in groups}, cards(fake), direct_posts(fake)
    while not hosts <= got.keys() & direct.keys() and time.monotonic() < deadline:
        time.sleep(0.2)
        got, direct = cards(fake), direct_posts(fake)
    for group in groups:
        group.card, group.direct = got.get(group.host, math.nan), direct.get(group.host, math.nan)
    calls = bot_calls(fake)
    for group in groups:
        before = [call for call in calls if call[0] < group.card]
        if before:
            group.slot, group.behind = before[-1][0] + 1.0 / SLACK_RATE, before[-1][1]


@dataclass
class Measured:
    groups: list[Group]
    calls: Counter[str]
    """Every Web API call the bot made, by method (thread posts apart; failures by status)."""
    first: float
    """Seconds from the warm-up alert to its card: the first card after `serve` started."""
    paced: list[tuple[float, str]]
    """The bot's posts and updates in its channel (`bot_calls`)."""
    retried: dict[str, float]
    """Requests Alertmanager saw fail (and then retried), by integration: webhook, slack."""

    def channel_load(self) -> float:
        """Bot messages a second in the channel, from the first measured alert to the last card."""
        start = self.groups[0].posted
        end = max((g.card for g in self.groups if not math.isnan(g.card)), default=start)
        sent = [t for t, _ in self.paced if start <= t <= end]
        return (len(sent) - 1) / (sent[-1] - sent[0]) if len(sent) > 1 else 0.0


def measure(args: argparse.Namespace, env: dict[str, str], log: IO[bytes]) -> Measured:
    upgrade = subprocess.run([BOT, "db", "upgrade"], env=env, capture_output=True, timeout=60)
    if upgrade.returncode != 0:
        raise RuntimeError(f"runbook-bot db upgrade failed: {upgrade.stderr.decode().strip()}")
    groups = [Group(node) for node in range(1, args.incidents + 1)]
    with fake_slack.running() as fake, tempfile.TemporaryDirectory() as workdir:
        fake.rate_limit(CHANNEL, SLACK_RATE, burst=3)  # ~1 message/s per channel, short bursts
        port = free_port()
        env |= {"RUNBOOK_BOT_SLACK_API_URL": fake.api_url}
        webhook = f"http://127.0.0.1:{port}/webhooks/alertmanager"
        am_url, am = alertmanager(Path(workdir), webhook, fake.url + HOOK_PATH, log)
        cmd = [BOT, "serve", "--host", "127.0.0.1", "--port", str(port)]
        bot = started(cmd, f"http://127.0.0.1:{port}/readyz", "runbook-bot serve", log, env=env)
        with bot, am:
            first = warm_up(am_url, fake)
            fire(am_url, groups, args.interval)
            collect(fake, groups)
            calls, paced = fake.calls(), bot_calls(fake)
            metrics = httpx.get(f"{am_url}/metrics", timeout=5.0).text
    failed = "alertmanager_notification_requests_failed_total"
    retried = {i: sample(metrics, failed, integration=i) for i in ("webhook", "slack")}
    kinds = Counter(
        call.method
        + (" (thread)" if call.params.get("thread_ts") else "")
        + ("" if call.status == 200 else f" {call.status}")
        for call in calls
    )
    return Measured(groups, kinds, first, paced, retried)


def percentiles(seconds: list[float]) -> tuple[float, float, float, float]:
    """p50, p95, p99 and max in ms (nearest rank); infinite when there is nothing."""
    ms = sorted(s * 1000 for s in seconds) or [math.inf]
    p50, p95, p99 = (ms[math.ceil(q * len(ms)) - 1] for q in (0.5, 0.95, 0.99))
    return p50, p95, p99, ms[-1]


def quantiles(seconds: list[float]) -> str:
    if not seconds:
        return "none"
    p50, p95, p99, top = percentiles(seconds)
    return f"p50 {p50:7.1f}  p95 {p95:7.1f}  p99 {p99:7.1f}  max {top:7.1f}"


def report(args: argparse.Namespace, result: Measured) -> int:
    groups = result.groups
    both = [g for g in groups if not (math.isnan(g.card) or math.isnan(g.direct))]
    no_card = [g.host for g in groups if math.isnan(g.card)]
    no_direct = [g.host for g in groups if math.isnan(g.direct)]
    overhead = [g.card - g.direct for g in both]
    waited = [g for g in both if g.slot > g.direct]
    unpaced = [g.card - max(g.direct, g.slot) for g in both]
    worst = percentiles(overhead)[2]
    kinds = [g.behind for g in waited]
    behind = ", ".join(f"{k} {kinds.count(k)}" for k in sorted(set(kinds))) or "nothing"
    verdict = "PASS" if worst <= TARGET_P99_MS else "MISS"
    lines = [
        ("machine", f"{os.cpu_count()} cores, shared by all processes"),
        ("setup", f"Alertmanager {BINARY} -> webhook -> serve -> {args.database_url}"),
        ("", f"and its slack_configs -> fake Slack; bot limited to {SLACK_RATE:g} msg/s"),
        ("warm-up", f"first card after start {result.first * 1000:.0f} ms (not counted)"),
        ("load", f"{len(groups)} new groups, one every {args.interval:g} s"),
        ("matched", f"{len(both)} groups on both paths"),
        ("missing", f"cards {len(no_card)}, direct posts {len(no_direct)}"),
        ("retried", ", ".join(f"{k} {n:.0f}" for k, n in result.retried.items()) + " by AM"),
        ("bot calls", ", ".join(f"{k} {n}" for k, n in sorted(result.calls.items()))),
        ("channel", f"{result.channel_load():.2f} bot messages/s ({SLACK_RATE:g}/s allowed)"),
        ("latency ms", "from the alert POST to Alertmanager to the arrival at the fake"),
        ("  direct", quantiles([g.direct - g.posted for g in both])),
        ("  card", quantiles([g.card - g.posted for g in both])),
        ("overhead ms", "card - direct, per group"),
        ("  all", quantiles(overhead)),
        ("  slot wait", f"{len(waited)} waited for the channel's next slot, behind {behind}:"),
        ("", quantiles([min(g.slot, g.card) - g.direct for g in waited])),
        ("  the rest", quantiles(unpaced)),
        ("target", f"p99 overhead {worst:.1f} ms (<= {TARGET_P99_MS:.0f} ms)  {verdict}"),
    ]
    print("runbook-bot alert-to-card benchmark")
    for name, text in lines:
        print(f"  {name:<12} {text}")
    for name, hosts in (("no card", no_card), ("no direct post", no_direct)):
        if hosts:
            print(f"  {name}: {', '.join(hosts[:10])}{' ...' if len(hosts) > 10 else ''}")
    parameters = {"incidents": args.incidents, "interval": args.interval}
    results = Results("alert_to_card", "Alert to Slack card vs Alertmanager's own", parameters)
    direct = [(g.direct - g.posted) * 1000 for g in both]
    card = [(g.card - g.posted) * 1000 for g in both]
    results.distribution("Alertmanager direct Slack post", direct, "ms", backend="postgresql")
    results.distribution("runbook-bot card", card, "ms", backend="postgresql")
    results.distribution("overhead card - direct", [x * 1000 for x in overhead], "ms")
    direct_p99 = ("Alertmanager direct p99", percentiles([g.direct - g.posted for g in both])[2],
                  "ms")  # fmt: skip
    results.metric("card p99", percentiles([g.card - g.posted for g in both])[2], "ms",
                   peer=direct_p99)  # fmt: skip
    results.metric("p99 overhead card - direct", worst, "ms", target=TARGET_P99_MS)
    results.metric("missing cards", len(no_card), "groups", target=0)
    results.metric("bot messages/s in the channel", result.channel_load(), "1/s")
    results.write(args.json)
    return 1 if no_card or not both else 0


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
    parser.add_argument("--incidents", type=int, default=500, help="new alert groups (500)")
    parser.add_argument("--interval", type=float, default=1.2, help="s between groups (1.2)")
    add_option(parser)
    args = parser.parse_args()
    if not (1 <= args.incidents <= 9999 and 0.05 <= args.interval <= 60):
        parser.error("--incidents must be 1..9999 and --interval 0.05..60")
    try:
        return run(args)
    except KeyboardInterrupt:
        print("interrupted; processes stopped and database dropped", file=sys.stderr)
        return 130


if __name__ == "__main__":
    raise SystemExit(main())

"""`runbook-bot drill SCENARIO`: the seed's monthly rehearsal (34.1) against a deployment.

The command posts the scenario's alert to the bot's webhook, labelled as a drill
(`runbook_bot_drill: <id>`): the bot opens a "[DRILL]" incident of its own, never joined
with real alerts, and runs every step of it as a dry run (docs/drills.md). The team works
it as they would a real one; the command follows the incident through the bot's API until
someone resolves it or `--timeout` passes, posts the resolved alert, and writes a report:
time to acknowledge against the seed's 15 minutes for critical (34.4), time to mitigation
(the first changing step that succeeded, as a dry run), time to resolve, who decided what
and when, what was only rendered, and a verdict. Exit 0: resolved in time; 1: timed out.
"""

from __future__ import annotations

import argparse
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx

from bot.config import Settings
from bot.durations import format_duration, parse_duration
from bot.errors import BotError, ConfigInvalid

ACK_TARGET = {"critical": timedelta(minutes=15)}
"""Seed 34.4: critical (a GPU off the bus, a node down, storage) is answered within 15
minutes; warning waits for working hours, so a drill sets it no clock."""
TIMEOUT = 10.0
"""Seconds one request to the bot may take."""
FINISHED = ("resolved", "closed")
SCENARIOS = ("xid79", "node-down", "ib-partition", "storage", "overheating")
"""bot.sim.alerts.SCENARIOS, named here so that building the parser loads no simulator."""
CHANGING = ("change", "disruptive")


class DrillFailed(BotError):
    """The bot could not be reached, refused the drill, or lost its incident."""


def add_command(commands: Any) -> None:
    drill = commands.add_parser(
        "drill",
        help="rehearse an emergency against a running bot, in dry-run mode",
        description="Fire SCENARIO's alert at the bot at --url as a drill: its incident is "
        "marked [DRILL], never joins real alerts, and every step runs as a dry run "
        "(Kubernetes writes with dryRun=All, BMC power and node Jobs rendered only). Follows "
        "the incident until the team resolves it, then prints a report (Markdown). Exit 0 "
        "when it was resolved within --timeout, 1 when it timed out.",
    )
    drill.add_argument("scenario", choices=SCENARIOS, metavar="SCENARIO")
    drill.add_argument("--url", required=True, help="the bot's base URL (http://bot:8080)")
    drill.add_argument(
        "--token-file",
        metavar="FILE",
        help="file holding the webhook token (default: the webhook_token setting)",
    )
    drill.add_argument("--node", help="the node the alert names (default: the scenario's)")
    drill.add_argument("--gpu", type=int, help="the GPU index the alert names (xid79, overheating)")
    drill.add_argument("--uuid", help="that GPU's UUID (default: a made-up one)")
    drill.add_argument("--timeout", default="30m", help="give up after this long (default 30m)")
    drill.add_argument("--poll", default="2s", help="how often to look at the incident")
    drill.add_argument("--report", metavar="FILE", help="also write the report here")
    drill.set_defaults(handler=drill_command)


def drill_command(args: argparse.Namespace, settings: Settings) -> int:
    timeout, poll = _duration(args.timeout, "--timeout"), _duration(args.poll, "--poll")
    if args.gpu is not None and not 0 <= args.gpu <= 63:
        raise ConfigInvalid(f"--gpu {args.gpu}: a GPU index is 0 to 63")
    token = _token(args.token_file, settings)
    drill_id = f"{args.scenario}-{datetime.now(UTC):%Y%m%dT%H%M%SZ}-{secrets.token_hex(2)}"
    with httpx.Client(base_url=args.url, timeout=TIMEOUT) as client:
        bot = Bot(client, token)
        result = run(
            bot,
            args.scenario,
            drill_id,
            node=args.node,
            gpu=args.gpu,
            uuid=args.uuid,
            timeout=timeout,
            poll=poll,
            say=_say,
        )
    text = report(result)
    print(text, end="", flush=True)
    if args.report:
        Path(args.report).write_text(text, encoding="utf-8")
    return 0 if result.completed else 1


@dataclass
class Drill:
    """What one drill did: its alert, its incident as the API last showed it, its steps."""

    scenario: str
    drill_id: str
    started: datetime
    timeout: timedelta
    incident: dict[str, Any] = field(default_factory=dict)
    steps: list[dict[str, Any]] = field(default_factory=list)
    completed: bool = False


class Bot:
    """The bot's HTTP API as the drill uses it: the webhook, and reading incidents."""

    def __init__(self, client: httpx.Client, token: str | None) -> None:
        self.client = client
        self.headers = {"Authorization": f"Bearer {token}"} if token else {}

    def post_alert(self, body: dict[str, Any]) -> dict[str, Any]:
        return self._call("POST", "/webhooks/alertmanager", json=body)

    def incident(self, ref: str) -> dict[str, Any]:
        return self._call("GET", f"/api/incidents/{ref}")

    def steps(self, ref: str) -> list[dict[str, Any]]:
        steps: list[dict[str, Any]] = self._call("GET", f"/api/incidents/{ref}/steps")["steps"]
        return steps

    def _call(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        try:
            response = self.client.request(method, path, headers=self.headers, **kwargs)
        except httpx.HTTPError as exc:
            raise DrillFailed(
                f"cannot reach the bot at {self.client.base_url} ({exc}); check --url and "
                "that the bot is running"
            ) from exc
        if response.status_code == 401:
            raise DrillFailed(
                f"the bot refused the credentials for {path}: pass --token-file with its "
                "webhook token"
            )
        if response.status_code != 200:
            raise DrillFailed(
                f"{method} {path} answered HTTP {response.status_code}: {response.text[:300]}"
            )
        body: dict[str, Any] = response.json()
        return body


def run(
    bot: Bot,
    scenario: str,
    drill_id: str,
    *,
    node: str | None,
    gpu: int | None,
    uuid: str | None,
    timeout: timedelta,
    poll: timedelta,
    say: Callable[[str], None],
) -> Drill:
    """Fire the drill, follow its incident until resolved or `timeout`, clear the alert."""
    from bot.sim import alerts

    started = datetime.now(UTC)
    body = alerts.firing(
        scenario,
        now=started,
        node=node,
        gpu=gpu,
        uuid=uuid,
        drill=drill_id,
        external_url="runbook-bot-drill",
    )
    answer = bot.post_alert(body)
    ref = str(answer.get("incident"))
    if not answer.get("opened"):
        raise DrillFailed(
            f"the drill's alert did not open an incident ({answer}); is the bot "
            "at least at schema revision 0007 (runbook-bot db upgrade)?"
        )
    drill = Drill(scenario, drill_id, started, timeout)
    say(
        f"drill {drill_id}: {ref} opened; waiting up to {format_duration(timeout)} for the "
        "team to resolve it"
    )
    deadline = time.monotonic() + timeout.total_seconds()
    status = None
    try:
        while True:
            drill.incident = bot.incident(ref)
            if drill.incident.get("drill") != drill_id:
                raise DrillFailed(f"{ref} is not this drill's incident; stopping")
            if drill.incident["status"] != status:
                status = drill.incident["status"]
                say(f"{ref} is {status}")
            if status in FINISHED:
                drill.completed = True
                break
            if time.monotonic() >= deadline:
                break
            time.sleep(min(poll.total_seconds(), max(deadline - time.monotonic(), 0.0)))
        drill.steps = bot.steps(ref)
    finally:
        bot.post_alert(alerts.resolved(body, now=datetime.now(UTC)))  # the drill is over
    return drill


def report(drill: Drill) -> str:
    """The drill report, Markdown."""
    incident = drill.incident
    log: list[dict[str, Any]] = incident.get("log", [])
    severity = incident.get("severity", "?")
    opened = _at(incident.get("opened_at"))
    acked = _at(incident.get("acknowledged_at"))
    resolved = _at(incident.get("resolved_at"))
    mitigated = _mitigated(log)
    target = ACK_TARGET.get(severity)
    lines = [
        f"# Drill report: {drill.scenario} ({drill.drill_id})",
        "",
        f"- Incident: {incident.get('id', '?')} {incident.get('title', '')}",
        f"- Severity: {severity}",
        f"- Started: {drill.started:%Y-%m-%d %H:%M:%S} UTC",
        f"- Time to acknowledge: {_since(opened, acked)}"
        + (f" (target {format_duration(target)}, seed 34.4)" if target else ""),
        f"- Time to mitigation: {_since(opened, mitigated)} (first changing step that "
        "succeeded, as a dry run)",
        f"- Time to resolve: {_since(opened, resolved)}",
        f"- Disposition: {incident.get('disposition') or '-'}",
        "",
        "## Who decided what",
        "",
    ]
    decisions = [e for e in log if e["actor"]["kind"] == "human" and not _is_action(e)]
    lines += [
        f"- {_clock(opened, _at(e['at']))} {e['actor']['name']}: {e['summary']}" for e in decisions
    ] or ["- nobody decided anything"]
    lines += ["", "## Steps rendered only (dry run)", ""]
    rendered = [s for s in drill.steps if _dry(log, s)]
    lines += [f"- {s['step']}: {s.get('summary') or s['state']}" for s in rendered] or [
        "- none ran"
    ]
    lines += ["", "## Steps", ""]
    lines += [
        f"- {s['step']}: {s['state']}" + (f": {s['summary']}" if s.get("summary") else "")
        for s in drill.steps
    ] or ["- no runbook steps"]
    lines += ["", f"Verdict: {verdict(drill, opened, acked, target)}", ""]
    return "\n".join(lines)


def verdict(
    drill: Drill, opened: datetime | None, acked: datetime | None, target: timedelta | None
) -> str:
    if not drill.completed:
        return (
            f"TIMED OUT: not resolved within {format_duration(drill.timeout)}; "
            f"{drill.incident.get('id', 'the incident')} is still "
            f"{drill.incident.get('status', 'open')} (resolve it by hand)"
        )
    if target is not None and (acked is None or opened is None or acked - opened > target):
        return f"COMPLETED LATE: resolved, but not acknowledged within {format_duration(target)}"
    return "PASSED: resolved in time" + (
        f", acknowledged within {format_duration(target)}" if target else ""
    )


def _mitigated(log: list[dict[str, Any]]) -> datetime | None:
    risks = {
        e["data"].get("run"): e["data"].get("risk") for e in log if e["type"] == "action.started"
    }
    for entry in log:
        data = entry["data"]
        changing = risks.get(data.get("run")) in CHANGING
        if entry["type"] == "action.finished" and data.get("ok") and changing:
            return _at(entry["at"])
    return None


def _dry(log: list[dict[str, Any]], step: dict[str, Any]) -> bool:
    """Whether the step's action would have changed something and was only rendered."""
    for entry in log:
        data = entry["data"]
        if data.get("step") != step["step"]:
            continue
        if entry["type"] == "action.rendered":
            return True
        if entry["type"] == "action.started" and data.get("dry_run"):
            return data.get("risk") in CHANGING
    return False


def _is_action(entry: dict[str, Any]) -> bool:
    kind: str = entry["type"]
    return kind.startswith(("action.", "bmc.", "drain.", "node_job."))


def _at(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value.replace("Z", "+00:00")) if value else None


def _since(start: datetime | None, end: datetime | None) -> str:
    if start is None or end is None:
        return "not reached"
    return format_duration(max(end - start, timedelta(0))) or "0s"


def _clock(start: datetime | None, at: datetime | None) -> str:
    if at is None:
        return "?"
    offset = f" (+{_since(start, at)})" if start is not None else ""
    return f"{at:%H:%M:%S}{offset}"


def _duration(text: str, option: str) -> timedelta:
    try:
        value = parse_duration(text)
    except ValueError as exc:
        raise ConfigInvalid(f"{option}: {exc}") from exc
    if value <= timedelta(0):
        raise ConfigInvalid(f"{option}: give a positive duration, like 30m")
    return value


def _token(path: str | None, settings: Settings) -> str | None:
    if path is None:
        return settings.bearer_token()
    try:
        value = Path(path).read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise ConfigInvalid(f"--token-file {path}: cannot read it ({exc.strerror})") from exc
    if not value:
        raise ConfigInvalid(f"--token-file {path} is empty; it should hold the webhook token")
    return value


def _say(text: str) -> None:
    print(text, flush=True)

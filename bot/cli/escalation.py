"""Commands on escalation: silence an incident's paging, who is on call (and take the
pager), and whether any worker is firing the timers."""

from __future__ import annotations

import argparse
from datetime import datetime, timedelta
from typing import Any

from bot import escalation
from bot.cli import common
from bot.clock import SystemClock, as_utc
from bot.config import Settings
from bot.durations import format_duration, parse_duration
from bot.escalation import health, oncall
from bot.incidents import service as incidents


def duration(text: str) -> timedelta:
    """An argparse `type`: `2h`, `1h30m`; a bad one is a usage error naming the form."""
    try:
        return parse_duration(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_commands(commands: Any) -> None:
    """Register `oncall` and `workers` on the top-level subparsers."""
    show = commands.add_parser(
        "oncall",
        help="who is on call now and next; `oncall set` takes the pager",
        description="Who is on call now (from the rotation, an override, or nobody) and who "
        "is next. `oncall set PERSON` makes PERSON the on-call until the rotation's next "
        "hand-over (or for --for).",
    )
    show.set_defaults(handler=show_oncall)
    sub = show.add_subparsers(title="commands", metavar="COMMAND")
    take = sub.add_parser(
        "set",
        help="make PERSON the on-call (an override)",
        description="Make PERSON the on-call from now until the rotation's next hand-over, or "
        "for --for (1m to 28d; with no rotation, 12h). The worker sends the hand-over summary.",
    )
    take.add_argument("person", metavar="PERSON", help="who takes the pager: slack:U0123ABC")
    take.add_argument(
        "--for", dest="length", type=duration, metavar="DURATION", help="how long, e.g. 12h"
    )
    take.add_argument(
        "--as",
        dest="actor",
        required=True,
        metavar="PERSON",
        help="who is doing this: a person id of the `people` setting",
    )
    take.set_defaults(handler=set_oncall)

    workers = commands.add_parser(
        "workers",
        help="worker heartbeats and how late the escalation timers are",
        description="The workers that beat (owner, when started, age of the last beat) and "
        "how late the most overdue escalation timer is. A late timer means no worker fires "
        "them: /readyz fails then too.",
    )
    workers.set_defaults(handler=show_workers)


def add_silence(inc: Any) -> None:
    """Register `incidents silence` on the `incidents` subparsers."""
    cmd = inc.add_parser(
        "silence",
        help="page nobody about an incident for a while",
        description="Page nobody about an active incident for --for (1m to 7d); then its "
        "escalation resumes where it was (acknowledged: its acknowledgement timeout starts).",
    )
    cmd.add_argument("incident", metavar="INC-N")
    cmd.add_argument(
        "--for",
        dest="length",
        type=duration,
        required=True,
        metavar="DURATION",
        help="how long, e.g. 2h",
    )
    cmd.add_argument(
        "--as",
        dest="actor",
        required=True,
        metavar="PERSON",
        help="who is doing this: a person id of the `people` setting",
    )
    cmd.set_defaults(handler=silence_incident)


def silence_incident(args: argparse.Namespace, settings: Settings) -> int:
    number = incidents.parse_ref(args.incident)
    now = SystemClock().now()
    with common.database(settings) as db, db.transaction() as session:
        incident = escalation.silence(
            session, number, args.length, actor=common.actor(settings, args.actor), at=now
        )
        until = now + args.length
        return common.say(
            f"{incident.ref} silenced for {format_duration(args.length)}: nobody is paged "
            f"until {until:%Y-%m-%d %H:%M} UTC, then its escalation resumes"
        )


def show_oncall(args: argparse.Namespace, settings: Settings) -> int:
    now = SystemClock().now()
    with common.database(settings) as db, db.session() as session:
        current = oncall.current(session, settings, now)
        following = oncall.following(session, settings, now)
    lines = [f"Now:   {_who(current)}"]
    if following is not None:
        lines.append(f"Next:  {_who(following)}")
    return common.say("\n".join(lines))


def set_oncall(args: argparse.Namespace, settings: Settings) -> int:
    now = SystemClock().now()
    setter = common.decider(settings, args.actor).person.id
    with common.database(settings) as db, db.transaction() as session:
        override = oncall.take(session, settings, args.person, setter, now, args.length)
        ends = as_utc(override.ends_at)
    text = f"{args.person} is on call until {ends:%Y-%m-%d %H:%M} UTC (set by {setter})"
    if not args.person.startswith("slack:"):
        text += (
            f"\nnote: {args.person} has no chat address, so pages to the on-call reach "
            "nobody; write a Slack user as slack:U0123ABC"
        )
    return common.say(text)


def show_workers(args: argparse.Namespace, settings: Settings) -> int:
    now = SystemClock().now()
    with common.database(settings) as db, db.session() as session:
        beats = [
            (row.owner, as_utc(row.started_at), as_utc(row.beat_at))
            for row in health.workers(session)
        ]
        status = health.status(session, now)
    lines = []
    if beats:
        rows = [["OWNER", "STARTED", "LAST BEAT"]]
        rows += [
            [owner, f"{started:%Y-%m-%d %H:%M:%S} UTC", f"{_ago(now, beat)} ago"]
            for owner, started, beat in beats
        ]
        lines.append(common.table(rows))
    else:
        lines.append("No worker has ever beaten: is `runbook-bot serve` (or `worker`) running?")
    if status.timers_late > 0:
        late = format_duration(timedelta(seconds=status.timers_late))
        lines.append(f"Timers: the most overdue escalation timer is {late} late")
    else:
        lines.append("Timers: none overdue")
    return common.say("\n".join(lines))


def _who(who: oncall.OnCall) -> str:
    if who.person is None:
        return "nobody (no rotation, no override): pages go to the responders"
    until = f", until {who.until:%a %Y-%m-%d %H:%M} UTC" if who.until else ""
    return f"{who.person} ({who.source}{until})"


def _ago(now: datetime, then: datetime) -> str:
    return format_duration(max(now - then, timedelta(0)))

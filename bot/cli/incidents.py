"""Commands on incidents and their log: list, show, ack, resolve, reopen, close, verify."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from bot import escalation
from bot.cli import common
from bot.cli import escalation as escalation_commands
from bot.clock import SystemClock
from bot.config import Settings
from bot.errors import RequestRejected
from bot.incidents import filters, log, service, views
from bot.incidents.models import Incident
from bot.runbooks import service as runbooks

if TYPE_CHECKING:
    from rich.text import Text


def add_commands(commands: Any) -> None:
    """Register `incidents` and `log` on the top-level subparsers."""
    incidents = commands.add_parser(
        "incidents",
        help="list, show, acknowledge, silence and resolve incidents",
        description="List, show, acknowledge, silence, resolve, reopen and close incidents.",
    )
    inc = incidents.add_subparsers(title="commands", metavar="COMMAND", required=True)
    lst = inc.add_parser(
        "list",
        help="list incidents, newest first",
        description="List incidents, newest first. The filters take the console's words: "
        "--status active is open or acknowledged, all (the default) is every status.",
    )
    lst.add_argument(
        "--status",
        action="append",
        default=[],
        type=_words(filters.statuses),
        metavar="STATUS",
        help=f"{', '.join(filters.STATUSES)} (repeatable or a comma list; default: all)",
    )
    lst.add_argument(
        "--severity",
        action="append",
        default=[],
        type=_words(filters.severities),
        metavar="SEVERITY",
        help=f"{', '.join(filters.SEVERITIES)} (repeatable or a comma list; default: all)",
    )
    lst.add_argument("--limit", type=_limit, default=50, help="at most this many (default 50)")
    lst.add_argument("-o", "--output", choices=["table", "json"], default="table")
    lst.set_defaults(handler=list_incidents)

    show_cmd = inc.add_parser(
        "show",
        help="one incident with its alerts and log",
        description="Show one incident with its alerts and log.",
    )
    show_cmd.add_argument("incident", metavar="INC-N")
    show_cmd.add_argument("-o", "--output", choices=["text", "json"], default="text")
    show_cmd.set_defaults(handler=show)

    for name, helptext, handler in (
        ("ack", "acknowledge: you are on it (you become owner if there is none)", ack),
        ("resolve", "resolve with a disposition (required for critical incidents)", resolve),
        ("reopen", "reopen a resolved incident", reopen),
        ("close", "close a resolved incident (after its postmortem)", close),
    ):
        cmd = inc.add_parser(name, help=helptext, description=helptext[0].upper() + helptext[1:])
        cmd.add_argument("incident", metavar="INC-N")
        cmd.add_argument(
            "--as",
            dest="actor",
            required=True,
            metavar="PERSON",
            help="who is doing this: a person id of the `people` setting (recorded in the "
            "incident log with your OS user)",
        )
        cmd.add_argument("--note", help="what was done / why (the disposition for resolve)")
        if name == "resolve":
            cmd.add_argument("--owner", help="owner of the incident (default: you)")
        cmd.set_defaults(handler=handler)
    escalation_commands.add_silence(inc)

    split_cmd = inc.add_parser(
        "split",
        help="split nodes out of a domain incident, each into a node incident of its own",
        description="Move the alerts of the named nodes out of a domain incident into a node "
        "incident each (the same runbook, escalation armed, a card of its own). Correlation "
        "never merges them back. Needs a role (responder or above); logged with who and why.",
    )
    split_cmd.add_argument("incident", metavar="INC-N")
    split_cmd.add_argument(
        "--nodes",
        required=True,
        action="append",
        metavar="NODE[,NODE...]",
        help="the nodes to split out (repeatable or a comma list)",
    )
    split_cmd.add_argument(
        "--as",
        dest="actor",
        required=True,
        metavar="PERSON",
        help="who decides: a person id of the `people` setting, with a role",
    )
    split_cmd.add_argument("--reason", help="why these nodes are a problem of their own")
    split_cmd.set_defaults(handler=split)

    log_cmd = commands.add_parser(
        "log", help="the incident log", description="The append-only incident log."
    )
    log_commands = log_cmd.add_subparsers(title="commands", metavar="COMMAND", required=True)
    verify = log_commands.add_parser(
        "verify",
        help="check the hash chain of one or every incident",
        description="Recompute every entry's hash and its link to the previous one, and "
        "with log_key_file every HMAC and each incident's head. Exits 1 and names the first "
        "entry that does not verify; says from which entry each incident's HMAC starts.",
    )
    verify.add_argument("incident", metavar="INC-N", nargs="?")
    verify.set_defaults(handler=log_verify)


def _words(meaning: Callable[[list[str]], tuple[str, ...]]) -> Callable[[str], list[str]]:
    """An argparse `type` for a list filter: the comma-separated words of one option, each
    one `bot.incidents.filters` knows (an unknown one is a usage error listing them)."""

    def parse(text: str) -> list[str]:
        words = common.split([text])
        try:
            meaning(words)
        except RequestRejected as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
        return words

    return parse


def _limit(text: str) -> int:
    if not (text.isascii() and text.isdigit()) or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of incidents; give 1 or more")
    return int(text)


def list_incidents(args: argparse.Namespace, settings: Settings) -> int:
    status = filters.statuses(word for words in args.status for word in words)
    severity = filters.severities(word for words in args.severity for word in words)
    with common.database(settings) as db, db.session() as session:
        rows = service.list_incidents(session, status=status, severity=severity, limit=args.limit)
        if args.output == "json":
            return common.say(json.dumps([views.incident(r) for r in rows], indent=2))
    if not rows:
        chosen = [
            f"{name} {' or '.join(values)}"
            for name, values in [("status", status), ("severity", severity)]
            if values
        ]
        return common.say("No incidents found" + (f" ({'; '.join(chosen)})." if chosen else "."))
    from bot.cli import terminal

    table: list[list[str | Text]] = [["INCIDENT", "SEVERITY", "STATUS", "AGE", "OWNER", "TITLE"]]
    table += [
        [
            r.ref,
            terminal.styled(r.severity),
            terminal.styled(r.status),
            common.age(r.opened_at),
            r.owner or "-",
            r.title,
        ]
        for r in rows
    ]
    return common.say(common.table(table))


def show(args: argparse.Namespace, settings: Settings) -> int:
    number = service.parse_ref(args.incident)
    with common.database(settings) as db, db.session() as session:
        incident = service.get(session, number)
        alerts = service.alerts_of(session, number)
        entries = log.entries(session, number)
        if args.output == "json":
            body: dict[str, Any] = views.incident(incident)
            body["alerts"] = [views.alert(a) for a in alerts]
            body["log"] = [views.log_entry(e) for e in entries]
            return common.say(json.dumps(body, indent=2, ensure_ascii=False))
        lines = [
            f"{incident.ref}  {incident.title}",
            f"Severity:  {incident.severity}",
            f"Status:    {incident.status}",
            f"Owner:     {incident.owner or '-'}",
            f"Opened:    {incident.opened_at:%Y-%m-%d %H:%M:%S} UTC "
            f"({common.age(incident.opened_at)} ago)",
            f"Group:     {incident.group_key}",
        ]
        scope = views.scope_line(incident, alerts, tuple(settings.topology.node_labels))
        if scope:
            lines.append(f"Scope:     {scope}")
        if incident.disposition:
            lines.append(f"Disposition: {incident.disposition}")
        if incident.truncated_alerts:
            lines.append(f"Truncated: {incident.truncated_alerts} alerts left out by Alertmanager")
        lines += ["", "Alerts:"]
        lines += [
            f"  {a.status:<9}{a.alertname}  {a.fingerprint}  since {a.starts_at:%Y-%m-%d %H:%M:%S}"
            for a in alerts
        ]
        lines += ["", "Log:"]
        lines += [f"  {e.at:%Y-%m-%d %H:%M:%S}  {e.actor_name:<24} {e.summary}" for e in entries]
        return common.say("\n".join(lines))


def _transition(
    args: argparse.Namespace, settings: Settings, apply: Callable[..., Incident], **extra: Any
) -> int:
    number = service.parse_ref(args.incident)
    actor = common.actor(settings, args.actor)
    with common.database(settings) as db, db.transaction() as session:
        incident = apply(session, number, actor=actor, at=SystemClock().now(), **extra)
        return common.say(f"{incident.ref} {incident.status} (owner: {incident.owner or '-'})")


def ack(args: argparse.Namespace, settings: Settings) -> int:
    return _transition(args, settings, escalation.acknowledge, note=args.note)


def resolve(args: argparse.Namespace, settings: Settings) -> int:
    """Resolve, cancelling the incident's steps that have not started (same transaction)."""
    number = service.parse_ref(args.incident)
    actor = common.actor(settings, args.actor)
    with common.database(settings) as db, common.note_flag(args.note):
        incident, cancelled = runbooks.resolve(
            db,
            number,
            actor=actor,
            clock=SystemClock(),
            disposition=args.note,
            owner=args.owner,
        )
    steps = ", ".join(run.step_id for run in cancelled)
    return common.say(
        f"{incident.ref} {incident.status} (owner: {incident.owner or '-'})"
        + (f"; cancelled steps not yet run: {steps}" if steps else "")
    )


def reopen(args: argparse.Namespace, settings: Settings) -> int:
    reason = args.note or f"reopened by {args.actor}"
    return _transition(args, settings, service.reopen, reason=reason)


def close(args: argparse.Namespace, settings: Settings) -> int:
    return _transition(args, settings, service.close)


def split(args: argparse.Namespace, settings: Settings) -> int:
    from bot.alerts import splitting

    number = service.parse_ref(args.incident)
    who = common.decider(settings, args.actor)
    with common.database(settings) as db:
        done = splitting.split(
            db,
            number,
            common.split(args.nodes),
            who=who,
            reason=args.reason,
            clock=SystemClock(),
            settings=settings,
        )
    moved = ", ".join(f"{node} -> INC-{n}" for node, n in sorted(done.into.items()))
    return common.say(f"{done.incident.ref}: split {moved}")


def log_verify(args: argparse.Namespace, settings: Settings) -> int:
    with common.database(settings) as db, db.session() as session:
        if args.incident:
            targets = [service.get(session, service.parse_ref(args.incident))]
        else:
            targets = service.list_incidents(session, limit=10**9)
        key, notes = db.log_key, []
        for incident in sorted(targets, key=lambda i: i.number):
            entries = log.entries(session, incident.number)
            broken = log.verify(incident, entries, key)
            if broken is not None:
                print(f"runbook-bot: log verification FAILED: {broken}", file=sys.stderr)
                return 1
            notes.append(_keyed_note(incident.ref, log.keyed_from(entries), len(entries), key))
        for note in filter(None, notes):
            print(note)
        how = "HMAC under the log key" if key is not None else "hash chain only (no log_key_file)"
        return common.say(f"log verified: {len(targets)} incident(s), every entry intact ({how})")


def _keyed_note(ref: str, first: int | None, count: int, key: bytes | None) -> str | None:
    """What `log verify` says of one incident's chain when it is not all HMAC under the
    key; None when it is."""
    if count == 0 or (first is None and key is None):
        return None
    if first is None:
        return (
            f"{ref}: entries #1-#{count} are a plain SHA-256 chain (written before the key), "
            "its head sealed under the key"
        )
    if key is None:
        return (
            f"{ref}: HMAC entries from #{first}: their links were checked, not their MACs; "
            "set log_key_file to check them"
        )
    if first > 1:
        return f"{ref}: plain SHA-256 chain #1-#{first - 1}, HMAC from entry #{first}"
    return None

"""Commands on postmortems: follow-ups (add, list, done, set) and the stored postmortem
(the draft, final, versions, export).

`postmortem` takes either an incident (`postmortem INC-7 [--lang en] [-o FILE]`: the draft
built from the incident log) or a command first (`postmortem final INC-7 --file F ...`,
`postmortem versions INC-7`, `postmortem export INC-7`): one parser, dispatched here.
"""

from __future__ import annotations

import argparse
import sys
from datetime import date
from pathlib import Path
from typing import Any

from bot.cli import common
from bot.clock import SystemClock, as_utc
from bot.config import Settings
from bot.errors import PayloadInvalid
from bot.incidents import service as incidents
from bot.postmortem import final, followups
from bot.postmortem import service as postmortems
from bot.postmortem.models import STATUSES, TYPES, Followup

POSTMORTEM_COMMANDS = ("final", "versions", "export")


def deadline(text: str) -> date:
    """An argparse `type`: `2026-12-31`; a bad one is a usage error naming the form."""
    try:
        return followups.parse_date(text)
    except PayloadInvalid as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def followup_id(text: str) -> int:
    raw = text.strip().lstrip("#")
    if not raw.isdigit():
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a follow-up id: `runbook-bot followup list` shows them"
        )
    return int(raw)


def _as(parser: Any) -> None:
    parser.add_argument(
        "--as",
        dest="actor",
        required=True,
        metavar="USER",
        help="who is doing this: a person id of the `people` setting (recorded in the "
        "incident log with your OS user)",
    )


def add_commands(commands: Any) -> None:
    """Register `followup` and `postmortem` on the top-level subparsers."""
    followup = commands.add_parser(
        "followup",
        help="the improvements a postmortem commits to (owner, deadline)",
        description="Follow-ups: each improvement of a postmortem, with one owner and a "
        "deadline (the seed: every improvement has an owner and a deadline).",
    )
    sub = followup.add_subparsers(title="commands", metavar="COMMAND", required=True)

    add = sub.add_parser(
        "add",
        help="add a follow-up to an incident",
        description="Add a follow-up to an incident. Finalizing its postmortem needs an "
        "owner and a deadline on every open follow-up.",
    )
    add.add_argument("incident", metavar="INC-N")
    add.add_argument("title", metavar="TITLE", help="what will change (1 to 500 characters)")
    add.add_argument("--owner", metavar="PERSON", help="who does it: slack:U0123ABC")
    add.add_argument("--deadline", type=deadline, metavar="DATE", help="by when: 2026-12-31")
    add.add_argument(
        "--type",
        choices=TYPES,
        default="prevent",
        help="mitigate, prevent (default) or process",
    )
    add.add_argument("--link", metavar="URL", help="the tracker issue (http or https)")
    _as(add)
    add.set_defaults(handler=add_followup)

    lst = sub.add_parser(
        "list",
        help="an incident's follow-ups, or every open one",
        description="An incident's follow-ups; without INC-N every follow-up still open, "
        "the earliest deadline first.",
    )
    lst.add_argument("incident", metavar="INC-N", nargs="?")
    lst.add_argument("--open", action="store_true", help="only the open ones")
    lst.set_defaults(handler=list_followups)

    done = sub.add_parser(
        "done", help="mark a follow-up done", description="Mark a follow-up done."
    )
    done.add_argument("id", type=followup_id, metavar="ID")
    _as(done)
    done.set_defaults(handler=done_followup)

    change = sub.add_parser(
        "set",
        help="change a follow-up's owner, deadline, status or link",
        description="Change a follow-up's owner, deadline, status or link.",
    )
    change.add_argument("id", type=followup_id, metavar="ID")
    change.add_argument("--owner", metavar="PERSON", help="who does it: slack:U0123ABC")
    change.add_argument("--deadline", type=deadline, metavar="DATE", help="by when: 2026-12-31")
    change.add_argument("--status", choices=STATUSES, help="open, done or cancelled")
    change.add_argument("--link", metavar="URL", help="the tracker issue (http or https)")
    _as(change)
    change.set_defaults(handler=set_followup)

    pm = commands.add_parser(
        "postmortem",
        help="the postmortem: draft, final, versions, export",
        description="`postmortem INC-N [--lang zh|en] [-o FILE]`: the 5-Why draft built from "
        "the incident log. `postmortem final INC-N --file F --lang zh|en --as USER "
        "[--confirm]`: store the edited Markdown as the final postmortem (refused, with "
        "each problem, while a follow-up lacks an owner or deadline, there is none, no why "
        "is answered, or a why blames a person without --confirm). `postmortem versions "
        "INC-N`: the stored versions. `postmortem export INC-N [--version N] [-o FILE]`: the "
        "last final one (or version N) as Markdown.",
    )
    pm.add_argument("target", metavar="INC-N|final|versions|export")
    pm.add_argument("incident", metavar="INC-N", nargs="?", help="with final, versions, export")
    pm.add_argument("--lang", choices=final.LANGS, help="zh or en")
    pm.add_argument("--file", metavar="FILE", help="final: the edited Markdown ('-': stdin)")
    pm.add_argument("--as", dest="actor", metavar="USER", help="final: who finalizes it")
    pm.add_argument(
        "--confirm",
        action="store_true",
        help="final: keep whys that name a person (recorded with the postmortem)",
    )
    pm.add_argument("--version", type=int, metavar="N", help="export: this version")
    pm.add_argument("-o", "--output", metavar="FILE", help="write to FILE, not stdout")
    pm.set_defaults(handler=postmortem)


# --- followup -----------------------------------------------------------------------------


def add_followup(args: argparse.Namespace, settings: Settings) -> int:
    number = incidents.parse_ref(args.incident)
    with common.database(settings) as db, db.transaction() as session:
        item = followups.add(
            session,
            number,
            args.title,
            type=args.type,
            owner=args.owner,
            deadline=args.deadline,
            link=args.link,
            actor=common.actor(settings, args.actor),
            now=SystemClock().now(),
        )
        text = f"follow-up #{item.id} added to INC-{number}: {_line(item)}"
    return common.say(text + _notes(item))


def list_followups(args: argparse.Namespace, settings: Settings) -> int:
    with common.database(settings) as db, db.session() as session:
        if args.incident:
            number = incidents.parse_ref(args.incident)
            items = followups.of_incident(session, number)
            if args.open:
                items = [item for item in items if item.status == "open"]
            empty = f"INC-{number} has no follow-ups" + (" open" if args.open else "")
        else:
            items = followups.open_items(session)
            empty = "No follow-up is open"
        rows = [["ID", "INC", "TYPE", "STATUS", "OWNER", "DEADLINE", "TITLE"]]
        rows += [
            [
                f"#{item.id}",
                f"INC-{item.incident_number}",
                item.type,
                item.status,
                item.owner or "-",
                item.deadline.isoformat() if item.deadline else "-",
                item.title + (f" <{item.link}>" if item.link else ""),
            ]
            for item in items
        ]
    return common.say(common.table(rows) if items else empty)


def done_followup(args: argparse.Namespace, settings: Settings) -> int:
    with common.database(settings) as db, db.transaction() as session:
        item = followups.update(
            session,
            args.id,
            status="done",
            actor=common.actor(settings, args.actor),
            now=SystemClock().now(),
        )
        text = f"follow-up #{item.id} of INC-{item.incident_number} is done: {item.title}"
    return common.say(text)


def set_followup(args: argparse.Namespace, settings: Settings) -> int:
    given = {
        name: getattr(args, name)
        for name in ("owner", "deadline", "status", "link")
        if getattr(args, name) is not None
    }
    if not given:
        return _usage("followup set: give --owner, --deadline, --status or --link")
    with common.database(settings) as db, db.transaction() as session:
        item = followups.update(
            session,
            args.id,
            actor=common.actor(settings, args.actor),
            now=SystemClock().now(),
            **given,
        )
        text = f"follow-up #{item.id} of INC-{item.incident_number}: {_line(item)}"
    return common.say(text + _notes(item))


def _line(item: Followup) -> str:
    owner = item.owner or "no owner"
    by = item.deadline.isoformat() if item.deadline else "no deadline"
    return f"{item.title} ({item.type}, {item.status}; {owner}, {by})"


def _notes(item: Followup) -> str:
    notes = []
    if item.status == "open" and (item.owner is None or item.deadline is None):
        notes.append(
            "note: the postmortem cannot be final until it has an owner and a deadline "
            f"(`runbook-bot followup set {item.id} --owner slack:U0123ABC --deadline DATE`)"
        )
    if item.owner is not None and not item.owner.startswith("slack:"):
        notes.append(
            f"note: {item.owner} has no chat address, so reminders reach nobody; write a "
            "Slack user as slack:U0123ABC"
        )
    return "".join(f"\n{note}" for note in notes)


# --- postmortem ---------------------------------------------------------------------------


def postmortem(args: argparse.Namespace, settings: Settings) -> int:
    """Dispatch on the first word: a command, or an incident (the draft)."""
    if args.target in POSTMORTEM_COMMANDS:
        if not args.incident:
            return _usage(f"postmortem {args.target}: which incident? e.g. INC-7")
        command = args.target
        number = incidents.parse_ref(args.incident)
    else:
        if args.incident:
            return _usage(
                f"postmortem: {args.target!r} is not a command; the commands are "
                f"{', '.join(POSTMORTEM_COMMANDS)}, or give only an incident (INC-7) for the draft"
            )
        command = "draft"
        number = incidents.parse_ref(args.target)
    allowed = {
        "draft": {"lang", "output"},
        "final": {"lang", "file", "actor", "confirm"},
        "versions": set(),
        "export": {"version", "output"},
    }[command]
    extra = [
        f"--{name}"
        for name in ("lang", "file", "actor", "confirm", "version", "output")
        if name not in allowed and getattr(args, name) not in (None, False)
    ]
    if extra:
        what = "the draft (postmortem INC-N)" if command == "draft" else f"postmortem {command}"
        return _usage(f"{', '.join(extra).replace('--actor', '--as')} is not for {what}")
    if command == "draft":
        return _draft(args, settings, number)
    if command == "final":
        return _final(args, settings, number)
    if command == "versions":
        return _versions(settings, number)
    return _export(args, settings, number)


def _draft(args: argparse.Namespace, settings: Settings, number: int) -> int:
    lang = args.lang or settings.postmortem_lang
    with common.database(settings) as db:
        text = postmortems.draft_markdown(
            db, number, lang=lang, settings=settings, clock=SystemClock()
        )
    return _write(text, args.output, f"INC-{number}'s draft postmortem")


def _final(args: argparse.Namespace, settings: Settings, number: int) -> int:
    missing = [
        flag
        for flag, value in (("--file", args.file), ("--lang", args.lang), ("--as", args.actor))
        if not value
    ]
    if missing:
        return _usage(f"postmortem final needs {', '.join(missing)}")
    body = _read(args.file)
    with common.database(settings) as db, db.transaction() as session:
        row = final.finalize(
            session,
            number,
            body,
            lang=args.lang,
            author=common.decider(settings, args.actor).id,
            now=SystemClock().now(),
            confirm=args.confirm,
        )
        text = f"INC-{number}'s postmortem is final: version {row.version} ({row.lang})"
        if row.note:
            text += f"\nrecorded: {row.note}"
    return common.say(text)


def _versions(settings: Settings, number: int) -> int:
    with common.database(settings) as db, db.session() as session:
        rows = final.versions(session, number)
        table = [["VERSION", "STATE", "LANG", "AUTHOR", "SAVED", "NOTE"]]
        table += [
            [
                str(row.version),
                row.state,
                row.lang,
                row.author,
                f"{as_utc(row.created_at):%Y-%m-%d %H:%M} UTC",
                row.note or "-",
            ]
            for row in rows
        ]
    if not rows:
        return common.say(
            f"INC-{number} has no stored postmortem; `runbook-bot postmortem INC-{number}` "
            "drafts one"
        )
    return common.say(common.table(table))


def _export(args: argparse.Namespace, settings: Settings, number: int) -> int:
    with common.database(settings) as db, db.session() as session:
        if args.version is not None:
            row = final.version(session, number, args.version)
        else:
            found = final.latest(session, number, state="final")
            if found is None:
                print(
                    f"runbook-bot: INC-{number} has no final postmortem yet; finalize it with "
                    f"`runbook-bot postmortem final INC-{number} --file F --lang zh --as USER`",
                    file=sys.stderr,
                )
                return 1
            row = found
        body, what = row.body, f"INC-{number}'s postmortem version {row.version} ({row.state})"
    return _write(body, args.output, what)


def _read(path: str) -> str:
    if path == "-":
        return sys.stdin.read()
    try:
        return Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise PayloadInvalid(f"cannot read {path}: {exc}", field="file") from None


def _write(text: str, output: str | None, what: str) -> int:
    if not output or output == "-":
        return common.say(text)
    try:
        Path(output).write_text(text if text.endswith("\n") else text + "\n", encoding="utf-8")
    except OSError as exc:
        raise PayloadInvalid(f"cannot write {output}: {exc}", field="output") from None
    print(f"{what} written to {output}", file=sys.stderr)
    return 0


def _usage(message: str) -> int:
    print(f"runbook-bot: {message}", file=sys.stderr)
    return 2

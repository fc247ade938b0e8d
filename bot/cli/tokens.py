"""`runbook-bot tokens`: personal API tokens (create, list, revoke).

A token is printed once, when it is created; the database keeps only its hash, so a lost
token is revoked and made again, never shown again."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from bot.cli import common
from bot.clock import SystemClock
from bot.config import Settings


def add_commands(commands: Any) -> None:
    tokens = commands.add_parser(
        "tokens",
        help="personal API tokens: create, list, revoke",
        description="Personal API tokens: `Authorization: Bearer rbt_...` decides on the HTTP "
        "API as the token's person. Shown once when created; stored as a hash.",
    )
    sub = tokens.add_subparsers(title="commands", metavar="COMMAND", required=True)
    create = sub.add_parser("create", help="make a token for a person and print it once")
    create.add_argument("--person", required=True, help="a person id of the `people` setting")
    create.add_argument("--name", default="api", help="what the token is for (default: api)")
    create.set_defaults(handler=create_token)
    listing = sub.add_parser("list", help="the tokens (never their secrets)")
    listing.set_defaults(handler=list_tokens)
    revoke = sub.add_parser("revoke", help="revoke a token: it decides nothing afterwards")
    revoke.add_argument("id", type=_token_id, metavar="ID", help="as `tokens list` shows it")
    revoke.set_defaults(handler=revoke_token)


def _token_id(text: str) -> int:
    raw = text.removeprefix("#")
    if not (raw.isascii() and raw.isdigit()) or len(raw) > 9:
        raise argparse.ArgumentTypeError(f"{text!r} is not a token id: `tokens list` shows them")
    return int(raw)


def create_token(args: argparse.Namespace, settings: Settings) -> int:
    from bot.people import Directory, tokens

    with common.database(settings) as db, db.transaction() as session:
        row, secret = tokens.create(
            session,
            directory=Directory(settings),
            person=args.person,
            name=args.name,
            now=SystemClock().now(),
        )
        ident = row.id
    common.say(secret)
    note = f"token #{ident} ({args.name}) decides as {args.person}; it is shown only now"
    print(note, file=sys.stderr)
    return 0


def list_tokens(_: argparse.Namespace, settings: Settings) -> int:
    from bot.people import tokens

    with common.database(settings) as db, db.session() as session:
        rows = [["ID", "PERSON", "NAME", "CREATED", "REVOKED"]]
        rows += [
            [
                f"#{row.id}",
                row.person,
                row.name,
                f"{row.created_at:%Y-%m-%d %H:%M}",
                f"{row.revoked_at:%Y-%m-%d %H:%M}" if row.revoked_at else "-",
            ]
            for row in tokens.listed(session)
        ]
    return common.say(common.table(rows) if len(rows) > 1 else "No API token yet")


def revoke_token(args: argparse.Namespace, settings: Settings) -> int:
    from bot.people import tokens

    with common.database(settings) as db, db.transaction() as session:
        row = tokens.revoke(session, token_id=args.id, now=SystemClock().now())
        when = f"{row.revoked_at:%Y-%m-%d %H:%M} UTC" if row.revoked_at else "now"
        text = f"token #{row.id} ({row.person}, {row.name}) is revoked (since {when})"
    return common.say(text)

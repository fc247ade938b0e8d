"""`runbook-bot console hash-password`: the hash a console user's `password_hash` holds."""

from __future__ import annotations

import argparse
import getpass
import sys
from typing import Any

from bot.config import Settings
from bot.errors import ConfigInvalid


def add_commands(commands: Any) -> None:
    console = commands.add_parser(
        "console", help="the web console's users", description="The web console's users."
    )
    sub = console.add_subparsers(title="commands", metavar="COMMAND", required=True)
    hashing = sub.add_parser(
        "hash-password",
        help="print the hash of a password, for console.users.NAME.password_hash",
        description="Read a password (twice from a terminal, once from a pipe) and print "
        "its scrypt hash for console.users.NAME.password_hash. The password itself is "
        "never printed or stored.",
    )
    hashing.set_defaults(handler=hash_password)


def hash_password(_: argparse.Namespace, __: Settings) -> int:
    from bot.chat.console.passwords import hash_password as hashed

    if sys.stdin.isatty():
        password = getpass.getpass("Password: ")
        if getpass.getpass("Again: ") != password:
            raise ConfigInvalid("the two passwords differ; run the command again")
    else:
        password = sys.stdin.readline().rstrip("\r\n")
    if not password:
        raise ConfigInvalid("the password is empty; type one (or pipe one line to stdin)")
    print(hashed(password))
    return 0

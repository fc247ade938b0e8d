"""What every `runbook-bot` command shares: printing, the database, tables, lists.

Imported by every command, so it imports the database only in `database()`."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from datetime import datetime
from typing import TYPE_CHECKING

from bot.clock import SystemClock

if TYPE_CHECKING:
    from rich.text import Text

    from bot.config import Settings
    from bot.db import Database
    from bot.incidents.log import Actor
    from bot.people import Decider
    from bot.topology import Topology


def say(text: str) -> int:
    print(text, end="" if text.endswith("\n") else "\n")
    return 0


def decider(settings: Settings, person: str | None) -> Decider:
    """The person `--as` names, deciding through the CLI as this OS user. PersonUnknown
    (exit 2) names the people the settings know. Whoever can reach the database can write
    anything (docs/security.md): the OS user is recorded, not checked."""
    import getpass

    from bot.errors import PersonUnknown
    from bot.people import Decider, Directory

    directory = Directory(settings)
    found = directory.resolve("person", person) if person else None
    if found is None:
        known = ", ".join(sorted(p.id for p in directory.people))
        raise PersonUnknown(
            f"--as {person!r} is not a person in the settings; "
            + (f"known: {known}" if known else "none is: add them to `people`")
        )
    return Decider(found, "cli", f"os:{getpass.getuser()}")


def actor(settings: Settings, person: str | None) -> Actor:
    """The log's actor for `--as` (`decider`)."""
    from bot.incidents.log import Actor

    return Actor.deciding(decider(settings, person))


def configure_logging(settings: Settings) -> None:
    logging.basicConfig(
        level=settings.log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    logging.getLogger("alembic").setLevel(logging.WARNING)
    # httpx logs every request at INFO; the BMC backends log what matters themselves.
    quiet = settings.log_level != "debug"
    logging.getLogger("httpx").setLevel(logging.WARNING if quiet else logging.NOTSET)


@contextmanager
def database(
    settings: Settings, *, migrated: bool = True, worker: bool = False, url: str | None = None
) -> Iterator[Database]:
    """The database; with `migrated`, refuse one whose schema is behind (say what to run).
    `worker` gives the worker's longer timeouts; `url` another URL than `database_url`
    (the migration role's)."""
    from bot import migrations  # SQLAlchemy and Alembic: only for commands that use them
    from bot.db import Database

    db = Database(
        url or settings.database_url,
        connect_timeout=settings.database_connect_timeout,
        lock_timeout=(
            settings.database_worker_lock_timeout if worker else settings.database_lock_timeout
        ),
        statement_timeout=(
            settings.database_worker_statement_timeout
            if worker
            else settings.database_statement_timeout
        ),
        synchronous=settings.sqlite_synchronous,
        log_key=settings.log_key(),
    )
    try:
        if migrated:
            migrations.check(db)
        yield db
    finally:
        db.dispose()


@contextmanager
def node_cache(settings: Settings) -> Iterator[Callable[[], Topology] | None]:
    """The failure domains a long-running process (`serve`, the worker) keeps current: a
    `NodeCache` listing and watching the nodes while the block runs, when a cluster and
    `topology.levels` are configured; None otherwise (every node is its own domain)."""
    from bot.topology import NodeCache

    cache = NodeCache(settings)
    if not cache.enabled:
        cache.start()  # logs once why no node is read
        yield None
        return
    cache.start()
    try:
        yield cache.current
    finally:
        cache.stop()


def age(since: datetime) -> str:
    seconds = int((SystemClock().now() - since).total_seconds())
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{max(seconds, 0)}s"


def table(rows: Sequence[Sequence[str | Text]]) -> str:
    """`rows` (the first the header) as a table that fits the output's width, with colour
    on a terminal; on a pipe, one row a line, columns three spaces apart (`terminal`)."""
    from bot.cli import terminal

    return terminal.render(terminal.table(rows))


@contextmanager
def note_flag(note: str | None) -> Iterator[None]:
    """A decision refused for want of a note ("say what was done ...", "... : say why", in
    the words every surface shares) also says, here, which flag gives one."""
    from bot.errors import BotError

    try:
        yield
    except BotError as exc:
        said = str(exc)
        if (note or "").strip() or not ("say what was done" in said or "say why" in said):
            raise
        exc.args = (f"{exc} (give it with --note TEXT)",)
        raise


def split(values: list[str]) -> list[str]:
    return [part.strip() for value in values for part in value.split(",") if part.strip()]


def seal_log_heads(db: Database) -> None:
    """With the log key, cover the heads of logs written before it (`log.seal`)."""
    if db.log_key is None:
        return
    from bot.incidents import log

    with db.transaction() as session:
        sealed = log.seal(session, db.log_key)
    if sealed:
        logging.getLogger(__name__).info(
            "log key: sealed the heads of %d incident logs written before it", sealed
        )


def run_workers(
    settings: Settings,
    stop: threading.Event,
    *,
    wake: threading.Event | None = None,
    wake_chat: threading.Event | None = None,
) -> None:
    """The worker (steps, timers, hand-overs) until `stop`, the pagers that deliver pages
    to the configured targets, and the Slack sender beside them when Slack is on."""
    from bot.escalation import targets_from
    from bot.escalation.pager import Pager
    from bot.worker import Worker

    targets = targets_from(settings.escalation.targets)  # a missing secret fails now
    threads: list[threading.Thread] = []
    wake_pagers = threading.Event()
    with database(settings, worker=True) as db, ExitStack() as stack:
        from bot.chat import Chat

        seal_log_heads(db)

        chat: Chat | None = None
        if settings.slack_enabled:
            from bot.chat import slack
            from bot.chat.outbox import OutboxChat
            from bot.chat.slack.sender import SlackSender

            assert settings.slack_channel is not None  # settings demand it with a token
            chat = OutboxChat(settings.slack_channel)
            sender = SlackSender(db, settings, SystemClock(), slack.api(settings))
            threads.append(
                threading.Thread(
                    target=sender.run_forever,
                    args=(stop, wake_chat or threading.Event()),
                    name="slack-sender",
                )
            )
        if settings.console.enabled:
            from bot.chat.console.chat import BothChats, ConsoleChat

            chat = BothChats(chat, ConsoleChat())
        if targets:
            for index in range(settings.escalation.pagers):
                pager = Pager(db, SystemClock(), targets)
                threads.append(
                    threading.Thread(
                        target=pager.run_forever,
                        args=(stop, wake_pagers),
                        name=f"pager-{index}",
                        daemon=True,  # a page cut short is sent again by lease
                    )
                )
        for thread in threads:
            thread.start()
        topology = stack.enter_context(node_cache(settings))
        worker = Worker(
            db,
            settings,
            SystemClock(),
            wake=wake,
            chat=chat,
            wake_pagers=wake_pagers,
            topology=topology,
        )
        try:
            worker.run_forever(stop)
        finally:
            stop.set()
            wake_pagers.set()
            if wake_chat is not None:
                wake_chat.set()
            for thread in threads:
                thread.join(timeout=settings.slack_timeout.total_seconds() + 5)

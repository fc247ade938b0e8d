"""The postmortem draft as Markdown, for the CLI, the API and chat."""

from __future__ import annotations

from collections.abc import Callable

from bot.clock import Clock
from bot.config import Settings
from bot.db import Database
from bot.people import Directory
from bot.postmortem import draft as drafts
from bot.postmortem.render import Lang, render


def secrets_of(settings: Settings) -> list[str]:
    """The configured secrets a draft must never show, whatever a log entry says."""
    found = [settings.bearer_token()]
    found += [settings.slack_secret(name) for name in ("bot_token", "signing_secret", "app_token")]
    if settings.webhook_password is not None:
        found.append(settings.webhook_password.get_secret_value())
    return [secret for secret in found if secret]


def names_of(settings: Settings) -> Callable[[str], str]:
    """How a draft shows a person it knows by an id (`alice`, `slack:U0ALICE`): by the
    name the people settings give them (`Alice Chen`); anyone else as written."""
    directory = Directory(settings)

    def name(who: str) -> str:
        kind, _, value = who.partition(":")
        found = directory.resolve("person", who)
        if found is None and kind == "slack" and value:
            found = directory.resolve("slack", value)
        return found.name if found is not None else who

    return name


def draft_markdown(
    db: Database, number: int, *, lang: Lang, settings: Settings, clock: Clock
) -> str:
    """The 5-Why draft of incident `number` in `lang` (zh or en), as of now."""
    with db.session() as session:
        built = drafts.build(
            session, number, clock.now(), secrets_of(settings), names=names_of(settings)
        )
    return render(built, lang, settings.postmortem_templates)

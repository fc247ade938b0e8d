"""The postmortem draft as Markdown, for the CLI, the API and chat."""

from __future__ import annotations

from bot.clock import Clock
from bot.config import Settings
from bot.db import Database
from bot.postmortem import draft as drafts
from bot.postmortem.render import Lang, render


def secrets_of(settings: Settings) -> list[str]:
    """The configured secrets a draft must never show, whatever a log entry says."""
    found = [settings.bearer_token()]
    found += [settings.slack_secret(name) for name in ("bot_token", "signing_secret", "app_token")]
    if settings.webhook_password is not None:
        found.append(settings.webhook_password.get_secret_value())
    return [secret for secret in found if secret]


def draft_markdown(
    db: Database, number: int, *, lang: Lang, settings: Settings, clock: Clock
) -> str:
    """The 5-Why draft of incident `number` in `lang` (zh or en), as of now."""
    with db.session() as session:
        built = drafts.build(session, number, clock.now(), secrets_of(settings))
    return render(built, lang, settings.postmortem_templates)

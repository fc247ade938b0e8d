"""Slack: the incident card and its thread (sent from the outbox), buttons, dialogs and
`/incident`, over HTTP (`/slack/events`) or Socket Mode.

`api(settings)` is the Web API client, `SlackSender` sends the outbox, `SlackApp` takes
what Slack sends (slack-bolt); `blocks` renders Block Kit.
"""

from __future__ import annotations

from bot.chat.slack.client import SlackApi
from bot.config import Settings

__all__ = ["api"]


def api(settings: Settings) -> SlackApi:
    """The Web API client for these settings (Slack must be on)."""
    token = settings.slack_secret("bot_token")
    assert token is not None, "Slack is off: no slack_bot_token"
    return SlackApi(
        token, base_url=settings.slack_api_url, timeout=settings.slack_timeout.total_seconds()
    )

"""Slack's Web API for the bot: the few methods it calls, with errors it can act on.

The real `slack_sdk.WebClient`, with a timeout on every call. Failures become
`ChatUnavailable` (429 with its Retry-After, 5xx, a timeout or a refused connection: send
again later) or `ChatRefused` (Slack said no: a bad token, a channel the bot is not in;
sending again will not help, the message says what to fix). The outbox decides about
retries itself (a 429 must not hold a sender thread asleep), so this client has no
retry handlers.
"""

from __future__ import annotations

import logging
from typing import Any

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError, SlackClientError

from bot import retrying
from bot.errors import ChatRefused, ChatUnavailable

logger = logging.getLogger(__name__)

Blocks = list[dict[str, Any]]
METADATA_EVENT = "runbook_bot_incident"
"""Message metadata on every card: finds a card whose post we could not record."""

FIXES = {
    "invalid_auth": "check slack_bot_token (a bot token, xoxb-...)",
    "not_authed": "set slack_bot_token",
    "token_revoked": "the bot token was revoked: reinstall the app and update slack_bot_token",
    "account_inactive": "the app was uninstalled: reinstall it",
    "channel_not_found": "check slack_channel (a channel id like C0123456789)",
    "not_in_channel": "invite the bot to the channel (/invite @runbook-bot)",
    "is_archived": "the channel is archived: unarchive it or change slack_channel",
    "missing_scope": "add the scope Slack names to the app (deploy/slack-app-manifest.yaml)",
    "msg_too_long": "a bug: the message exceeded Slack's limits; please report it",
    "invalid_blocks": "a bug: Slack refused the blocks; please report it",
}


class SlackApi:
    """The Web API methods runbook-bot uses."""

    def __init__(self, token: str, *, base_url: str, timeout: float) -> None:
        self.web = WebClient(token=token, base_url=base_url, timeout=int(max(1, timeout)))
        self.web.retry_handlers = []  # the caller decides (see the module docstring)

    def post(
        self,
        channel: str,
        text: str,
        blocks: Blocks,
        *,
        thread_ts: str | None = None,
        incident: int | None = None,
    ) -> str:
        """Post a message; its ts."""
        extra: dict[str, Any] = {}
        if thread_ts is not None:
            extra["thread_ts"] = thread_ts
        if incident is not None:
            extra["metadata"] = {
                "event_type": METADATA_EVENT,
                "event_payload": {"incident": incident},
            }
        answer = self._call(
            "chat.postMessage",
            lambda: self.web.chat_postMessage(
                channel=channel, text=text, blocks=blocks, unfurl_links=False, **extra
            ),
        )
        return str(answer["ts"])

    def update(self, channel: str, ts: str, text: str, blocks: Blocks) -> None:
        self._call(
            "chat.update",
            lambda: self.web.chat_update(channel=channel, ts=ts, text=text, blocks=blocks),
        )

    def ephemeral(self, channel: str, user: str, text: str, blocks: Blocks) -> None:
        self._call(
            "chat.postEphemeral",
            lambda: self.web.chat_postEphemeral(
                channel=channel, user=user, text=text, blocks=blocks
            ),
        )

    def upload(
        self,
        channel: str,
        filename: str,
        content: str,
        *,
        title: str,
        comment: str,
        thread_ts: str | None = None,
    ) -> str:
        """Share a text file in `channel` (in a thread with `thread_ts`); its permalink."""
        extra: dict[str, Any] = {"thread_ts": thread_ts} if thread_ts is not None else {}
        answer = self._call(
            "files.uploadV2",
            lambda: self.web.files_upload_v2(
                channel=channel,
                filename=filename,
                content=content,
                title=title,
                initial_comment=comment,
                **extra,
            ),
        )
        files = answer.get("files") or [{}]
        return str(files[0].get("permalink") or "")

    def open_dm(self, user: str) -> str:
        """The id of the bot's direct-message channel with `user`."""
        answer = self._call("conversations.open", lambda: self.web.conversations_open(users=user))
        return str((answer.get("channel") or {}).get("id", ""))

    def find_card(self, channel: str, incident: int, oldest: float) -> str | None:
        """The ts of a card for `incident` posted since `oldest` (epoch seconds), if any:
        a card whose post reached Slack but whose ts we could not record."""
        answer = self._call(
            "conversations.history",
            lambda: self.web.conversations_history(
                channel=channel, oldest=str(oldest), limit=200, include_all_metadata=True
            ),
        )
        for message in answer.get("messages") or []:
            metadata = message.get("metadata") or {}
            payload = metadata.get("event_payload") or {}
            if metadata.get("event_type") == METADATA_EVENT and payload.get("incident") == incident:
                return str(message["ts"])
        return None

    def group_members(self, group: str) -> set[str]:
        """User ids of a user group (`S0123...`)."""
        answer = self._call(
            "usergroups.users.list",
            lambda: self.web.usergroups_users_list(usergroup=group),
        )
        return {str(user) for user in answer.get("users") or []}

    def open_view(self, trigger_id: str, view: dict[str, Any]) -> None:
        self._call("views.open", lambda: self.web.views_open(trigger_id=trigger_id, view=view))

    def _call(self, method: str, call: Any) -> Any:
        try:
            return call()
        except SlackApiError as exc:
            raise _api_error(method, exc) from None
        except (SlackClientError, OSError) as exc:  # timeouts, refused connections
            raise ChatUnavailable(f"Slack {method} did not answer: {exc}") from None


def _api_error(method: str, exc: SlackApiError) -> ChatRefused | ChatUnavailable:
    response = exc.response
    status = response.status_code
    error = str(response.get("error", "")) if isinstance(response.data, dict) else ""
    if status == 429:
        header = response.headers.get("Retry-After") or response.headers.get("retry-after")
        retry_after = retrying.retry_after(_one(header), default=1.0, least=1.0)
        return ChatUnavailable(
            f"Slack {method} is rate limited; retrying after {retry_after:g} s",
            delay=retry_after,
            throttled=True,
        )
    if status >= 500 or error in ("internal_error", "service_unavailable", "fatal_error"):
        return ChatUnavailable(f"Slack {method} failed ({status} {error}); retrying", delay=5.0)
    fix = FIXES.get(error, "see https://api.slack.com/methods/" + method)
    return ChatRefused(f"Slack refused {method}: {error or status}; {fix}")


def _one(header: object) -> str | None:
    """slack_sdk gives headers as lists of values (urllib), or as strings."""
    if isinstance(header, list | tuple):
        header = header[0] if header else None
    return None if header is None else str(header)

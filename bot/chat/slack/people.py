"""Who a Slack user is to runbook-bot: their person id and their roles.

A Slack user acts as `slack:U0123ABC` (stable: a display name can change, and a two-person
rule that counted names could be met by one person renaming themselves). Their roles are
the union of `roles` (where they may be listed as `slack:U0123ABC`) and the roles of the
Slack user groups they belong to (`slack_role_groups`), read with
`usergroups.users.list` and cached for `slack_groups_ttl`. When Slack cannot be asked, the
last known membership is used; with none, only `roles` counts.
"""

from __future__ import annotations

import logging
import threading
import time

from bot.chat.slack.client import SlackApi
from bot.config import Settings
from bot.errors import ChatError

logger = logging.getLogger(__name__)

PREFIX = "slack:"


def person(user_id: str) -> str:
    return f"{PREFIX}{user_id}"


class Roles:
    def __init__(self, settings: Settings, api: SlackApi) -> None:
        self.settings = settings
        self.api = api
        self._lock = threading.Lock()
        self._groups: dict[str, tuple[float, set[str]]] = {}

    def of(self, user_id: str) -> list[str]:
        """The user's roles, strongest first."""
        roles = set(self.settings.roles.get(person(user_id), []))
        for role, groups in self.settings.slack_role_groups.items():
            if any(user_id in self._members(group) for group in groups):
                roles.add(role)
        order = ("admin", "second_line", "responder")
        return [role for role in order if role in roles]

    def _members(self, group: str) -> set[str]:
        ttl = self.settings.slack_groups_ttl.total_seconds()
        with self._lock:
            cached = self._groups.get(group)
        if cached is not None and time.monotonic() - cached[0] < ttl:
            return cached[1]
        try:
            members = self.api.group_members(group)
        except ChatError as exc:
            logger.warning("cannot read Slack user group %s (%s); using what was known", group, exc)
            return cached[1] if cached is not None else set()
        with self._lock:
            self._groups[group] = (time.monotonic(), members)
        return members

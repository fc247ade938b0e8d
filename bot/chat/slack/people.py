"""Who a Slack user is to runbook-bot: a person of the people directory, and their roles.

A Slack user is the person whose `slack` id they are (stable: a display name can change,
and a two-person rule that counted names could be met by one person renaming themselves),
or, when no person has that id, a person of their own, `slack:U0123ABC`. Their roles are
the person's (`people`, `roles`, console users) and the roles of the Slack user groups they
belong to (`slack_role_groups`), read with `usergroups.users.list` and cached for
`slack_groups_ttl`. When Slack cannot be asked, the last known membership is used; with
none, only the person's own roles count.
"""

from __future__ import annotations

import logging
import threading
import time

from bot.chat.slack.client import SlackApi
from bot.config import Settings
from bot.errors import ChatError
from bot.people import Directory, Person

logger = logging.getLogger(__name__)

PREFIX = "slack:"


def person(user_id: str) -> str:
    return f"{PREFIX}{user_id}"


class Roles:
    def __init__(self, settings: Settings, api: SlackApi) -> None:
        self.settings = settings
        self.api = api
        self.directory = Directory(settings)
        self._lock = threading.Lock()
        self._groups: dict[str, tuple[float, set[str]]] = {}

    def person(self, user_id: str, shown: str) -> Person:
        """The person the Slack user is, with the roles their user groups add."""
        found = self.directory.slack_user(user_id, shown)
        granted = [
            role
            for role, groups in self.settings.slack_role_groups.items()
            if any(user_id in self._members(group) for group in groups)
        ]
        return found.with_roles(granted)

    def of(self, user_id: str) -> list[str]:
        """The user's roles, strongest first."""
        return list(self.person(user_id, user_id).roles)

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

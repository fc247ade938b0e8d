"""The people directory: who a request is, from the identity it came with.

Built from the settings: each `people` entry is a person; each older `roles` key gives its
roles to the person it names (a `slack:U...` key: the person with that Slack id; any other
key: the person with that console login) or becomes a person of its own; each console user
maps to the person with that login (or is one). A person's roles are the union of all of
these, so they hold the same roles whichever channel they come through. Slack user groups
add roles at the surface (`bot.chat.slack.people`), to the same person.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Literal

from bot.config import Settings

Channel = Literal["slack", "console", "api", "cli"]
"""How a decision arrived: a signed Slack request, a console session, a personal API
token, or the command line (database access)."""
Identity = Literal["person", "slack", "console", "email", "proxy_user"]
ROLE_ORDER = ("admin", "second_line", "responder")
SLACK = "slack:"
SLACK_ID = re.compile(r"[UW][A-Z0-9]{2,30}")
ADMIN = "admin"


def ordered(roles: Iterable[str]) -> tuple[str, ...]:
    """`roles`, strongest first, each once."""
    given = set(roles)
    return tuple(role for role in ROLE_ORDER if role in given)


@dataclass(frozen=True)
class Person:
    """One person: the id the log names, how to show them, their roles (strongest first;
    empty: they may look, not decide) and their Slack user id when the bot knows it."""

    id: str
    name: str
    roles: tuple[str, ...] = ()
    slack: str | None = None

    def with_roles(self, roles: Iterable[str]) -> Person:
        return replace(self, roles=ordered([*self.roles, *roles]))


@dataclass(frozen=True)
class Decider:
    """A person deciding through a channel; `via` is the identity that brought them
    (`slack:U0ALICE`, `console:alice`, `token 3 (laptop)`, `cli:root`)."""

    person: Person
    channel: Channel
    via: str

    @property
    def id(self) -> str:
        return self.person.id

    @property
    def name(self) -> str:
        return self.person.name

    @property
    def roles(self) -> tuple[str, ...]:
        return self.person.roles


class Directory:
    """The people the settings name, and which identity is whose."""

    def __init__(self, settings: Settings) -> None:
        self._people: dict[str, Person] = {}
        self._index: dict[tuple[Identity, str], str] = {}
        for person_id, entry in settings.people.items():
            self._add(
                Person(person_id, entry.name or person_id, ordered(entry.roles), entry.slack),
                slack=entry.slack,
                console=entry.login(person_id),
                email=entry.email,
                proxy_user=entry.proxy_user,
            )
        for key, roles in settings.roles.items():
            if key.startswith(SLACK):
                user_id = key.removeprefix(SLACK)
                found = self._index.get(("slack", user_id)) or self._add(
                    Person(key, key, (), user_id), slack=user_id
                )
            else:
                found = self._index.get(("console", key)) or self._login(key, key)
            self._grant(found, roles)
        for login, user in settings.console.users.items():
            found = self._index.get(("console", login)) or self._login(login, user.name or login)
            self._grant(found, user.roles)
        if settings.console.secret("admin_token") is not None:
            found = self._index.get(("console", ADMIN)) or self._login(ADMIN, ADMIN)
            self._grant(found, [ADMIN])

    def get(self, person_id: str) -> Person | None:
        return self._people.get(person_id)

    def resolve(self, identity: Identity, value: str) -> Person | None:
        """The person `value` is (a person id, Slack user id, console login, e-mail or proxy
        user name); None when it is nobody's."""
        if identity == "person":
            return self._people.get(value)
        if identity == "email":
            value = value.lower()
        found = self._index.get((identity, value))
        return self._people[found] if found is not None else None

    def slack_user(self, user_id: str, shown: str) -> Person:
        """The person a Slack user is; one of their own (`slack:U...`, no roles) when no
        person has that Slack id."""
        return self.resolve("slack", user_id) or Person(f"{SLACK}{user_id}", shown, (), user_id)

    def slack_id(self, person_id: str) -> str | None:
        """The Slack user id of a person, for a mention; None when the bot knows none. A
        Slack user no setting names is the person `slack:U...` (`slack_user`): that id is
        the directory's own, made from the user id Slack signed."""
        found = self._people.get(person_id)
        if found is not None:
            return found.slack
        if person_id.startswith(SLACK) and SLACK_ID.fullmatch(person_id.removeprefix(SLACK)):
            return person_id.removeprefix(SLACK)
        return None

    @property
    def people(self) -> list[Person]:
        return list(self._people.values())

    @property
    def anyone_decides(self) -> bool:
        return any(person.roles for person in self._people.values())

    def _add(self, person: Person, **identities: str | None) -> str:
        self._people[person.id] = person
        self._index[("person", person.id)] = person.id
        for kind, value in identities.items():
            if value is not None:
                self._index.setdefault((kind, value), person.id)  # type: ignore[arg-type]
        return person.id

    def _login(self, login: str, name: str) -> str:
        """A person of their own for a console login nobody in `people` has."""
        person_id = login if login not in self._people else f"console:{login}"
        return self._add(Person(person_id, name), console=login)

    def _grant(self, person_id: str, roles: Iterable[str]) -> None:
        self._people[person_id] = self._people[person_id].with_roles(roles)

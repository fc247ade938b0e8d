"""The `people` setting: who the people deciding are, their roles and the identities that
are theirs (a Slack user id, a console login, an e-mail address, the user name a trusted
reverse proxy signs in). Pure data at the config layer; `bot.people` resolves identities
to people from it.

An identity belongs to one person: two people naming the same Slack id, console login,
e-mail or proxy user is refused at start, since the two-person rule counts people.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

PersonRole = Literal["responder", "second_line", "admin"]
PERSON_ID = re.compile(r"^[a-z][a-z0-9._-]{0,63}$")
"""A person id: what the log names (`alice`), what the CLI's `--as` takes."""
IDENTITIES = ("slack", "console", "email", "proxy_user")


class PersonSettings(BaseModel):
    """One person and the identities that are theirs."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str | None = Field(None, max_length=100)
    """How they are shown (`Alice Chen`); unset: the person id."""
    roles: list[PersonRole] = []
    """Empty: they may look but not decide."""
    slack: str | None = Field(None, pattern=r"^[UW][A-Z0-9]{2,20}$")
    """Their Slack user id (`U024BE7LH`), never a display name (those can change)."""
    console: str | None = Field(None, pattern=r"^[a-z][a-z0-9._-]{0,63}$")
    """Their console login (a key of `console.users`); unset: the person id."""
    email: str | None = Field(None, max_length=254, pattern=r"^[^@\s]+@[^@\s]+$")
    """Their e-mail address, as a trusted proxy sends it in `X-Forwarded-Email`."""
    proxy_user: str | None = Field(None, min_length=1, max_length=200)
    """Their user name as a trusted proxy sends it in `X-Forwarded-User`."""

    @field_validator("email")
    @classmethod
    def _lower(cls, value: str | None) -> str | None:
        return value.lower() if value is not None else None

    def login(self, person_id: str) -> str:
        """Their console login."""
        return self.console or person_id


def check_people(people: dict[str, PersonSettings]) -> dict[str, PersonSettings]:
    """`people` when every id is well formed and no identity is two people's."""
    owners: dict[tuple[str, str], str] = {}
    for person_id, person in people.items():
        if not PERSON_ID.match(person_id):
            raise ValueError(
                f"person id {person_id!r}: lower-case letters, digits, '.', '_' or '-', "
                "starting with a letter (the log and `--as` name them by it)"
            )
        for kind in IDENTITIES:
            value = person.login(person_id) if kind == "console" else getattr(person, kind)
            if value is None:
                continue
            other = owners.setdefault((kind, value), person_id)
            if other != person_id:
                raise ValueError(
                    f"{kind} {value!r} is both {other}'s and {person_id}'s: an identity "
                    "belongs to one person (the two-person rule counts people); remove it "
                    "from one of them"
                )
    return people

"""The people directory: every identity resolves to one person, older settings become
people, and an identity claimed by two people stops the start."""

from __future__ import annotations

import pytest

from bot.config import load_settings
from bot.errors import ConfigInvalid
from bot.escalation import oncall
from bot.people import Directory, Person
from tests.console.rig import console_settings


def test_older_roles_console_users_and_people_resolve_to_one_person_each() -> None:
    settings = load_settings(
        people={"alice": {"name": "Alice Chen", "slack": "UALICE", "roles": ["responder"]}},
        roles={"slack:UALICE": ["admin"], "bob": ["responder"], "slack:UDAVE": ["responder"]},
        console=console_settings(),
    )
    directory = Directory(settings)

    alice = directory.resolve("slack", "UALICE")
    assert alice == directory.resolve("console", "alice") == directory.resolve("person", "alice")
    assert alice == Person("alice", "Alice Chen", ("admin", "responder"), "UALICE")
    bob = directory.resolve("console", "bob")
    assert bob is not None and (bob.id, bob.roles) == ("bob", ("responder",))
    dave = directory.resolve("slack", "UDAVE")
    assert dave is not None and (dave.id, dave.roles) == ("slack:UDAVE", ("responder",))
    assert directory.resolve("slack", "UNOBODY") is None
    stranger = directory.slack_user("UNOBODY", "@nobody")
    assert (stranger.id, stranger.roles) == ("slack:UNOBODY", ())
    admin = directory.resolve("console", "admin")  # the admin token's person
    assert admin is not None and admin.roles == ("admin",)
    assert directory.slack_id("alice") == "UALICE"
    assert directory.slack_id("bob") is None
    assert directory.anyone_decides


def test_an_identity_of_two_people_stops_the_start_naming_both() -> None:
    with pytest.raises(ConfigInvalid) as raised:
        load_settings(people={"alice": {"slack": "UALICE"}, "mallory": {"slack": "UALICE"}})

    assert "slack 'UALICE' is both alice's and mallory's" in str(raised.value)


def test_a_person_id_must_be_a_login_like_name() -> None:
    with pytest.raises(ConfigInvalid) as raised:
        load_settings(people={"Alice Chen": {}})

    assert "person id 'Alice Chen'" in str(raised.value)


def test_escalation_pages_the_people_holding_a_role_whichever_setting_gives_it() -> None:
    settings = load_settings(
        people={"dana": {"roles": ["second_line"], "slack": "UDANA"}},
        roles={"slack:UERIN": ["second_line"], "slack:UDANA": ["responder"]},
        slack_role_groups={"second_line": ["S0SRE"]},
    )

    assert oncall.role_holders(settings, "second_line") == ["dana", "slack:UERIN", "slack:S0SRE"]
    assert oncall.role_holders(settings, "responder") == ["dana"]

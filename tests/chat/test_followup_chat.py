"""`/incident followup` and `/incident followups` through the real slack-bolt app and the
fake Slack: a follow-up added from chat (title words, a mention, a date, a type, in any
order), the list, and the refusals (no role, a bad date, a plain-text owner)."""

from __future__ import annotations

from datetime import date

import httpx
from sqlalchemy import select

from bot.postmortem.models import Followup
from tests.chat.slack_rig import Chat
from tests.support.payloads import alert, notification


def _open(chat: Chat) -> int:
    result = chat.rig.ingest(notification([alert()]))
    assert result.opened
    return result.incident


def _items(chat: Chat) -> list[Followup]:
    with chat.rig.db.session() as session:
        return list(session.scalars(select(Followup).order_by(Followup.id)))


def test_followup_adds_an_item_with_owner_deadline_and_type(
    chat: Chat, client: httpx.Client
) -> None:
    number = _open(chat)

    said = chat.command(
        client,
        f"followup INC-{number} Alert on ECC growth rate <@UBOB|bob> 2026-12-31 mitigate",
    )

    (item,) = _items(chat)
    assert (item.incident_number, item.title, item.type) == (
        number,
        "Alert on ECC growth rate",
        "mitigate",
    )
    assert (item.owner, item.deadline, item.created_by, item.source) == (
        "slack:UBOB",
        date(2026, 12, 31),
        "slack:UALICE",
        "person",
    )
    assert f"Follow-up #{item.id} added to INC-{number}: #{item.id} Alert on ECC growth" in said
    assert "<@UBOB>" in said and "2026-12-31" in said
    entry = chat.rig.log(number)[-1]
    assert (entry.type, entry.actor_id) == ("followup.added", "slack:UALICE")

    # Quotes keep a title whole, even with a type word in it; the order does not matter.
    chat.command(
        client,
        f"followup INC-{number} 2027-01-15 <@UCAROL> “SOP: prevent drains past the PDB”",
        user="UBOB",
    )
    second = _items(chat)[-1]
    assert (second.title, second.type, second.owner, second.deadline) == (
        "SOP: prevent drains past the PDB",
        "prevent",
        "slack:UCAROL",
        date(2027, 1, 15),
    )

    # Without an owner and deadline it is added, and the answer says what it still needs.
    later = chat.command(client, f"followup INC-{number} Don't RMA the card's twin process")
    assert "needs an owner and a deadline" in later
    assert (_items(chat)[-1].title, _items(chat)[-1].type) == (
        "Don't RMA the card's twin",
        "process",
    )

    listed = chat.command(client, f"followups INC-{number}", user="UMALLORY")  # reading
    assert f"Follow-ups of INC-{number}" in listed
    assert "Alert on ECC growth rate (mitigate, open; <@UBOB>, 2026-12-31)" in listed
    assert "twin (process, open; no owner, no deadline)" in listed


def test_followup_refuses_no_role_bad_dates_and_bad_owners(
    chat: Chat, client: httpx.Client
) -> None:
    number = _open(chat)

    refused = chat.command(
        client, f"followup INC-{number} ECC alert <@UBOB> 2026-12-31", user="UMALLORY"
    )
    assert "responder role to add follow-ups to incidents" in refused
    entry = chat.rig.log(number)[-1]
    assert (entry.type, entry.actor_id) == ("chat.refused", "slack:UMALLORY")

    assert "'2026-13-45' is not a date: write the deadline like 2026-12-31" in chat.command(
        client, f"followup INC-{number} ECC alert <@UBOB> 2026-13-45"
    )
    assert "'31/12/2026' is not a date" in chat.command(
        client, f"followup INC-{number} ECC alert <@UBOB> 31/12/2026"
    )
    assert "name the owner as a mention" in chat.command(
        client, f"followup INC-{number} ECC alert @bob 2026-12-31"
    )
    assert "one owner per follow-up" in chat.command(
        client, f"followup INC-{number} ECC alert <@UBOB> <@UCAROL> 2026-12-31"
    )
    assert "what will change?" in chat.command(client, f"followup INC-{number} <@UBOB>")
    assert "which incident?" in chat.command(client, "followup ECC alert")
    assert "INC-99 does not exist" in chat.command(client, "followup INC-99 ECC alert")
    assert "INC-99 does not exist" in chat.command(client, "followups INC-99")
    assert _items(chat) == []
    assert "has no follow-ups" in chat.command(client, f"followups INC-{number}")


def test_help_names_the_followup_commands(chat: Chat, client: httpx.Client) -> None:
    said = chat.command(client, "help")
    assert "/incident followup INC-7" in said and "/incident followups INC-7" in said
    assert "/incident followup-done #12" in said


def test_followup_done_closes_an_item_for_people_with_a_role(
    chat: Chat, client: httpx.Client
) -> None:
    number = _open(chat)
    chat.command(client, f"followup INC-{number} Spare GPU in stock <@UBOB> 2026-12-31")
    (item,) = _items(chat)

    refused = chat.command(client, f"followup-done #{item.id}", user="UMALLORY")
    assert "responder role to close follow-ups of incidents" in refused
    assert _items(chat)[0].status == "open"
    assert "which follow-up?" in chat.command(client, "followup-done INC-7")
    assert "follow-up #999 does not exist" in chat.command(client, "followup-done 999")

    said = chat.command(client, f"followup-done #{item.id}")
    assert f"Follow-up #{item.id} of INC-{number} is done: #{item.id} Spare GPU" in said
    assert _items(chat)[0].status == "done"
    entry = chat.rig.log(number)[-1]
    assert (entry.type, entry.actor_id) == ("followup.done", "slack:UALICE")

"""Numbers in signed Slack payloads that are no id of ours: past the integer column, a
Unicode digit (`²`, a digit to `str.isdigit` that `int()` refuses), empty. Each payload
shape is refused with its message, never a 500 or a dropped connection: a button with
400, a dialog with Slack's 200 and the error shown in it, a slash command with Slack's
200 and an ephemeral answer (Slack shows a slash command's answer only on a 200)."""

from __future__ import annotations

import json

import httpx
import pytest

from bot.chat.slack.ids import NUMBERED_ACTIONS, NUMBERED_VIEWS
from tests.chat.slack_rig import Chat
from tests.runbooks.rig import TWO_STEPS
from tests.support import fake_slack

HUGE = "99999999999999999999"
BAD = [HUGE, "²"]


@pytest.mark.parametrize("value", BAD, ids=["huge", "superscript"])
@pytest.mark.parametrize("action", sorted(NUMBERED_ACTIONS))
def test_a_button_value_that_is_no_id_is_a_400_with_a_message(
    chat: Chat, client: httpx.Client, action: str, value: str
) -> None:
    payload = fake_slack.block_actions(
        action_id=action,
        value=value,
        response_url=chat.slack.response_url(),
        user_id="UALICE",
        user_name="alice",
        channel_id="C0INCIDENTS",
    )
    answer = chat.post(client, fake_slack.interactive_form(payload))

    assert answer.status_code == 400, answer.text
    assert "must be a number from 1 to 2147483647" in answer.text
    assert "refresh the incident card" in answer.text


@pytest.mark.parametrize("metadata", [*BAD, ""], ids=["huge", "superscript", "empty"])
@pytest.mark.parametrize("callback", sorted(NUMBERED_VIEWS))
def test_a_dialog_whose_metadata_is_no_id_shows_the_error_in_the_dialog(
    chat: Chat, client: httpx.Client, callback: str, metadata: str
) -> None:
    block = NUMBERED_VIEWS[callback]
    payload = fake_slack.view_submission(
        callback_id=callback,
        private_metadata=metadata,
        values={block: {"text": {"type": "plain_text_input", "value": "replaced GPU 5"}}},
        user_id="UALICE",
    )
    answer = chat.post(client, fake_slack.interactive_form(payload))

    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["response_action"] == "errors"
    assert "must be a number from 1 to 2147483647" in body["errors"][block]


@pytest.mark.parametrize("value", BAD, ids=["huge", "superscript"])
def test_numbers_in_a_dialogs_state_values_are_taken_as_the_text_they_are(
    chat: Chat, client: httpx.Client, value: str
) -> None:
    chat.rig.write(TWO_STEPS)
    number = chat.rig.fire(host="gpu-node-01")
    payload = fake_slack.view_submission(
        callback_id="incident.resolve",
        private_metadata=str(number),
        values={"disposition": {"text": {"type": "plain_text_input", "value": value}}},
        user_id="UALICE",
    )
    answer = chat.post(client, fake_slack.interactive_form(payload))

    assert answer.status_code == 200, answer.text
    assert answer.text == ""  # accepted: the dialog closes
    resolved = [e for e in chat.rig.log(number) if e.type == "incident.resolved"]
    assert resolved and value in json.dumps(resolved[-1].data, ensure_ascii=False)


@pytest.mark.parametrize(
    ("text", "said"),
    [
        (f"followup-done #{HUGE}", "which follow-up?"),
        ("followup-done #²", "which follow-up?"),
        (f"show INC-{HUGE}", "which incident?"),
        ("show INC-²", "which incident?"),
        ("show INC-١", "which incident?"),  # an Arabic-Indic 1: a digit to \d, not ours
        (f"ack INC-{HUGE}", "which incident?"),
        (f"silence INC-1 {HUGE}h", "longer than 3650d"),
        ("silence INC-1 ²h", "is not a duration"),
        (f"oncall <@UBOB> {HUGE}h", "longer than 3650d"),
        (f"followup INC-{HUGE} a title", "which incident?"),
        (f"followups INC-{HUGE}", "which incident?"),
        (f"postmortem INC-{HUGE}", "which incident?"),
    ],
)
def test_a_slash_command_with_a_number_that_is_no_id_answers_what_to_type(
    chat: Chat, client: httpx.Client, text: str, said: str
) -> None:
    chat.rig.write(TWO_STEPS)
    chat.rig.fire(host="gpu-node-01")

    answer = chat.command(client, text)  # asserts Slack's 200 with an ephemeral answer

    assert said in answer, answer

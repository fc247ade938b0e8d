"""`/incident postmortem INC-N [zh|en]`: the draft shared as a Markdown file in the card's
thread, through the outbox and the real Slack sender, uploaded with files_upload_v2 to the
fake Slack."""

from __future__ import annotations

import httpx

from tests.chat.slack_rig import CHANNEL, Chat


def test_the_draft_is_shared_as_a_file_in_the_cards_thread(
    chat: Chat, client: httpx.Client
) -> None:
    number = chat.rig.fire(host="gpu-node-01", xid="79")
    chat.send_all()
    (card,) = chat.cards()

    said = chat.command(client, f"postmortem INC-{number} zh")
    assert f"INC-{number}-postmortem.zh.md" in said
    assert chat.send_all() == 0

    (shared,) = chat.slack.files(CHANNEL)
    assert shared.thread_ts == card.ts
    assert shared.filename == f"INC-{number}-postmortem.zh.md"
    assert shared.content is not None
    text = shared.content.decode()
    assert text.startswith(f"# 故障复盘报告：INC-{number} ")
    assert "XID 79（GPU 掉出总线）" in text
    assert "runbook-bot postmortem final" in (shared.comment or "")


def test_the_language_defaults_and_a_bad_one_is_named(chat: Chat, client: httpx.Client) -> None:
    number = chat.rig.fire(host="gpu-node-01", xid="79")
    assert "postmortem.en.md" in chat.command(client, f"postmortem {number}")
    assert "which language?" in chat.command(client, f"postmortem {number} fr")
    assert "INC-99 does not exist" in chat.command(client, "postmortem INC-99")
    chat.send_all()
    assert [f.filename for f in chat.slack.files(CHANNEL)] == [f"INC-{number}-postmortem.en.md"]

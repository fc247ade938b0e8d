"""The fake Slack speaks Slack's protocols well enough for the real clients, unchanged."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator

import httpx
import pytest
from slack_bolt import Ack, App, Respond
from slack_bolt.adapter.socket_mode import SocketModeHandler
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.builtin_handlers import RateLimitErrorRetryHandler
from slack_sdk.signature import SignatureVerifier
from slack_sdk.socket_mode.builtin import SocketModeClient
from slack_sdk.socket_mode.request import SocketModeRequest
from slack_sdk.socket_mode.response import SocketModeResponse

from tests.support import fake_slack
from tests.support.fake_slack import APP_TOKEN, BOT_TOKEN, FakeSlack


@pytest.fixture
def slack() -> Iterator[FakeSlack]:
    with fake_slack.running(usergroups={"S100": ["U100", "U200"]}) as fake:
        yield fake


@pytest.fixture
def web(slack: FakeSlack) -> WebClient:
    return WebClient(token=BOT_TOKEN, base_url=slack.api_url, timeout=5)


def test_update_replaces_the_text_of_the_posted_message(slack: FakeSlack, web: WebClient) -> None:
    blocks = [{"type": "section", "text": {"type": "mrkdwn", "text": "draining"}}]
    posted = web.chat_postMessage(channel="C100", text="draining", blocks=blocks)
    web.chat_postMessage(channel="C100", text="step 1", thread_ts=posted["ts"])
    web.chat_update(channel="C100", ts=posted["ts"], text="drained")

    first, reply = slack.messages("C100")
    assert (first.ts, first.text, first.blocks, first.edits) == (posted["ts"], "drained", blocks, 1)
    assert reply.thread_ts == posted["ts"] and reply.ts > first.ts
    assert [c.method for c in slack.calls()] == ["chat.postMessage"] * 2 + ["chat.update"]
    assert slack.calls("chat.update")[0].headers["authorization"] == f"Bearer {BOT_TOKEN}"


def test_update_of_an_unknown_message_is_message_not_found(web: WebClient) -> None:
    with pytest.raises(SlackApiError) as caught:
        web.chat_update(channel="C100", ts="1.000001", text="x")
    assert caught.value.response["error"] == "message_not_found"


def test_form_bodies_carry_blocks_as_json_strings(slack: FakeSlack, web: WebClient) -> None:
    blocks = [{"type": "divider"}]
    web.api_call("chat.postMessage", data={"channel": "C1", "blocks": json.dumps(blocks)})
    assert slack.messages("C1")[0].blocks == blocks


def test_a_wrong_token_is_invalid_auth(slack: FakeSlack) -> None:
    with pytest.raises(SlackApiError) as caught:
        WebClient(token="xoxb-wrong", base_url=slack.api_url).auth_test()
    assert caught.value.response["error"] == "invalid_auth"
    assert slack.calls("auth.test")[0].error == "invalid_auth"


def test_injected_429_carries_retry_after_once(slack: FakeSlack, web: WebClient) -> None:
    slack.fail("chat.postMessage", status=429, retry_after=7)
    with pytest.raises(SlackApiError) as caught:
        web.chat_postMessage(channel="C100", text="hi")
    assert caught.value.response.status_code == 429
    assert caught.value.response.headers["Retry-After"] == "7"
    assert caught.value.response["error"] == "ratelimited"
    web.chat_postMessage(channel="C100", text="hi")
    assert [c.status for c in slack.calls()] == [429, 200]


def test_sdk_rate_limit_retry_handler_retries_after_an_injected_429(slack: FakeSlack) -> None:
    web = WebClient(token=BOT_TOKEN, base_url=slack.api_url, timeout=5)
    web.retry_handlers.append(RateLimitErrorRetryHandler(max_retry_count=1))
    slack.fail("chat.postMessage", status=429, retry_after=0)
    web.chat_postMessage(channel="C100", text="hi")
    assert [c.status for c in slack.calls("chat.postMessage")] == [429, 200]
    assert [m.text for m in slack.messages("C100")] == ["hi"]


def test_injected_500_surfaces_as_an_api_error(slack: FakeSlack, web: WebClient) -> None:
    slack.fail("users.info", status=500, times=2)
    for _ in range(2):
        with pytest.raises(SlackApiError) as caught:
            web.users_info(user="U100")
        assert caught.value.response.status_code == 500
    assert web.users_info(user="U100")["user"]["name"] == "u100"


def test_channel_rate_limit_counts_calls_that_came_too_fast(
    slack: FakeSlack, web: WebClient
) -> None:
    slack.rate_limit("C100", per_second=20.0)
    web.chat_postMessage(channel="C100", text="1")
    with pytest.raises(SlackApiError):
        web.chat_postMessage(channel="C100", text="2")
    time.sleep(0.06)
    web.chat_postMessage(channel="C100", text="3")
    web.chat_postMessage(channel="C200", text="other channel, not limited")
    assert slack.violations("C100") == 1
    assert [m.text for m in slack.messages("C100")] == ["1", "3"]


def test_usergroup_members_and_unknown_group(web: WebClient) -> None:
    assert web.usergroups_users_list(usergroup="S100")["users"] == ["U100", "U200"]
    with pytest.raises(SlackApiError) as caught:
        web.usergroups_users_list(usergroup="S999")
    assert caught.value.response["error"] == "no_such_subteam"


def test_unknown_method_is_ok_false_with_200(web: WebClient) -> None:
    with pytest.raises(SlackApiError) as caught:
        web.api_call("chat.scheduleMessage", json={"channel": "C1"})
    assert caught.value.response.status_code == 200
    assert caught.value.response["error"] == "unknown_method"


def test_dm_views_ephemeral_and_permalink(slack: FakeSlack, web: WebClient) -> None:
    dm = web.conversations_open(users="U100")["channel"]["id"]
    assert dm.startswith("D") and web.conversations_open(users="U100")["channel"]["id"] == dm
    view = {"type": "modal", "title": {"type": "plain_text", "text": "t"}, "blocks": []}
    view_id = web.views_open(trigger_id="1.2.3", view=view)["view"]["id"]
    web.views_update(view_id=view_id, view={**view, "blocks": [{"type": "divider"}]})
    assert slack.views()[view_id]["blocks"] == [{"type": "divider"}]
    assert web.chat_postEphemeral(channel="C1", user="U100", text="only you")["message_ts"]
    assert slack.ephemerals("C1")[0]["text"] == "only you"
    link = web.chat_getPermalink(channel="C1", message_ts="1700000000.000100")["permalink"]
    assert link.endswith("/archives/C1/p1700000000000100")


def test_incoming_webhook_and_response_url_posts_are_recorded(slack: FakeSlack) -> None:
    hook = httpx.post(f"{slack.url}/services/T000/B000/XXXX", json={"text": "firing"})
    response_url = slack.response_url()
    answered = httpx.post(response_url, json={"text": "done", "replace_original": True})
    assert (hook.text, answered.json()) == ("ok", {"ok": True})
    assert slack.incoming()[0].body == {"text": "firing"}
    assert slack.incoming()[0].path == "/services/T000/B000/XXXX"
    assert slack.responses()[0].path == response_url.rsplit("/", 1)[1]


def test_signed_headers_verify_with_slack_sdk() -> None:
    body = fake_slack.form({"command": "/incident", "text": "open"})
    verifier = SignatureVerifier("s3cret")
    assert verifier.is_valid_request(body, fake_slack.signed_headers("s3cret", body))
    stale = fake_slack.signed_headers("s3cret", body, timestamp=int(time.time()) - 600)
    assert not verifier.is_valid_request(body, stale)
    assert not verifier.is_valid_request(body, fake_slack.signed_headers("other", body))


def test_builtin_socket_mode_client_receives_envelopes_and_acks(
    slack: FakeSlack, web: WebClient
) -> None:
    received: list[SocketModeRequest] = []

    def on_request(client: SocketModeClient, request: SocketModeRequest) -> None:
        received.append(request)
        ack = SocketModeResponse(envelope_id=request.envelope_id, payload={"text": "ok"})
        client.send_socket_mode_response(ack)

    client = SocketModeClient(app_token=APP_TOKEN, web_client=web)
    client.socket_mode_request_listeners.append(on_request)  # type: ignore[arg-type]
    try:
        client.connect()
        assert slack.connected() == 1
        payload = fake_slack.slash_command(text="open", response_url=slack.response_url())
        envelope_id = slack.send_envelope("slash_commands", payload, accepts_response_payload=True)
        ack = slack.wait_ack(envelope_id)
    finally:
        client.close()
    assert ack == {"envelope_id": envelope_id, "payload": {"text": "ok"}}
    assert received[0].type == "slash_commands" and received[0].payload["command"] == "/incident"
    assert slack.calls("apps.connections.open")[0].headers["authorization"] == f"Bearer {APP_TOKEN}"


def test_bolt_socket_mode_handler_acks_a_button_and_responds(slack: FakeSlack) -> None:
    web = WebClient(token=BOT_TOKEN, base_url=slack.api_url, timeout=5)
    app = App(client=web)
    clicked = threading.Event()

    @app.action("approve")
    def approve(ack: Ack, body: dict[str, object], respond: Respond) -> None:
        ack()
        respond(text="approved")
        clicked.set()

    posted = web.chat_postMessage(channel="C100", text="approve drain?")
    payload = fake_slack.block_actions(
        action_id="approve",
        value="run-41",
        response_url=slack.response_url(),
        message=slack.message("C100", posted["ts"]),
    )
    handler = SocketModeHandler(app, APP_TOKEN)
    try:
        handler.connect()
        envelope_id = slack.send_envelope("interactive", payload)
        assert slack.wait_ack(envelope_id) == {"envelope_id": envelope_id}
        assert clicked.wait(5)
    finally:
        handler.close()
    assert slack.responses()[0].body["text"] == "approved"
    assert [c.method for c in slack.calls()] == [
        "auth.test",
        "chat.postMessage",
        "apps.connections.open",
    ]


def test_disconnect_message_makes_the_client_reconnect(slack: FakeSlack, web: WebClient) -> None:
    client = SocketModeClient(app_token=APP_TOKEN, web_client=web)
    client.socket_mode_request_listeners.append(
        lambda c, r: c.send_socket_mode_response({"envelope_id": r.envelope_id})
    )
    try:
        client.connect()
        slack.connected()
        slack.send_disconnect()
        slack.wait_for(lambda: slack.connections() == (1, 2))
        envelope_id = slack.send_envelope("events_api", {"event": {"type": "app_mention"}})
        assert slack.wait_ack(envelope_id) == {"envelope_id": envelope_id}
    finally:
        client.close()
    assert len(slack.calls("apps.connections.open")) == 2


def test_files_upload_v2_shares_the_file_in_a_thread(slack: FakeSlack) -> None:
    web = WebClient(token=BOT_TOKEN, base_url=slack.api_url, timeout=5)
    posted = web.chat_postMessage(channel="C0INCIDENTS", text="card")
    answer = web.files_upload_v2(
        channel="C0INCIDENTS",
        thread_ts=posted["ts"],
        filename="INC-7.md",
        content="# Postmortem\n",
        title="INC-7 postmortem draft",
        initial_comment="the draft",
    )
    (shared,) = slack.files("C0INCIDENTS")
    assert shared.content == b"# Postmortem\n" and shared.thread_ts == posted["ts"]
    assert (shared.title, shared.comment) == ("INC-7 postmortem draft", "the draft")
    assert answer["files"][0]["permalink"].endswith("/INC-7.md")
    with pytest.raises(SlackApiError, match="file_not_found"):
        web.files_completeUploadExternal(files=[{"id": "F404", "title": "x"}])

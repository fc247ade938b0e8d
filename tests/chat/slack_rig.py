"""The bot wired to the fake Slack for the chat tests: settings, sender, bolt app, worker."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import func, select

from bot.chat import slack as slack_chat
from bot.chat.models import OutboxMessage
from bot.chat.slack.app import SlackApp
from bot.chat.slack.sender import SlackSender
from bot.clock import FrozenClock
from bot.db import Database
from bot.sim import SimHandle
from bot.worker import Worker
from tests.runbooks.rig import Rig
from tests.support import fake_slack, working
from tests.support.fake_slack import FakeSlack

CHANNEL = "C0INCIDENTS"
SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
GROUPS = {"S0ONCALL": ["UALICE", "UBOB"], "S0SRE": ["UCAROL"]}
DISRUPTIVE = """\
    id: gpu-xid
    title: Single GPU fault
    version: 1
    match: {alerts: [GPUXIDError]}
    facts:
      node: "{{ labels.Hostname }}"
    steps:
      - id: drain
        title: Drain even past PodDisruptionBudgets
        action: k8s.drain_unsafe
        with: {node: "{{ facts.node }}"}
"""


class Chat:
    """The bot wired to the fake Slack: a rig, the sender, the bolt app, a worker."""

    def __init__(
        self,
        db: Database,
        clock: FrozenClock,
        tmp: Path,
        slack: FakeSlack,
        sim: SimHandle,
        **settings: Any,
    ) -> None:
        self.slack = slack
        self.rig = Rig(
            db,
            clock,
            tmp,
            roles={},
            slack_bot_token=fake_slack.BOT_TOKEN,
            slack_signing_secret=SECRET,
            slack_channel=CHANNEL,
            slack_api_url=slack.api_url,
            slack_role_groups={"responder": ["S0ONCALL"], "second_line": ["S0SRE"]},
            **settings,
        )
        self.settings = self.rig.settings
        api = slack_chat.api(self.settings)
        self.sender = SlackSender(db, self.settings, clock, api)
        self.app = SlackApp(self.settings, db, clock, api)
        self.worker = Worker(db, self.settings, clock, kube_factory=sim.api_client)

    def send_all(self, rounds: int = 200) -> int:
        """Run the sender until the outbox is empty, a clock second per idle round."""
        for _ in range(rounds):
            if not self.sender.run_once():
                if not self.pending():
                    return 0
                self.rig.clock.advance(timedelta(seconds=1))
        return self.pending()

    def pending(self) -> int:
        with self.rig.db.session() as session:
            stmt = select(func.count()).where(OutboxMessage.state == "pending")
            return int(session.scalar(stmt) or 0)

    def work(self) -> None:
        """The worker until it has nothing to do (steps run against the simulator)."""
        for _ in range(20):
            if not working.passed(self.worker):
                return

    def cards(self) -> list[fake_slack.Message]:
        return [m for m in self.slack.messages(CHANNEL) if m.thread_ts is None]

    def thread(self, card: fake_slack.Message) -> list[fake_slack.Message]:
        return [m for m in self.slack.messages(CHANNEL) if m.thread_ts == card.ts]

    def click(
        self, client: httpx.Client, action: str, value: int, user: str, **extra: Any
    ) -> httpx.Response:
        payload = fake_slack.block_actions(
            action_id=action,
            value=str(value),
            response_url=self.slack.response_url(),
            user_id=user,
            user_name=user.lower(),
            channel_id=CHANNEL,
            **extra,
        )
        return self.post(client, fake_slack.interactive_form(payload))

    def command(self, client: httpx.Client, text: str, user: str = "UALICE") -> str:
        """Type `/incident <text>` as `user`; the ephemeral answer, as JSON text."""
        fields = fake_slack.slash_command(
            text=text, response_url=self.slack.response_url(), user_id=user,
            user_name=user.lower(), channel_id=CHANNEL,
        )  # fmt: skip
        answer = self.post(client, fake_slack.form(fields))
        assert answer.status_code == 200, answer.text
        body: dict[str, Any] = answer.json()
        assert body["response_type"] == "ephemeral"
        return json.dumps(body, ensure_ascii=False)

    def post(self, client: httpx.Client, body: bytes, **sign: Any) -> httpx.Response:
        headers = fake_slack.signed_headers(SECRET, body, **sign)
        headers["Content-Type"] = "application/x-www-form-urlencoded"
        return client.post("/slack/events", content=body, headers=headers)

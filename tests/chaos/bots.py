"""Real `runbook-bot serve` processes for the chaos suite: started from a settings file,
killed with SIGKILL (the whole process group: serve and its worker child, as the OOM
killer or a node loss would), started again on the same port, and read through the API;
their settings (the simulator, its BMCs and the fake Slack), and the readers the tests
share (incidents, steps, cards) and the rows they record for docs/reliability.md.

Every wait is bounded; a failure carries the tail of the process's output.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import httpx
import pytest
import yaml
from sqlalchemy import text

from bot.db import Database
from bot.sim import SimHandle
from tests.chat.slack_rig import CHANNEL, SECRET
from tests.runbooks.rig import ROLES
from tests.support import fake_slack, people
from tests.support.alertmanager import free_port
from tests.support.fake_slack import FakeSlack
from tests.support.tcpproxy import TcpProxy

READY_SECONDS = 30.0
SETTLE_SECONDS = 90.0
TOKEN = "chaos-webhook-token"

Record = Callable[..., None]
"""`record(rows)`: the test's rows for docs/reliability.md (tests/chaos/figures.py)."""


@dataclass
class Bot:
    """One `runbook-bot serve` (with its worker child) on a fixed loopback port."""

    name: str
    settings: dict[str, Any]
    workdir: Path
    port: int = field(default_factory=free_port)
    proc: subprocess.Popen[bytes] | None = None
    kills: int = 0
    starts: int = 0
    _outputs: list[IO[bytes]] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        assert self.proc is None or self.proc.poll() is not None, f"{self.name} is running"
        self.workdir.mkdir(parents=True, exist_ok=True)
        config = self.workdir / "settings.yaml"
        config.write_text(
            yaml.safe_dump({**self.settings, "listen_port": self.port}), encoding="utf-8"
        )
        self.starts += 1
        output = (self.workdir / f"serve-{self.starts}.log").open("w+b")
        self._outputs.append(output)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "bot.cli", "--config", str(config), "serve"],
            cwd=self.workdir,
            env={**os.environ, "RUNBOOK_BOT_LOG_LEVEL": "info"},
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: killpg reaches its worker
        )

    def wait_ready(self) -> None:
        deadline = time.monotonic() + READY_SECONDS
        while True:
            assert self.proc is not None
            if self.proc.poll() is not None:
                pytest.fail(f"{self.name} exited:\n{self.log_tail()}", pytrace=False)
            with contextlib.suppress(httpx.TransportError):
                if httpx.get(f"{self.url}/readyz", timeout=2).status_code == 200:
                    return
            if time.monotonic() > deadline:
                pytest.fail(
                    f"{self.name} not ready after {READY_SECONDS:.0f} s\n{self.log_tail()}",
                    pytrace=False,
                )
            time.sleep(0.1)

    def kill(self) -> None:
        """SIGKILL to serve and its worker at once; nothing gets to clean up."""
        assert self.proc is not None
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=10)
        self.kills += 1

    def stop(self) -> None:
        if self.proc is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=10)
        for output in self._outputs:
            output.close()
        self._outputs.clear()

    def log(self) -> str:
        texts = []
        for index, output in enumerate(self._outputs, start=1):
            output.seek(0)
            texts.append(f"--- {self.name} run {index}\n{output.read().decode(errors='replace')}")
        return "\n".join(texts)

    def log_tail(self, lines: int = 60) -> str:
        return "\n".join(self.log().splitlines()[-lines:])

    def log_mark(self) -> int:
        """Where the output ends now: `wait_for_log(..., since=mark)` reads only what follows."""
        return len(self.log().splitlines())

    def wait_for_log(self, pattern: str, *, since: int, what: str) -> str:
        """The first line after `since` matching the regular expression `pattern`."""

        def found() -> str | None:
            lines = self.log().splitlines()[since:]
            return next((line for line in lines if re.search(pattern, line)), None)

        line: str = settle(found, f"{what} (a line matching {pattern!r})", self)
        return line


def steps(client: httpx.Client, number: int) -> dict[str, str]:
    answer = client.get(f"/api/incidents/{number}/steps")
    assert answer.status_code == 200, answer.text
    return {step["step"]: step["state"] for step in answer.json()["steps"]}


def incident(client: httpx.Client, number: int) -> dict[str, Any]:
    answer = client.get(f"/api/incidents/{number}")
    assert answer.status_code == 200, answer.text
    detail: dict[str, Any] = answer.json()
    return detail


def decide_as(bot: Bot, person: str) -> dict[str, str]:
    """The `Authorization` header of a new personal API token of `person`, made in the
    bot's database as `runbook-bot tokens create` makes it: the webhook token decides
    nothing."""
    return people.bearer_at(
        bot.settings["database_url"],
        person,
        roles=bot.settings.get("roles", {}),
        people=bot.settings.get("people", {}),
    )


def api(bot: Bot) -> httpx.Client:
    """A client of the bot's API, with the token its webhook and API want."""
    return httpx.Client(base_url=bot.url, timeout=10, headers={"Authorization": f"Bearer {TOKEN}"})


def settle(
    check: Callable[[], Any],
    what: str,
    bot: Bot,
    timeout: float = SETTLE_SECONDS,
    *,
    detail: Callable[[], Any] | None = None,
) -> Any:
    """Poll `check` until it returns something true, and return that; past `timeout`, fail
    naming `what`, with `detail()` (the state that was waited on) and the bot's output."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            seen = f"\nstate: {detail()}" if detail is not None else ""
            pytest.fail(f"gave up after {timeout:.0f} s waiting for {what}{seen}\n{bot.log_tail()}")
        time.sleep(0.25)


def quiet(db: Database) -> dict[str, int]:
    """What could still post to Slack or act on the cluster: pending outbox rows, leased
    channels, log entries chat has not taken, steps that may run. A duplicate card, page
    or action would come from one of these: once there is none, the counts are final."""
    query = """SELECT 'outbox ' || state, count(*) FROM chat_outbox WHERE state = 'pending'
        GROUP BY state
        UNION ALL SELECT 'channel leased', count(*) FROM chat_channels
            WHERE lease_owner IS NOT NULL HAVING count(*) > 0
        UNION ALL SELECT 'incident log not taken by chat', count(*) FROM incidents
            WHERE log_seq > announced_seq HAVING count(*) > 0
        UNION ALL SELECT 'step ' || state, count(*) FROM step_runs
            WHERE state IN ('proposed', 'approved', 'running') GROUP BY state"""
    with db.session() as session:
        return {what: int(n) for what, n in session.execute(text(query))}


def numbers(client: httpx.Client) -> list[int]:
    answer = client.get("/api/incidents")
    assert answer.status_code == 200, answer.text
    return sorted(int(i["number"]) for i in answer.json()["incidents"])


def card_counts(slack: FakeSlack) -> Counter[int]:
    found: Counter[int] = Counter()
    for card in cards(slack):
        match = re.search(r"\bINC-(\d+)\b", card.text or "")
        assert match, f"a card without an incident reference: {card.text!r}"
        found[int(match.group(1))] += 1
    return found


def bot_settings(
    *,
    db_url: str,
    sim: SimHandle,
    slack: FakeSlack,
    tmp: Path,
    runbook: str | None = None,
    runbooks_dir: Path | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """Settings of a bot on `db_url`, the simulator (Kubernetes and Redfish BMCs) and the
    fake Slack; `runbook` (YAML) becomes its only runbook unless `runbooks_dir` is given."""
    if runbooks_dir is None:
        runbooks_dir = tmp / "runbooks"
        runbooks_dir.mkdir(exist_ok=True)
        (runbooks_dir / "chaos.yaml").write_text(textwrap.dedent(runbook or ""), "utf-8")
    bmc = sim.bmc_settings(tmp / "bmc-password")
    bmc.update(timeout="2s", power_timeout="20s", attempts=2)
    settings: dict[str, Any] = {
        "database_url": db_url,
        "database_connect_timeout": "1s",
        "runbooks_dir": str(runbooks_dir),
        "kubeconfig": str(sim.write_kubeconfig(tmp / "kubeconfig")),
        "roles": ROLES,
        "webhook_token": TOKEN,
        "slack_bot_token": fake_slack.BOT_TOKEN,
        "slack_signing_secret": SECRET,
        "slack_channel": CHANNEL,
        "slack_api_url": slack.api_url,
        "slack_rate": 20.0,
        "slack_timeout": "3s",
        "bmc": bmc,
    }
    settings.update(extra)
    return settings


def through(proxy: TcpProxy, kubeconfig: Path) -> None:
    """Point the kubeconfig's cluster at the proxy instead of the simulator."""
    config = yaml.safe_load(kubeconfig.read_text(encoding="utf-8"))
    for cluster in config["clusters"]:
        cluster["cluster"]["server"] = f"http://127.0.0.1:{proxy.port}"
    kubeconfig.write_text(yaml.safe_dump(config), encoding="utf-8")


def row(fault: str, expected: str, **figures: Any) -> dict[str, Any]:
    return {"fault": fault, "expected": expected, "figures": figures}


def cards(slack: FakeSlack) -> list[fake_slack.Message]:
    """The incident cards: top-level messages in the incidents channel."""
    return [m for m in slack.messages(CHANNEL) if m.thread_ts is None]

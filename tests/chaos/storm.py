"""An alert storm: alerts POSTed to the real Alertmanager (which notifies the bot) and
webhook bodies POSTed straight to the bot, over a fixed span, each alert carrying a `seq`
label so the test can tell afterwards which ones were stored and how often.

Direct posts behave as Alertmanager does: a 5xx or a refused connection is retried (every
0.2 s, bounded by a deadline) until the bot answers 200; every answer is counted.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
from sqlalchemy import text

from bot.db import Database
from tests.support import alertmanager as am
from tests.support.alertmanager import Alertmanager
from tests.support.payloads import alert, iso, notification

RETRY_PAUSE = 0.2
POST_TIMEOUT = 5.0
STORED = """SELECT labels ->> 'seq', count(*) FROM alerts
    WHERE labels ->> 'seq' IS NOT NULL GROUP BY 1"""


def labels(seq: int, host: str) -> dict[str, str]:
    return {
        "alertname": "GPUXIDError",
        "Hostname": host,
        "gpu": str(seq % 8),
        "severity": "critical",
        "seq": str(seq),
    }


@dataclass
class Storm:
    """`am_alerts` through Alertmanager spread over `am_hosts`, `direct_alerts` posted to
    `webhook` in bodies of `per_post` spread over `direct_hosts`, all within `seconds`."""

    manager: Alertmanager | None
    webhook: str
    token: str
    am_alerts: int
    am_hosts: list[str]
    direct_alerts: int
    direct_hosts: list[str]
    seconds: float
    per_post: int = 5
    give_up_after: float = 60.0
    sent_to_am: set[int] = field(default_factory=set)
    acknowledged: set[int] = field(default_factory=set)
    """Seqs of direct posts the bot answered 200 for."""
    statuses: Counter[str] = field(default_factory=Counter)
    """Every answer to a direct post: "200", "503", "refused" (connection refused/reset)."""
    errors: list[str] = field(default_factory=list)
    _threads: list[threading.Thread] = field(default_factory=list)
    started: float = 0.0

    def start(self) -> None:
        self.started = time.monotonic()
        starts_at = datetime.now(UTC) - timedelta(seconds=30)
        self._threads = [
            threading.Thread(target=self._feed_am, args=(starts_at,), daemon=True),
            threading.Thread(target=self._post_direct, args=(starts_at,), daemon=True),
        ]
        for thread in self._threads:
            thread.start()

    def join(self) -> None:
        for thread in self._threads:
            thread.join(timeout=self.seconds + self.give_up_after + 30)
            assert not thread.is_alive(), "a storm thread did not finish"
        assert not self.errors, self.errors[:5]

    @property
    def sent(self) -> set[int]:
        """Every alert that was handed over: accepted by Alertmanager or 200 from the bot."""
        return self.sent_to_am | self.acknowledged

    def _pace(self, index: int, total: int) -> None:
        due = self.started + self.seconds * index / max(total, 1)
        time.sleep(max(0.0, due - time.monotonic()))

    def _feed_am(self, starts_at: datetime) -> None:
        if self.manager is None or not self.am_alerts:
            return
        batch = 25
        batches = range(0, self.am_alerts, batch)
        for index, first in enumerate(batches):
            self._pace(index, len(batches))
            seqs = list(range(first, min(first + batch, self.am_alerts)))
            body = [
                am.api_alert(
                    labels(seq, self.am_hosts[seq % len(self.am_hosts)]),
                    {"summary": f"storm alert {seq}"},
                    starts_at=starts_at,
                )
                for seq in seqs
            ]
            try:
                self.manager.post_alerts(body)
            except (AssertionError, httpx.HTTPError) as exc:
                self.errors.append(f"Alertmanager refused batch {index}: {exc}")
                continue
            self.sent_to_am.update(seqs)

    def _post_direct(self, starts_at: datetime) -> None:
        offset = self.am_alerts
        posts = range(0, self.direct_alerts, self.per_post)
        headers = {"Authorization": f"Bearer {self.token}"}
        with httpx.Client(timeout=POST_TIMEOUT, headers=headers) as client:
            for index, first in enumerate(posts):
                self._pace(index, len(posts))
                host = self.direct_hosts[index % len(self.direct_hosts)]
                seqs = [
                    offset + seq
                    for seq in range(first, min(first + self.per_post, self.direct_alerts))
                ]
                body = notification(
                    [
                        alert(host=host, gpu=seq % 8, starts_at=iso(starts_at), seq=str(seq))
                        for seq in seqs
                    ]
                )
                if self._deliver(client, body):
                    self.acknowledged.update(seqs)

    def _deliver(self, client: httpx.Client, body: dict[str, Any]) -> bool:
        deadline = time.monotonic() + self.give_up_after
        while time.monotonic() < deadline:
            try:
                answer = client.post(self.webhook, json=body)
            except httpx.TransportError:
                self.statuses["refused"] += 1
            else:
                self.statuses[str(answer.status_code)] += 1
                if answer.status_code == 200:
                    return True
                if answer.status_code < 500:
                    self.errors.append(f"the bot refused a storm post: {answer.text}")
                    return False
            time.sleep(RETRY_PAUSE)
        self.errors.append(f"a storm post got no 200 within {self.give_up_after:.0f} s")
        return False


def stored(db: Database) -> dict[int, int]:
    """How many alert rows each storm seq has."""
    with db.session() as session:
        return {int(seq): int(n) for seq, n in session.execute(text(STORED))}

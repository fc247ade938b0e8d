"""Pages to configured targets: queued when a level fires, delivered by the pager against
loopback fakes of PagerDuty and a signed webhook, followed by acknowledge and resolve
events, failures written to the incident log, and a lease that outlives a dead pager."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from bot.clock import FrozenClock
from bot.db import Database
from bot.escalation import targets_from
from bot.escalation.models import PageDelivery
from bot.escalation.pager import Pager
from tests.escalation.rig import EscRig
from tests.support import fake_pagers
from tests.support.fake_pagers import HOOK_SECRET, PD_KEY, FakePagers

pytestmark = pytest.mark.timeout(30)
FAST = {"timeout": 2.0, "attempts": 2, "backoff": 0.01}


@pytest.fixture
def pagers() -> Iterator[FakePagers]:
    with fake_pagers.running() as fake:
        yield fake


@pytest.fixture
def rig(
    db: Database, clock: FrozenClock, pagers: FakePagers, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> EscRig:  # fmt: skip
    monkeypatch.setenv("HOOK_SECRET", HOOK_SECRET)
    (tmp_path / "pd.key").write_text(PD_KEY)
    targets: dict[str, Any] = {
        "pd": {"kind": "pagerduty", "events_url": pagers.url,
               "routing_key_file": str(tmp_path / "pd.key"), **FAST},
        "idc": {"kind": "webhook", "url": f"{pagers.url}/hook", "secret_env": "HOOK_SECRET",
                **FAST},
    }  # fmt: skip
    critical = {
        "levels": [{"after": "0m", "notify": ["oncall", "target:pd"]},
                   {"after": "30m", "notify": ["vendor"]}],
    }  # fmt: skip
    return EscRig(
        db, clock, escalation={"targets": targets, "vendor": ["idc"],
                               "policies": {"critical": critical}},
    )  # fmt: skip


def pager(rig: EscRig, owner: str = "p1") -> Pager:
    return Pager(rig.db, rig.clock, targets_from(rig.settings.escalation.targets), owner=owner)


def deliver_all(rig: EscRig) -> int:
    out, sent = pager(rig), 0
    while out.run_once():
        sent += 1
    return sent


def deliveries(rig: EscRig, number: int) -> list[PageDelivery]:
    with rig.db.session() as session:
        stmt = select(PageDelivery).where(PageDelivery.incident_number == number)
        return list(session.scalars(stmt.order_by(PageDelivery.id)))


def test_a_level_pages_its_targets_and_the_log_says_so(rig: EscRig, pagers: FakePagers) -> None:
    number = rig.open("critical")
    rig.at(0)
    assert deliver_all(rig) == 1
    (call,) = pagers.calls("pagerduty")
    assert call.body["event_action"] == "trigger"
    assert call.body["dedup_key"] == f"runbook-bot-INC-{number}"
    (delivered,) = rig.entries(number, "page.delivered")
    assert delivered.summary.startswith("page delivered to pd")

    rig.at(30)  # nobody acknowledged: the vendor level reaches the IDC's webhook
    assert deliver_all(rig) == 1
    (hook,) = pagers.calls("webhook")
    assert hook.body["ref"] == f"INC-{number}" and hook.body["level"] == 1
    assert "X-Runbook-Bot-Signature".lower() in {k.lower() for k in hook.headers}
    assert [d.state for d in deliveries(rig, number)] == ["delivered", "delivered"]


def test_acknowledge_and_resolve_reach_every_paged_target_once(
    rig: EscRig, pagers: FakePagers
) -> None:
    number = rig.open("critical")
    rig.at(0)
    rig.at(30)
    deliver_all(rig)
    rig.at(31)
    rig.ack(number)
    rig.ack(number)  # a repeat changes nothing
    deliver_all(rig)
    rig.resolve(number)
    deliver_all(rig)

    actions = [c.body["event_action"] for c in pagers.calls("pagerduty")]
    assert actions == ["trigger", "acknowledge", "resolve"]
    assert {c.body["dedup_key"] for c in pagers.calls("pagerduty")} == {f"runbook-bot-INC-{number}"}
    assert [c.body["event"] for c in pagers.calls("webhook")] == [
        "trigger",
        "acknowledge",
        "resolve",
    ]
    notices = [e.summary for e in rig.entries(number, "page.delivered")]
    assert sum("acknowledge notice delivered" in s for s in notices) == 2
    assert sum("resolve notice delivered" in s for s in notices) == 2


def test_a_target_that_keeps_failing_is_reported_on_the_incident(
    rig: EscRig, pagers: FakePagers
) -> None:
    pagers.fail("pagerduty", status=503, times=5)
    number = rig.open("critical")
    rig.at(0)
    deliver_all(rig)

    (failed,) = rig.entries(number, "page.failed")
    assert "page NOT delivered to pd after 2 attempt(s)" in failed.summary
    assert "503" in failed.summary
    assert [d.state for d in deliveries(rig, number)] == ["failed"]
    assert len(pagers.calls("pagerduty")) == 2


def test_a_refused_page_is_not_retried(rig: EscRig, pagers: FakePagers) -> None:
    pagers.fail("pagerduty", status=400, body={"status": "invalid event", "errors": ["x"]})
    number = rig.open("critical")
    rig.at(0)
    deliver_all(rig)
    (failed,) = rig.entries(number, "page.failed")
    assert "after 1 attempt(s)" in failed.summary
    assert len(pagers.calls("pagerduty")) == 1


def test_a_page_whose_pager_died_is_sent_by_another_after_its_lease(
    rig: EscRig, pagers: FakePagers
) -> None:
    number = rig.open("critical")
    rig.at(0)
    dead = pager(rig, "dead")
    claimed = dead.claim()  # it claimed the page and then died before sending
    assert claimed is not None
    assert pager(rig, "p2").run_once() is False  # the lease holds
    rig.clock.advance(timedelta(minutes=6))
    assert pager(rig, "p2").run_once() is True
    assert len(pagers.calls("pagerduty")) == 1
    (row,) = deliveries(rig, number)
    assert (row.state, row.lease_owner, row.attempts) == ("delivered", "p2", 2)


def test_a_target_removed_from_settings_fails_clearly(rig: EscRig) -> None:
    number = rig.open("critical")
    rig.at(0)
    assert Pager(rig.db, rig.clock, {}, owner="p").run_once()
    (failed,) = rig.entries(number, "page.failed")
    assert "no target 'pd' is configured" in failed.summary

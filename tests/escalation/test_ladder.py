"""The escalation ladder with a fake clock: the seed's critical path (0, 15, 45, 75 min),
acknowledgement at each point, the acknowledgement timeout, working hours for warnings,
silence, resolution, reopening, a raised severity and the policy frozen at opening."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import select

from bot.clock import FrozenClock
from bot.db import Database
from bot.errors import ConfigInvalid, TransitionRefused
from bot.escalation.models import IncidentEscalation
from bot.incidents.lifecycle import Status
from bot.incidents.models import Incident
from tests.escalation.rig import EscRig
from tests.support.payloads import alert, notification

ROTATION = {"people": ["slack:U0ALICE", "slack:U0BOB"], "every": "1d", "handover": "09:00"}
SECOND_LINE = ["slack:U0CAROL", "slack:S0SRE"]
"""`role:second_line`: Carol by `roles`, the SRE user group by `slack_role_groups` (Dave
holds the role too but has no Slack id: he is listed as unreachable)."""


@pytest.fixture
def rig(db: Database, clock: FrozenClock) -> EscRig:
    return EscRig(db, clock, escalation={"oncall": ROTATION})


def test_critical_climbs_the_seeds_ladder_at_0_15_45_75_minutes(rig: EscRig) -> None:
    number = rig.open("critical")
    rig.walk(200)

    assert rig.page_minutes(number) == [0, 15, 45, 75, 90, 120]
    levels = [(e.data["round"], e.data["level"]) for e in rig.pages(number)]
    assert levels == [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2)]
    oncall = "slack:U0ALICE"  # 2026-11-29 22:05 UTC: shift 328 since 2026-01-05, even
    assert [e.data["chat"] for e in rig.pages(number)[:3]] == [
        [oncall],
        [oncall, *SECOND_LINE],
        SECOND_LINE,
    ]
    third = rig.pages(number)[2]
    assert "vendor (no vendor/IDC target: set escalation.vendor)" in third.data["unreachable"]
    assert any(u.startswith("dave ") for u in third.data["unreachable"])
    assert "next page at" in rig.pages(number)[0].summary
    assert "next page" not in rig.pages(number)[-1].summary  # the ladder ends there
    assert rig.pending(number) == []
    # Each page is queued to chat once: a mention in the thread and a DM per person.
    assert rig.chat_pages(number)[:4] == [oncall, oncall, *SECOND_LINE]


@pytest.mark.parametrize("ack_at", [1, 16, 46, 76])
def test_an_acknowledgement_at_any_point_stops_the_ladder(rig: EscRig, ack_at: int) -> None:
    number = rig.open("critical")
    rig.walk(ack_at - 1)
    paged_before = len(rig.pages(number))
    rig.at(ack_at)
    rig.ack(number)
    rig.walk(ack_at + 29)  # the acknowledgement timeout (30m) has not run out yet

    assert len(rig.pages(number)) == paged_before
    cancelled = [t for t in rig.timers(number) if t.state == "cancelled"]
    assert len(cancelled) == 1 and cancelled[0].note == "acknowledged by slack:U0ALICE"
    (pending,) = rig.pending(number)
    assert pending.kind == "ack"
    assert rig.minute(pending.due_at) == ack_at + 30


def test_an_acknowledged_incident_left_unresolved_pages_again(rig: EscRig) -> None:
    number = rig.open("critical")
    rig.at(0)
    rig.at(5)
    rig.ack(number, "slack:U0ALICE")
    rig.walk(70)

    pages = rig.pages(number)
    assert [rig.minute(e.at) for e in pages] == [0, 35, 65]
    repage = pages[1]
    assert repage.data["kind"] == "ack"
    assert repage.data["chat"][0] == "slack:U0ALICE"  # the owner first, then level 1
    assert "acknowledgement timeout" in repage.summary
    assert "acknowledged 30m ago by slack:U0ALICE and still not resolved" in repage.summary

    rig.at(66)
    rig.resolve(number)
    rig.walk(200)
    assert len(rig.pages(number)) == 3
    assert rig.pending(number) == []


def test_resolving_cancels_and_nothing_fires_after(rig: EscRig) -> None:
    number = rig.open("critical")
    rig.at(0)
    rig.at(10)
    rig.resolve(number)
    rig.walk(200)
    assert rig.page_minutes(number) == [0]
    assert [t.note for t in rig.timers(number) if t.state == "cancelled"] == [
        "resolved by slack:U0ALICE"
    ]


def test_a_warning_pages_nobody_outside_working_hours(db: Database) -> None:
    # Sunday 2026-11-29 22:05 UTC is Monday 06:05 in Shanghai: before working hours.
    clock = FrozenClock(datetime(2026, 11, 29, 22, 5, tzinfo=UTC))
    rig = EscRig(
        db,
        clock,
        escalation={
            "oncall": ROTATION,
            "working_hours": {"timezone": "Asia/Shanghai", "start": "09:00", "end": "18:00"},
        },
    )
    number = rig.open("warning")
    rig.walk(60 * 4, step=5)  # until 02:05 UTC = 10:05 Shanghai

    opens = datetime(2026, 11, 30, 1, 0, tzinfo=UTC)  # Monday 09:00 Shanghai
    pages = rig.pages(number)
    assert [p.at for p in pages] == [opens, opens + timedelta(minutes=30)]
    assert [p.data["level"] for p in pages] == [0, 1]


def test_a_warning_escalates_only_inside_working_hours(db: Database) -> None:
    # Monday 17:50 Shanghai (09:50 UTC): paged at once; its next level would come at
    # 18:20, after hours, so it waits for Tuesday 09:00.
    clock = FrozenClock(datetime(2026, 11, 30, 9, 50, tzinfo=UTC))
    rig = EscRig(
        db,
        clock,
        escalation={"oncall": ROTATION, "working_hours": {"timezone": "Asia/Shanghai"}},
    )
    number = rig.open("warning")
    rig.walk(60 * 24, step=10)

    tuesday = datetime(2026, 12, 1, 1, 0, tzinfo=UTC)
    assert [p.at for p in rig.pages(number)] == [clock_start(rig), tuesday]


def clock_start(rig: EscRig) -> datetime:
    return rig.start


def test_info_never_pages(rig: EscRig) -> None:
    number = rig.open("info")
    rig.walk(120, step=10)
    assert rig.pages(number) == []
    assert rig.timers(number) == []


def test_the_policy_in_force_at_opening_stays_with_the_incident(rig: EscRig) -> None:
    before = rig.open("critical")
    rig.at(0)
    # The config is edited (second level after 5 minutes) and the bot restarted.
    faster = {"levels": [{"after": "0m", "notify": ["oncall"]},
                         {"after": "5m", "notify": ["role:second_line"]}]}  # fmt: skip
    rig.configure(escalation={"oncall": ROTATION, "policies": {"critical": faster}})
    after = rig.open("critical")
    rig.walk(60)

    assert rig.page_minutes(before)[:3] == [0, 15, 45]  # the seed's ladder, as frozen
    assert rig.page_minutes(after) == [0, 5]  # the new policy, no repeat
    with rig.db.session() as session:
        frozen = session.get(IncidentEscalation, before)
        assert frozen is not None
        assert frozen.policy["policies"]["critical"]["levels"][1]["after"] == "15m"


def test_silence_holds_pages_then_the_ladder_resumes(rig: EscRig) -> None:
    number = rig.open("critical")
    rig.at(0)
    rig.at(10)
    rig.silence(number, timedelta(hours=1))
    rig.walk(69)
    assert rig.page_minutes(number) == [0]
    rig.at(70)  # the silence ends: the level it had reached pages again, and climbs on
    rig.walk(90)
    assert rig.page_minutes(number) == [0, 70, 85]
    assert [e.data["level"] for e in rig.pages(number)] == [0, 0, 1]
    silenced = rig.entries(number, "escalation.silenced")
    assert len(silenced) == 1 and "until" in silenced[0].summary


def test_silence_is_bounded_and_needs_an_active_incident(rig: EscRig) -> None:
    number = rig.open("critical")
    with pytest.raises(TransitionRefused, match="1m to 7d"):
        rig.silence(number, timedelta(days=8))
    rig.resolve(number)
    with pytest.raises(TransitionRefused, match="nothing to silence"):
        rig.silence(number, timedelta(hours=1))


def test_a_reopened_incident_climbs_again_from_the_first_level(rig: EscRig) -> None:
    body = notification([alert(host="gpu-node-09", severity="warning")])
    number = rig.ingest(body).incident
    rig.at(0)  # outside working hours (UTC default 09:00-18:00, Sunday): no page
    cleared = notification([alert(host="gpu-node-09", severity="warning", status="resolved",
                                  ends_at="2026-11-29T22:10:00Z")])  # fmt: skip
    rig.at(5)
    assert rig.ingest(cleared).resolved
    assert rig.pending(number) == []

    critical = notification([alert(host="gpu-node-09", severity="critical",
                                   starts_at="2026-11-29T22:20:00Z")])  # fmt: skip
    rig.at(15)
    result = rig.ingest(critical)
    assert result.incident == number and result.reopened
    rig.walk(31)
    assert rig.page_minutes(number) == [15, 30]


def test_a_raised_severity_starts_the_more_urgent_ladder(rig: EscRig) -> None:
    number = rig.open("warning", host="gpu-node-07")
    rig.at(1)
    assert rig.pages(number) == []  # Sunday night: the warning waits for working hours
    more = notification([alert(host="gpu-node-07", severity="warning"),
                         alert(host="gpu-node-07", severity="critical", gpu=3)])  # fmt: skip
    rig.at(2)
    rig.ingest(more)
    rig.walk(20)
    assert rig.page_minutes(number) == [2, 17]
    with rig.db.session() as session:
        row = session.get(IncidentEscalation, number)
        assert row is not None and row.severity == "critical"


def test_a_timer_never_pages_for_an_incident_that_is_no_longer_open(rig: EscRig) -> None:
    """The safety net under the cancellations: an incident acknowledged without the
    escalation service (an older code path, a hand edit) still is not paged about."""
    number = rig.open("critical")
    rig.at(0)
    with rig.db.transaction() as session:
        incident = session.get(Incident, number)
        assert incident is not None
        incident.status = Status.ACKNOWLEDGED
    rig.walk(30)
    assert rig.page_minutes(number) == [0]
    (timer,) = [t for t in rig.timers(number) if t.level == 1]
    assert timer.state == "cancelled" and timer.note == f"INC-{number} is acknowledged"


def test_people_without_a_chat_address_are_named_as_unreachable(
    db: Database, clock: FrozenClock
) -> None:
    rig = EscRig(db, clock, escalation={"oncall": {"people": ["erin"]}})
    number = rig.open("critical")
    rig.at(0)
    (page,) = rig.pages(number)
    assert page.data["chat"] == []
    assert page.data["unreachable"] == ["erin (on call: no chat address; write people as slack:U…)"]
    assert "paged nobody" in page.summary


def test_without_a_rotation_oncall_means_the_responders(db: Database, clock: FrozenClock) -> None:
    rig = EscRig(db, clock)
    number = rig.open("critical")
    rig.at(0)
    assert rig.pages(number)[0].data["chat"] == ["slack:U0ALICE", "slack:U0BOB"]


def test_without_slack_pages_are_logged_as_unreachable(db: Database, clock: FrozenClock) -> None:
    rig = EscRig(db, clock, slack_bot_token=None, slack_signing_secret=None, slack_channel=None)
    number = rig.open("critical")
    rig.at(0)
    (page,) = rig.pages(number)
    assert page.data["unreachable"] == [
        "slack:U0ALICE (Slack is not configured)",
        "slack:U0BOB (Slack is not configured)",
    ]


@pytest.mark.parametrize(
    ("policy", "message"),
    [
        ({"levels": [{"after": "0m", "notify": ["the boss"]}]}, "is not someone to notify"),
        ({"levels": [{"after": "25h", "notify": ["oncall"]}]}, "from 0m"),
        (
            {
                "levels": [
                    {"after": "0m", "notify": ["oncall"]},
                    {"after": "10s", "notify": ["oncall"]},
                ]
            },  # fmt: skip
            "a later level waits 1m to 24h",
        ),
        ({"levels": [{"after": "0m", "notify": ["target:pd"]}]}, "no target 'pd'"),
        ({"repeat": 10}, "less than or equal to 9"),
        ({"levels": [], "ack_timeout": "30s"}, "ack_timeout: from 1m to 24h"),
    ],
)
def test_bad_policies_are_refused_at_start(
    db: Database, clock: FrozenClock, policy: dict[str, object], message: str
) -> None:
    with pytest.raises(ConfigInvalid, match=message):
        EscRig(db, clock, escalation={"policies": {"critical": policy}})


def test_bad_calendars_and_rotations_are_refused(db: Database, clock: FrozenClock) -> None:
    with pytest.raises(ConfigInvalid, match="unknown timezone 'Mars/Olympus'"):
        EscRig(db, clock, escalation={"working_hours": {"timezone": "Mars/Olympus"}})
    with pytest.raises(ConfigInvalid, match="start 18:00 must be before end 09:00"):
        EscRig(db, clock, escalation={"working_hours": {"start": "18:00", "end": "09:00"}})
    with pytest.raises(ConfigInvalid, match="a shift lasts from 1h to 28d"):
        EscRig(db, clock, escalation={"oncall": {"people": ["slack:U0A"], "every": "10m"}})


def test_every_timer_fires_once_per_pass(rig: EscRig) -> None:
    numbers = [rig.open("critical") for _ in range(60)]  # more than one batch
    assert rig.at(0) == 60
    assert rig.at(0) == 0
    with rig.db.session() as session:
        rows = session.scalars(select(IncidentEscalation.level)).all()
    assert sorted(set(rows)) == [0]
    assert all(len(rig.pages(n)) == 1 for n in numbers)


def test_acknowledging_a_silenced_incident_keeps_the_silence_then_times_out(
    rig: EscRig,
) -> None:
    number = rig.open("critical")
    rig.at(0)
    rig.at(10)
    rig.silence(number, timedelta(hours=1))  # until minute 70
    rig.at(20)
    rig.ack(number)
    (pending,) = rig.pending(number)
    assert pending.kind == "resume" and rig.minute(pending.due_at) == 70
    rig.walk(99)
    assert rig.page_minutes(number) == [0]
    (resumed,) = rig.entries(number, "escalation.resumed")
    assert rig.minute(resumed.at) == 70 and "acknowledged" in resumed.summary
    rig.at(100)  # the acknowledgement timeout, counted from the silence's end
    assert rig.page_minutes(number) == [0, 100]
    assert rig.pages(number)[-1].data["kind"] == "ack"

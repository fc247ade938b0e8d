"""The scenario player's alerts: shaped as Alertmanager 0.25 sends them, each matched by its
shipped runbook through the real ingest, and its fault visible in the simulator."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.alerts.payload import WebhookPayload
from bot.clock import FrozenClock
from bot.db import Database
from bot.incidents.models import DRILL_LABEL
from bot.sim import alerts, faults, running, seed
from bot.sim import play as player
from tests.runbooks.rig import Rig
from tests.support.payloads import fixture

RUNBOOKS = Path(__file__).resolve().parents[2] / "runbooks"


@pytest.mark.parametrize("name", alerts.names())
def test_each_scenario_alert_opens_an_incident_with_its_shipped_runbook(
    db: Database, clock: FrozenClock, tmp_path: Path, name: str
) -> None:
    rig = Rig(db, clock, tmp_path, runbooks_dir=RUNBOOKS)
    body = alerts.firing(name, now=clock.now())

    result = rig.ingest(body)

    assert (result.opened, result.runbook) == (True, alerts.get(name).runbook)
    assert result.counts() == {"new": 1, "repeat": 0, "resolved": 0, "refired": 0}


def test_the_xid_alert_has_the_recorded_notifications_shape_and_labels() -> None:
    recorded = fixture("xid79-firing.json")
    built = alerts.firing("xid79", now=FrozenClock().now())

    assert set(built) == set(recorded)
    assert set(built["alerts"][0]) == set(recorded["alerts"][0])
    assert set(built["alerts"][0]["labels"]) == set(recorded["alerts"][0]["labels"])
    assert built["groupKey"] == recorded["groupKey"]
    assert built["groupLabels"] == recorded["groupLabels"]
    WebhookPayload.model_validate(built)


def test_a_resolved_notification_clears_the_same_alert_instance() -> None:
    firing = alerts.firing("node-down", now=FrozenClock().now())
    cleared = alerts.resolved(firing, now=FrozenClock().now())

    (alert,) = cleared["alerts"]
    assert (cleared["status"], alert["status"]) == ("resolved", "resolved")
    assert alert["fingerprint"] == firing["alerts"][0]["fingerprint"]
    assert alert["startsAt"] == firing["alerts"][0]["startsAt"]
    assert alert["endsAt"] != alerts.FIRING_ENDS_AT


def test_a_drill_alert_carries_the_label_the_bot_reads_and_its_own_group() -> None:
    real = alerts.firing("xid79", now=FrozenClock().now())
    drill = alerts.firing("xid79", now=FrozenClock().now(), node="gpu-node-07", drill="d1")

    labels = drill["alerts"][0]["labels"]
    assert alerts.DRILL_LABEL == DRILL_LABEL
    assert (labels[DRILL_LABEL], labels["Hostname"]) == ("d1", "gpu-node-07")
    assert drill["groupKey"] != real["groupKey"]
    assert drill["alerts"][0]["fingerprint"] != real["alerts"][0]["fingerprint"]


def test_an_unknown_scenario_names_the_ones_there_are() -> None:
    with pytest.raises(ValueError, match="no scenario 'fire'; choose one of xid79, node-down"):
        player.expand("fire")
    with pytest.raises(ValueError, match="overheating, row-cooling$"):
        player.expand("fire")
    assert player.expand("row-cooling") == ["row-cooling"]
    assert player.expand("all") == alerts.names()  # the five; a hot row is played alone
    assert player.expand("none") == []


def test_each_fault_shows_in_the_simulator_as_its_runbook_will_find_it() -> None:
    with running(seed(grace_seconds=1, startup_seconds=0.1), time_scale=0.02) as sim:
        for name in alerts.names():
            faults.inject(sim, name)
        firing = player.firing(sim, "xid79", FrozenClock().now())

        machines = {node: sim.cluster.machine(node) for node in sim.cluster.machines}
        xid = machines["gpu-node-02"].gpus[5]
        assert not xid.present
        assert firing["alerts"][0]["labels"]["UUID"] == xid.uuid
        assert machines["gpu-node-04"].power in ("PoweringOff", "Off")
        assert [p.up for p in machines["gpu-node-03"].ib_ports if p.hca == alerts.HCA] == [False]
        assert machines["gpu-node-01"].gpus[3].temperature == alerts.HOT
        (event,) = sim.cluster.objects("Event", "ml")
        assert (event["type"], event["reason"]) == ("Warning", faults.MOUNT_FAILED)
        assert event["involvedObject"]["name"] == "trainer-0"  # the trainer on gpu-node-01
        assert alerts.STORAGE in event["message"]


def test_the_commands_offer_exactly_the_scenarios_the_player_has() -> None:
    from bot.cli import demo, drill

    assert list(drill.SCENARIOS) == alerts.names()
    assert [*alerts.names(), *alerts.domain_names(), "all", "none"] == demo.CHOICES

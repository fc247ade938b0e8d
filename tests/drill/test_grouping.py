"""Drill alerts (label `runbook_bot_drill`) open incidents of their own, marked "[DRILL]":
they never join a real incident, a real alert never joins them, and a rehearsed fault is
no real fault in a node's history."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

from bot.clock import FrozenClock
from bot.db import Database
from bot.incidents import history
from bot.incidents import service as incidents
from bot.sim import alerts
from tests.runbooks.rig import Rig

RUNBOOKS = Path(__file__).resolve().parents[2] / "runbooks"


def _rig(db: Database, clock: FrozenClock, tmp_path: Path) -> Rig:
    return Rig(db, clock, tmp_path, runbooks_dir=RUNBOOKS)


def _incident(db: Database, number: int) -> Any:
    with db.session() as session:
        return incidents.get(session, number)


def test_a_drill_on_a_node_with_a_real_incident_opens_its_own_drill_incident(
    db: Database, clock: FrozenClock, tmp_path: Path
) -> None:
    rig = _rig(db, clock, tmp_path)
    real = rig.ingest(alerts.firing("xid79", now=clock.now()))
    clock.advance(timedelta(minutes=1))
    body = alerts.firing("xid79", now=clock.now(), drill="xid79-1")

    drill = rig.ingest(body)
    cleared = rig.ingest(alerts.resolved(body, now=clock.now()))

    assert (drill.opened, drill.runbook) == (True, "gpu-xid")
    assert drill.incident != real.incident
    assert cleared.incident == drill.incident
    opened = _incident(db, drill.incident)
    assert (opened.drill, opened.title) == ("xid79-1", "[DRILL] gpu-node-02 GPU 5 XID 79")
    assert "[DRILL]" in rig.log(drill.incident)[0].summary
    untouched = _incident(db, real.incident)
    assert (untouched.drill, untouched.status, untouched.alerts_cleared_at) == (None, "open", None)
    assert rig.types(real.incident).count("alert.firing") == 1
    assert "alert.resolved" not in rig.types(real.incident)


def test_a_real_alert_of_the_same_group_never_joins_an_open_drill(
    db: Database, clock: FrozenClock, tmp_path: Path
) -> None:
    rig = _rig(db, clock, tmp_path)
    drill = rig.ingest(alerts.firing("node-down", now=clock.now(), drill="nd-1"))
    # The same Alertmanager group key as the drill's, as a careless relabel might send it.
    real_body = alerts.firing("node-down", now=clock.now())
    real_body["groupKey"] = alerts.firing("node-down", now=clock.now(), drill="nd-1")["groupKey"]

    real = rig.ingest(real_body)

    assert real.opened and real.incident != drill.incident
    assert _incident(db, real.incident).drill is None


def test_a_notification_mixing_drill_and_real_alerts_is_split_between_two_incidents(
    db: Database, clock: FrozenClock, tmp_path: Path
) -> None:
    rig = _rig(db, clock, tmp_path)
    mixed = alerts.firing("ib-partition", now=clock.now())
    drill_alert = alerts.firing("ib-partition", now=clock.now(), drill="ib-1")["alerts"][0]
    mixed["alerts"].append(drill_alert)

    result = rig.ingest(mixed)

    assert result.opened
    assert _incident(db, result.incident).drill is None
    assert rig.types(result.incident).count("alert.firing") == 1
    with db.session() as session:
        (other,) = [i for i in incidents.list_incidents(session) if i.number != result.incident]
    assert other.drill == "ib-1"
    assert rig.types(other.number).count("alert.firing") == 1


def test_a_rehearsed_xid_counts_in_its_own_drill_but_never_in_a_real_nodes_history(
    db: Database, clock: FrozenClock, tmp_path: Path
) -> None:
    rig = _rig(db, clock, tmp_path)
    rig.ingest(alerts.firing("xid79", now=clock.now(), drill="xid-9"))
    since = clock.now() - timedelta(days=7)

    assert history.alerts_on_node(db, "gpu-node-02", since) == []
    (seen,) = history.alerts_on_node(db, "gpu-node-02", since, drill="xid-9")
    assert seen["alertname"] == "GPUXIDError"
    assert history.alerts_on_node(db, "gpu-node-02", since, drill="another") == []

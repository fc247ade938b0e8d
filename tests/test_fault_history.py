"""gpu.fault_history over alerts that really went through the webhook into the database
(SQLite and PostgreSQL): the seed's ">= 2 drops of one card in a week -> RMA"."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import httpx
import pytest

from bot.actions import ActionContext, execute, registry
from bot.clock import FrozenClock
from bot.config import load_settings
from bot.db import Database
from bot.incidents import history
from tests.support.payloads import alert, notification, resolved

NOW = datetime(2026, 11, 29, 23, 0, tzinfo=UTC)
UUID5 = "GPU-66486582-0000-0000-0000-000000000005"


def _fire(client: httpx.Client, starts: str, ends: str | None = None, **labels: Any) -> None:
    firing = alert(starts_at=starts, **labels)
    response = client.post("/webhooks/alertmanager", json=notification([firing]))
    assert response.status_code == 200, response.text
    if ends:
        done = resolved(firing, ends_at=ends)
        assert client.post("/webhooks/alertmanager", json=notification([done])).status_code == 200


def _history(db: Database, **raw: Any) -> Any:
    ctx = ActionContext(
        actor="alice",
        settings=load_settings(),
        clock=FrozenClock(NOW),
        alert_history=lambda node, since: history.alerts_on_node(db, node, since),
    )
    return execute(registry.get("gpu.fault_history"), raw, ctx).result


def test_two_drops_of_one_card_within_a_week_mean_rma(client: httpx.Client, db: Database) -> None:
    # Drop one: XID 79 on gpu-node-02 GPU 5, resolved; drop two, four days later, reopens
    # or opens an incident: either way it is a second firing episode.
    _fire(client, "2026-11-25T03:00:00Z", "2026-11-25T05:00:00Z", xid="79", UUID=UUID5)
    _fire(client, "2026-11-29T02:10:00Z", xid="79", UUID=UUID5)
    # Noise that must not count: another node, another GPU, a job's own XID 13.
    _fire(client, "2026-11-28T01:00:00Z", host="gpu-node-03", xid="79")
    _fire(client, "2026-11-28T01:00:00Z", gpu=3, xid="79", alertname="GPUXIDError3")
    _fire(client, "2026-11-28T04:00:00Z", xid="13", UUID=UUID5, alertname="GPUXIDApp")

    result = _history(db, node="gpu-node-02", uuid=UUID5)

    assert result.ok and result.rma is True
    assert result.drops == 2
    assert [(f.xid, f.gpu, f.fault_class) for f in result.faults] == [
        (79, "5", "fallen_off_bus"),
        (79, "3", "fallen_off_bus"),  # the node's other GPU: listed, not this card's
        (13, "5", "application"),
        (79, "5", "fallen_off_bus"),
    ]
    assert result.card_faults == 3  # two drops and the application XID on this card
    assert [h.rule for h in result.repeats] == ["card_drops"]
    assert "RMA" in result.summary


def test_drops_more_than_a_week_apart_are_not_an_rma(client: httpx.Client, db: Database) -> None:
    _fire(client, "2026-11-20T03:00:00Z", "2026-11-20T04:00:00Z", xid="79", UUID=UUID5)
    _fire(client, "2026-11-29T02:10:00Z", xid="79", UUID=UUID5)

    result = _history(db, node="gpu-node-02", gpu=5, window="30d")

    assert result.ok and result.rma is False
    assert result.drops == 1
    assert len(result.faults) == 2  # both within the 30 days asked for
    assert "1 drop in a week" in result.summary


def test_the_card_is_followed_by_uuid_across_slots(client: httpx.Client, db: Database) -> None:
    # The same card (UUID) reported as GPU 5 and, after a reseat, as GPU 2.
    _fire(client, "2026-11-26T03:00:00Z", "2026-11-26T04:00:00Z", xid="79", UUID=UUID5)
    _fire(client, "2026-11-29T02:10:00Z", gpu=2, xid="48", UUID=UUID5, alertname="GPUXIDErr")

    by_uuid = _history(db, node="gpu-node-02", uuid=UUID5)
    by_slot = _history(db, node="gpu-node-02", gpu=5)

    assert by_uuid.rma is True and by_uuid.drops == 2
    assert by_slot.rma is False and by_slot.drops == 1


def test_a_node_with_no_history_has_no_faults(client: httpx.Client, db: Database) -> None:
    result = _history(db, node="gpu-node-04", gpu=0)
    assert result.ok and result.faults == [] and result.rma is False
    assert result.summary.startswith("0 XID faults on gpu-node-04 in 7d")


def test_without_the_incident_database_it_says_so() -> None:
    ctx = ActionContext(actor="alice", settings=load_settings(), clock=FrozenClock(NOW))
    result = execute(registry.get("gpu.fault_history"), {"node": "gpu-node-02"}, ctx).result
    assert result.ok is False
    assert "needs the incident database" in result.summary


@pytest.mark.parametrize(
    "raw, fragment",
    [
        ({"node": "gpu-node-02", "uuid": "5; rm -rf /"}, "uuid="),
        ({"node": "gpu-node-02", "window": "200d"}, "window="),
        ({"node": "Bad_Node"}, "node="),
    ],
)
def test_bad_parameters_are_refused_before_anything_runs(
    raw: dict[str, Any], fragment: str
) -> None:
    from bot.errors import ParamsInvalid

    with pytest.raises(ParamsInvalid, match=fragment):
        registry.get("gpu.fault_history").parse(raw)

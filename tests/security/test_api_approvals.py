"""The two-person rule holds on the HTTP API as it does in Slack and the console
(tests/chat/test_slack.py, tests/console/test_decisions.py, tests/runbooks/test_approvals.py):
one responder cannot approve a disruptive step alone, however they spell their name."""

from __future__ import annotations

from pathlib import Path

import httpx

from bot.clock import FrozenClock
from bot.db import Database
from tests.runbooks.rig import Rig
from tests.support import server

TOKEN = "api-t0ken"
POWER_FIRST = """\
    id: node-down
    title: t
    version: 1
    match: {alerts: [GPUXIDError]}
    steps:
      - id: power
        title: Power cycle
        action: bmc.power_cycle
        with: {node: "{{ labels.Hostname }}"}
"""


def test_one_responder_cannot_approve_a_disruptive_step_alone_through_the_api(
    db: Database, clock: FrozenClock, tmp_path: Path
) -> None:
    rig = Rig(db, clock, tmp_path, webhook_token=TOKEN)
    rig.write(POWER_FIRST)
    number = rig.fire()
    url = f"/api/incidents/INC-{number}/steps/power/approve"
    auth = {"Authorization": f"Bearer {TOKEN}"}

    with (
        server.running(rig.settings, db, clock, catalog=rig.catalog()) as base,
        httpx.Client(base_url=base, timeout=10, headers=auth) as client,
    ):
        first = client.post(url, json={"as": "alice"})
        again = client.post(url, json={"as": "alice"})
        padded = client.post(url, json={"as": "  alice "})
        shouted = client.post(url, json={"as": "ALICE"})
        nobody = client.post(url, json={"as": "mallory"})
        unsigned = client.post(url, json={"as": "bob"}, headers={"Authorization": "Bearer x"})

    assert (first.status_code, first.json()["state"]) == (200, "awaiting_approval")
    assert first.json()["approvals_required"] == 2
    assert again.status_code == 409 and "already approved" in again.json()["error"]
    assert padded.status_code == 409 and "already approved" in padded.json()["error"]
    assert shouted.status_code == 409, shouted.text
    assert nobody.status_code == 409, nobody.text
    assert unsigned.status_code == 401
    assert rig.approvals(number, "power") == ["alice"]
    assert rig.runs(number)["power"].state == "awaiting_approval"

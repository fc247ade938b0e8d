"""Splitting a domain incident: only a person with a role decides it, through the CLI or
the API; each node gets an incident of its own that correlation never merges back."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from sqlalchemy import select

from bot.clock import FrozenClock
from bot.config import Settings, load_settings
from bot.db import Database
from bot.escalation.models import EscalationTimer
from bot.runbooks.models import IncidentRunbook
from tests.alerts.fleet import Fleet, node
from tests.runbooks.rig import ROLES
from tests.support import server
from tests.support.cli import Run
from tests.support.payloads import notification
from tests.support.people import bearer

ROW = [node("a", i) for i in range(4)]


@pytest.fixture
def fleet(db: Database, clock: FrozenClock, tmp_path: Path) -> Fleet:
    return Fleet(db, clock, tmp_path)


@pytest.fixture
def cli(on_db: str, fleet: Fleet, monkeypatch: pytest.MonkeyPatch) -> Fleet:
    monkeypatch.setenv("RUNBOOK_BOT_ROLES", '{"alice": ["responder"], "mallory": []}')
    monkeypatch.setenv("RUNBOOK_BOT_TOPOLOGY", '{"levels": []}')
    return fleet


def _row_incident(fleet: Fleet) -> int:
    result = fleet.post(fleet.hot(ROW, severity="critical"), alertname="GPUTemperatureHigh")
    assert fleet.incident(result.incident).domain == "row/a"
    return result.incident


def test_a_responder_splits_a_node_out_into_its_own_incident_from_the_cli(
    cli: Fleet, run: Run, db: Database
) -> None:
    fleet = cli
    number = _row_incident(fleet)

    code, out, err = run(
        "incidents", "split", f"INC-{number}", "--nodes", ROW[1], "--as", "alice",
        "--reason", "its own fan failed",
    )  # fmt: skip

    assert (code, err) == (0, "")
    (split,) = [i for i in fleet.incidents() if i.number != number]
    assert out == f"INC-{number}: split {ROW[1]} -> INC-{split.number}\n"
    assert (split.scope, split.correlation_key, split.status) == ("node", None, "open")
    assert fleet.hosts(split.number) == [ROW[1]]
    assert fleet.hosts(number) == [ROW[0], ROW[2], ROW[3]]
    assert fleet.incident(number).title == "Overheating: 3 nodes of row/a"
    entry = fleet.entries(number, "incident.split")[0]
    assert entry["nodes"] == [ROW[1]] and entry["into"] == [f"INC-{split.number}"]
    assert entry["reason"] == "its own fan failed"
    assert entry["by"]["person"] == "alice" and entry["by"]["channel"] == "cli"
    opened = fleet.entries(split.number, "incident.opened")[0]
    assert (opened["split_from"], opened["by"]["person"]) == (f"INC-{number}", "alice")
    with db.session() as session:
        frozen = session.get(IncidentRunbook, split.number)
        assert frozen is not None and frozen.runbook_id == "overheating"
        assert frozen.proposed_at is None  # the worker proposes its steps
        assert frozen.facts == {"node": ROW[1]}
        timers = session.scalars(
            select(EscalationTimer.state).where(EscalationTimer.incident_number == split.number)
        ).all()
        assert timers == ["pending"]
    # the split node's next alert stays with it; another node's joins the row's
    again = fleet.post([fleet.alert(ROW[1], "GPUTemperatureHigh", gpu="3")])
    other = fleet.post([fleet.alert(node("a", 9), "GPUTemperatureHigh")])
    assert (again.incident, other.incident) == (split.number, number)
    fleet.propose()
    assert fleet.states(split.number)["facility"] == "skipped"  # a node incident's plan


def test_a_split_without_a_role_or_by_an_unknown_person_is_refused(cli: Fleet, run: Run) -> None:
    fleet = cli
    number = _row_incident(fleet)

    no_role = run("incidents", "split", f"INC-{number}", "--nodes", ROW[1], "--as", "mallory")
    unknown = run("incidents", "split", f"INC-{number}", "--nodes", ROW[1], "--as", "eve")

    assert no_role[0] != 0 and "mallory has no role" in no_role[2]
    assert unknown[0] == 2 and "'eve' is not a person" in unknown[2]
    assert len(fleet.incidents()) == 1
    assert fleet.entries(number, "incident.split") == []


def test_a_split_naming_a_node_the_incident_lacks_or_every_node_says_what_to_send(
    cli: Fleet, run: Run
) -> None:
    fleet = cli
    number = _row_incident(fleet)

    stranger = run("incidents", "split", f"INC-{number}", "--nodes", "gpu-z-01", "--as", "alice")
    everyone = run("incidents", "split", f"INC-{number}", "--nodes", ",".join(ROW), "--as", "alice")

    assert stranger[0] != 0 and "has no alerts of gpu-z-01" in stranger[2]
    assert ROW[0] in stranger[2]
    assert everyone[0] != 0 and "leave at least one" in everyone[2]
    assert len(fleet.incidents()) == 1


@dataclass
class Live:
    client: httpx.Client
    settings: Settings


@pytest.fixture
def live(fleet: Fleet, db: Database, clock: FrozenClock) -> Iterator[Live]:
    """The app on loopback with the fleet's runbooks and topology; the client decides as
    bob (a responder)."""
    settings = load_settings(
        database_url=db.url,
        roles={**ROLES, "mallory": []},
        topology=fleet.settings.topology.model_dump(mode="json"),
        runbooks_dir=fleet.dir,
    )
    snapshot = fleet.snapshot
    assert snapshot is not None
    with (
        server.running(
            settings, db, clock, catalog=fleet.catalog(), topology=lambda: snapshot
        ) as url,
        httpx.Client(base_url=url, timeout=10) as client,
    ):
        client.headers.update(bearer(db, settings, "bob"))
        yield Live(client, settings)


def test_through_the_webhook_a_row_is_one_incident_and_the_api_splits_it_as_the_token_owner(
    live: Live, fleet: Fleet, db: Database
) -> None:
    client = live.client
    body = notification(fleet.hot(ROW), group={"alertname": "GPUTemperatureHigh"})
    posted = client.post("/webhooks/alertmanager", json=body, headers={"Authorization": ""})
    assert posted.status_code == 200, posted.text
    number = int(posted.json()["incident"].removeprefix("INC-"))
    shown = client.get(f"/api/incidents/{number}").json()
    assert (shown["scope"], shown["domain"], shown["merged_into"]) == ("domain", "row/a", None)

    answer = client.post(
        f"/api/incidents/{number}/split", json={"nodes": [ROW[2]], "reason": "bad fan"}
    )

    assert answer.status_code == 200, answer.text
    into = answer.json()["into"][ROW[2]]
    assert answer.json()["incident"] == f"INC-{number}"
    entry = fleet.entries(number, "incident.split")[0]
    assert entry["by"] == {"person": "bob", "channel": "api", "via": entry["by"]["via"]}
    assert fleet.hosts(int(into.removeprefix("INC-"))) == [ROW[2]]


def test_the_api_refuses_a_split_by_a_person_without_a_role_and_a_body_naming_someone(
    live: Live, fleet: Fleet, db: Database
) -> None:
    number = _row_incident(fleet)
    client = live.client

    no_role = client.post(
        f"/api/incidents/{number}/split",
        json={"nodes": [ROW[2]]},
        headers=bearer(db, live.settings, "mallory"),
    )
    named = client.post(f"/api/incidents/{number}/split", json={"nodes": [ROW[2]], "as": "carol"})
    empty = client.post(f"/api/incidents/{number}/split", json={})

    assert no_role.status_code == 409 and "mallory has no role" in no_role.json()["error"]
    assert named.status_code == 400 and 'drop "as"' in named.json()["error"]
    assert empty.status_code == 400 and empty.json()["field"] == "nodes"
    assert len(fleet.incidents()) == 1

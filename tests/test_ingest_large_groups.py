"""A storm's group of hundreds of alerts: every alert stored and named in the log, in few
entries, and the chain still verifies (the webhook, on every backend)."""

from __future__ import annotations

from collections import Counter

import httpx

from bot.db import Database
from bot.incidents import log, service
from bot.incidents.models import LogEntry
from tests.support.payloads import alert, notification, resolved
from tests.support.rows import counts, verifies

NODES = 250


def post(client: httpx.Client, body: dict[str, object]) -> dict[str, object]:
    response = client.post("/webhooks/alertmanager", json=body)
    assert response.status_code == 200, response.text
    answer: dict[str, object] = response.json()
    return answer


def row_overheats() -> list[dict[str, object]]:
    return [
        alert(host=f"gpu-node-{n:04d}", gpu=0, alertname="GPUHighTemperature", severity="warning")
        for n in range(NODES)
    ]


def group_of(alerts: list[dict[str, object]]) -> dict[str, object]:
    return notification(alerts, group={"alertname": "GPUHighTemperature"})


def alert_entries(db: Database, kind: str) -> list[LogEntry]:
    with db.session() as session:
        return [entry for entry in log.entries(session, 1) if entry.type == kind]


def named(entries: list[LogEntry]) -> Counter[str]:
    """Fingerprints the entries name, whether one per entry or listed."""
    found: Counter[str] = Counter()
    for entry in entries:
        listed = entry.data.get("alerts") or [entry.data]
        found.update(item["fingerprint"] for item in listed)
    return found


def labels_logged(entries: list[LogEntry]) -> dict[str, dict[str, str]]:
    """Fingerprint -> the labels the log holds for it (shared ones | its own)."""
    return {
        item["fingerprint"]: {**entry.data["labels"], **item["labels"]}
        for entry in entries
        for item in entry.data["alerts"]
    }


def test_a_group_of_many_alerts_is_stored_whole_and_logged_in_entries_of_a_hundred(
    client: httpx.Client, db: Database
) -> None:
    alerts = row_overheats()

    answer = post(client, group_of(alerts))

    assert answer["alerts"] == {"new": NODES, "repeat": 0, "resolved": 0, "refired": 0}
    assert counts(db)["alerts"] == NODES
    firing = alert_entries(db, "alert.firing")
    assert [entry.data["count"] for entry in firing] == [100, 100, 50]
    assert named(firing) == Counter(a["fingerprint"] for a in alerts)
    assert labels_logged(firing) == {a["fingerprint"]: a["labels"] for a in alerts}
    assert firing[0].data["labels"]["alertname"] == "GPUHighTemperature"  # said once
    assert "alertname" not in firing[0].data["alerts"][0]["labels"]
    assert firing[0].summary.startswith("GPUHighTemperature firing: 100 alerts: gpu-node-0000")
    assert firing[0].summary.endswith("and 97 more")
    assert verifies(db, 1)


def test_repeats_of_a_large_group_log_nothing_and_its_resolution_names_every_alert(
    client: httpx.Client, db: Database
) -> None:
    alerts = row_overheats()
    post(client, group_of(alerts))
    logged = counts(db)["log"]

    repeat = post(client, group_of(alerts))
    assert repeat["alerts"] == {"new": 0, "repeat": NODES, "resolved": 0, "refired": 0}
    assert counts(db)["log"] == logged

    half = [resolved(a) for a in alerts[: NODES // 2]] + alerts[NODES // 2 :]
    answer = post(client, group_of(half))

    assert answer["alerts"] == {"new": 0, "repeat": NODES // 2, "resolved": NODES // 2,
                                "refired": 0}  # fmt: skip
    gone = alert_entries(db, "alert.resolved")
    assert named(gone) == Counter(a["fingerprint"] for a in alerts[: NODES // 2])
    assert [entry.data["count"] for entry in gone] == [100, 25]
    with db.session() as session:
        newest = log.entries(session, 1)[-2:]
    assert [e.seq for e in newest] == [e.seq for e in gone]  # half still fire: no more
    assert verifies(db, 1)


def test_a_few_alerts_still_get_one_entry_each(client: httpx.Client, db: Database) -> None:
    alerts = row_overheats()[:3]

    post(client, group_of(alerts))

    firing = alert_entries(db, "alert.firing")
    assert [entry.data["fingerprint"] for entry in firing] == [a["fingerprint"] for a in alerts]
    assert verifies(db, 1)


def test_the_same_alert_twice_in_one_notification_is_one_row(
    client: httpx.Client, db: Database
) -> None:
    alerts = row_overheats()[:20]
    first = alerts[0]

    post(client, group_of([*alerts, first]))
    gone = resolved(first)
    post(client, group_of([gone, *alerts[1:], gone]))

    with db.session() as session:
        rows = service.alerts_of(session, 1)
    assert len(rows) == 20
    mine = next(row for row in rows if row.fingerprint == first["fingerprint"])
    assert (mine.status, mine.receive_count) == ("resolved", 4)  # every copy counted
    assert named(alert_entries(db, "alert.resolved")) == Counter([first["fingerprint"]])
    assert verifies(db, 1)

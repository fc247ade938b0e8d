"""`runbook-bot demo --scenario row-cooling`: the demo's nodes carry topology labels (two
rows of two), row a's air conditioning fails, and its 18 alerts (one BMC alarm per machine,
one per GPU) are one incident for the row, whose runbook takes the row branch.

Run as a subprocess from the repository root, read over HTTP only: the bot's API with the
webhook token and a personal token, the simulator's Kubernetes API with the kubeconfig the
demo wrote.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from bot.sim import alerts
from bot.sim.fleet import LEAF, PDU, RACK, ROW
from tests.demo.running import demo
from tests.sim.waiting import eventually

pytestmark = pytest.mark.timeout(180)
ROW_A = ["gpu-node-01", "gpu-node-02"]


def _get(client: httpx.Client, path: str) -> dict[str, Any]:
    response = client.get(path)
    assert response.status_code == 200, f"GET {path}: {response.status_code} {response.text}"
    body: dict[str, Any] = response.json()
    return body


def _states(client: httpx.Client, ref: str) -> dict[str, str]:
    return {s["step"]: s["state"] for s in _get(client, f"/api/incidents/{ref}/steps")["steps"]}


def _cluster(folder: Path) -> httpx.Client:
    config = yaml.safe_load((folder / "kubeconfig").read_text(encoding="utf-8"))
    server = config["clusters"][0]["cluster"]["server"]
    token = config["users"][0]["user"]["token"]
    return httpx.Client(base_url=server, headers={"Authorization": f"Bearer {token}"}, timeout=10)


def test_a_hot_row_is_one_domain_incident_whose_row_branch_cordons_both_machines(
    tmp_path: Path,
) -> None:
    with demo(
        tmp_path, "--scenario", "row-cooling", "--delay", "1s", "--after", "start"
    ) as running:
        assert running.said("scenario row-cooling in 1s") == (
            f"{alerts.DOMAIN_SCENARIOS['row-cooling'].what}; BMCTemperatureHigh and "
            "GPUTemperatureHigh (critical) -> runbook overheating"
        )
        with _cluster(running.folder) as cluster:
            nodes = {n["metadata"]["name"]: n for n in _get(cluster, "/api/v1/nodes")["items"]}
            labels = {
                name: {k: node["metadata"]["labels"][k] for k in (ROW, RACK, LEAF, PDU)}
                for name, node in nodes.items()
            }
            assert labels == {
                "gpu-node-01": {ROW: "a", RACK: "a1", LEAF: "ib-leaf-01", PDU: "pdu-a1"},
                "gpu-node-02": {ROW: "a", RACK: "a1", LEAF: "ib-leaf-01", PDU: "pdu-a1"},
                "gpu-node-03": {ROW: "b", RACK: "b1", LEAF: "ib-leaf-02", PDU: "pdu-b1"},
                "gpu-node-04": {ROW: "b", RACK: "b1", LEAF: "ib-leaf-02", PDU: "pdu-b1"},
            }

            with running.client() as client:
                (row,) = eventually(
                    lambda: _get(client, "/api/incidents")["incidents"],
                    timeout=30,
                    what="the row's incident",
                )
                ref = row["id"]
                # Both notifications landed before the first decision is asked for.
                facility = eventually(
                    lambda: _states(client, ref).get("facility") == "awaiting_approval",
                    timeout=30,
                    what="the facility step asking",
                )
                assert facility
                incident = _get(client, f"/api/incidents/{ref}")
                assert (incident["scope"], incident["domain"]) == ("domain", "row/a")
                assert (incident["severity"], incident["title"]) == (
                    "critical",
                    "Overheating (machine or row): 2 nodes of row/a",
                )
                named = {(a["alertname"], a["labels"]["Hostname"]) for a in incident["alerts"]}
                assert len(incident["alerts"]) == 2 + 2 * 8  # a BMC alarm per machine, 8 GPUs
                assert named == {
                    (alertname, node)
                    for alertname in ("BMCTemperatureHigh", "GPUTemperatureHigh")
                    for node in ROW_A
                }
                states = _states(client, ref)
                # The node branch is skipped, the row's was taken: its reads ran unattended.
                assert (states["temperatures"], states["fans"]) == ("skipped", "not_reached")
                assert states["row_temperatures"] == "succeeded"

                oncall = running.decide_as("oncall")
                done = client.post(
                    f"/api/incidents/{ref}/steps/facility/done",
                    json={"note": "facility on it: CRAC unit of row a tripped"},
                    headers=oncall,
                )
                assert done.status_code == 200, done.text
                eventually(
                    lambda: _states(client, ref)["row_cordon"] == "awaiting_approval",
                    timeout=30,
                    what="the row's cordon asking",
                )
                # One approval for the row, naming its count.
                approved = client.post(
                    f"/api/incidents/{ref}/steps/row_cordon/approve",
                    json={"count": 2},
                    headers=oncall,
                )
                assert approved.status_code == 200, approved.text
                # The breaker's global cap (half the GPU nodes) admits both machines.
                eventually(
                    lambda: _states(client, ref)["row_cordon"] == "succeeded",
                    timeout=30,
                    what="the row cordoned",
                )
            cordoned = {
                n["metadata"]["name"]
                for n in _get(cluster, "/api/v1/nodes")["items"]
                if n["spec"].get("unschedulable")
            }
            assert cordoned == set(ROW_A)  # row b untouched
        assert running.stop() == 0

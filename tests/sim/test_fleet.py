"""The fleet preset: 1,000 GPU nodes with their failure domains as node labels, served
through the simulated API to the real client."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from kubernetes import client

from bot.config import load_settings
from bot.sim import fleet, running
from bot.sim.fleet import LEAF, LEVELS, PDU, RACK, ROW, row_name
from bot.topology import NodeCache
from tests.sim.waiting import eventually
from tests.support.cli import Run


def test_a_thousand_nodes_in_rows_racks_leaves_and_power_feeds() -> None:
    layout = fleet()

    assert len(layout.nodes) == 1000 and layout.nodes[0] == "gpu-node-0001"
    assert len(layout.rows) == 32 and list(layout.rows)[:3] == ["a", "b", "c"]
    assert list(layout.rows)[-2:] == ["ae", "af"]
    assert Counter(len(n) for n in layout.rows.values()) == {32: 31, 8: 1}
    assert len(layout.racks) == 125 and set(map(len, layout.racks.values())) == {8}
    assert layout.rows["a"] == sorted(n for r in ("a1", "a2", "a3", "a4") for n in layout.racks[r])
    assert len(layout.leaves) == 63 and Counter(map(len, layout.leaves.values())) == {16: 62, 8: 1}
    assert layout.pdus["pdu-a1"] == layout.racks["a1"] and len(layout.pdus) == 125
    assert {server: len(nodes) for server, nodes in layout.nfs.items()} == {
        f"nfs-{i:02d}.storage.svc.cluster.local": 200 for i in range(1, 6)
    }
    assert layout.nfs_of("gpu-node-0201") == "nfs-02.storage.svc.cluster.local"
    assert [c.server for c in layout.scenario.claims] == list(layout.nfs)


def test_rows_are_lettered_as_a_data_hall_letters_them() -> None:
    assert [row_name(i) for i in (0, 25, 26, 27, 51, 52, 701, 702)] == [
        "a", "z", "aa", "ab", "az", "ba", "zz", "aaa"
    ]  # fmt: skip


def test_the_api_serves_every_node_with_its_domain_labels_and_eight_gpus() -> None:
    layout = fleet()

    with running(layout.scenario) as sim:
        raw = client.CoreV1Api(sim.api_client()).list_node(_preload_content=False)
        nodes = json.loads(raw.data)["items"]

    assert len(nodes) == 1000
    by_name = {n["metadata"]["name"]: n for n in nodes}
    labels = by_name["gpu-node-0042"]["metadata"]["labels"]
    assert {k: labels[k] for k in (ROW, RACK, LEAF, PDU, "nvidia.com/gpu.present")} == {
        ROW: "b",
        RACK: "b2",
        LEAF: "ib-leaf-03",
        PDU: "pdu-b2",
        "nvidia.com/gpu.present": "true",
    }
    assert sum(int(n["status"]["capacity"]["nvidia.com/gpu"]) for n in nodes) == 8000
    assert len({n["spec"]["podCIDR"] for n in nodes}) == 1000
    assert all(ROW in n["metadata"]["labels"] for n in nodes)


@pytest.mark.parametrize(
    ("options", "problem"),
    [
        ({"nodes": 0}, "a fleet has 1 to 5000 nodes"),
        ({"nodes": 10, "rack_size": 0}, "rack_size, racks_per_row, racks_per_leaf"),
    ],
)
def test_an_impossible_fleet_is_refused_saying_why(options: dict[str, int], problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        fleet(**options)


def test_a_domain_the_fleet_lacks_is_refused_naming_some_it_has() -> None:
    with pytest.raises(ValueError, match=r"^this fleet has no row 'zz'; it has a, b$"):
        fleet(40).members("row", "zz")
    with pytest.raises(ValueError, match=r"no leaf 'l1'; it has ib-leaf-01, .* \(63 in all\)"):
        fleet().members("leaf", "l1")


def test_runbook_bot_sim_fleet_serves_it_with_settings_that_read_its_topology(
    tmp_path: Path,
) -> None:
    kubeconfig = tmp_path / "fleet.kubeconfig"
    settings_file = tmp_path / "fleet.settings.yaml"
    command = [sys.executable, "-m", "bot.cli", "sim", "--fleet", "40", "--port", "0"]
    command += ["--bmc-port", "0", "--kubeconfig", str(kubeconfig), "--time-scale", "0.05"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        eventually(settings_file.exists, timeout=20, what="the sim's settings file")
        settings = load_settings(settings_file)
        topology = NodeCache(settings).read()
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=15)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate(timeout=5)

    assert process.returncode == 0, err
    assert "scenario 'fleet-40' with 40 nodes" in out
    assert [level.model_dump() for level in settings.topology.levels] == LEVELS
    assert {row: len(nodes) for row, nodes in topology.tree()["row"].items()} == {"a": 32, "b": 8}


def test_a_fleet_size_the_sim_cannot_serve_is_a_usage_error(
    run: Run, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        run("sim", "--fleet", "0")

    assert exited.value.code == 2
    assert "'0' is not a fleet size; give 1 to 5000 nodes" in capsys.readouterr().err

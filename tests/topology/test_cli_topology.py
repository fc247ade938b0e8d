"""`runbook-bot topology`: the tree the simulated fleet's node labels draw, with node
counts, and the active incidents (ingested from the fleet's failure alerts) on their
domains, as text and as JSON; and errors that say what to set."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest
import yaml

from bot.alerts import ingest
from bot.alerts.payload import WebhookPayload
from bot.clock import FrozenClock
from bot.config import load_settings
from bot.db import Database
from bot.runbooks import catalog as catalogs
from bot.sim import Fleet, SimHandle, storms
from bot.sim.fleet import LEVELS
from bot.topology import Topology
from tests.support.cli import Run

RUNBOOKS = Path(__file__).resolve().parents[2] / "runbooks"
NFS = "nfs-01.storage.svc.cluster.local"


def config(path: Path, **values: object) -> str:
    path.write_text(yaml.safe_dump(values), encoding="utf-8")
    return str(path)


@pytest.fixture
def incidents(db: Database, on_db: str, small_fleet: Fleet, clock: FrozenClock) -> None:
    """INC-1: an XID on gpu-node-0003; INC-2: ib-leaf-02's 16 nodes (Alertmanager grouping
    by alertname); INC-3: NFS server 1's nodes; INC-4: XIDs in both rows at once."""
    settings = load_settings(
        database_url=db.url, runbooks_dir=RUNBOOKS, topology={"levels": LEVELS}
    )
    catalog = catalogs.load(settings)
    topology = Topology.from_labels(settings.topology, small_fleet.node_labels())
    bodies = [
        *storms.notifications(storms.xid(small_fleet, "gpu-node-0003", 79), ["Hostname"]),
        *storms.notifications(storms.leaf_down(small_fleet, "ib-leaf-02"), ["alertname"]),
        *storms.notifications(storms.nfs_down(small_fleet, NFS), ["storage"]),
        *storms.notifications(
            storms.xid(small_fleet, "gpu-node-0001", 13, gpu=2)
            + storms.xid(small_fleet, "gpu-node-0040", 13, gpu=2),
            ["alertname", "xid"],
        ),
    ]
    for body in bodies:
        result = ingest.ingest(
            db,
            WebhookPayload.model_validate(body),
            clock=clock,
            reopen_window=timedelta(hours=24),
            catalog=catalog,
            topology=topology,
            settings=settings,
        )
        assert result.opened


@pytest.fixture
def settings_file(fleet_sim: SimHandle, tmp_path: Path) -> str:
    return config(
        tmp_path / "settings.yaml",
        kubeconfig=str(fleet_sim.write_kubeconfig(tmp_path / "kubeconfig")),
        kube_timeout="2s",
        topology={"levels": LEVELS},
    )


def test_the_tree_shows_counts_and_each_incident_on_its_domain(
    run: Run, settings_file: str, incidents: None
) -> None:
    code, out, err = run("--config", settings_file, "topology")

    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[0].split() == ["DOMAIN", "NODES", "INCIDENTS"]
    assert max(len(line) for line in lines) <= 80
    rows = {line.split()[0]: line.split(None, 2)[1:] for line in lines[1:] if line.strip()}
    assert rows["row/a"] == ["32"] and rows["row/b"] == ["8"]
    assert rows["rack/a1"] == ["8"]
    assert rows["power/pdu-a1"] == ["8", "INC-1 (gpu-xid, gpu-node-0003)"]
    assert rows["leaf/ib-leaf-01"] == ["16", "INC-1 (gpu-xid, gpu-node-0003)"]
    assert rows["leaf/ib-leaf-02"] == ["16", "INC-2 (ib-partition, domain)"]
    storage = lines.index(f"storage/{NFS}:/exports/datasets")  # too long: a line of its own
    assert lines[storage + 1].split(None, 1) == ["8", "INC-3 (storage-failure, domain)"]
    # Nested: racks and leaf switches under their row, a rack's power feed under the rack;
    # a leaf switch that serves just one rack (row b is short) under that rack.
    assert "\n  rack/a1 " in out and "\n    power/pdu-a1 " in out
    assert "\n  leaf/ib-leaf-02 " in out and "\n    leaf/ib-leaf-03 " in out
    assert lines.index(next(li for li in lines if "rack/a4" in li)) < lines.index(
        next(li for li in lines if li.startswith("row/b"))
    )
    tail = out[out.index("Active incidents no one domain holds:") :]
    assert "INC-4 (gpu-xid, 2 nodes)" in tail
    assert lines[-1] == "40 nodes in 15 domains."


def test_json_gives_the_same_as_data(run: Run, settings_file: str, incidents: None) -> None:
    code, out, _ = run("--config", settings_file, "topology", "--json")

    data = json.loads(out)
    assert code == 0
    assert data["levels"] == ["row", "rack", "leaf", "power"] and data["nodes"] == 40
    domains = {d["domain"]: d for d in data["domains"]}
    assert len(domains) == 15
    assert domains["rack/a1"]["parent"] == "row/a" and domains["rack/a1"]["depth"] == 1
    assert domains["power/pdu-a1"]["parent"] == "rack/a1"
    assert domains["leaf/ib-leaf-02"]["incidents"] == [
        {
            "incident": "INC-2",
            "number": 2,
            "runbook": "ib-partition",
            "severity": "critical",
            "scope": "domain",
            "domain": "leaf/ib-leaf-02",
            "nodes": 16,
        }
    ]
    assert [(s["domain"], s["nodes"]) for s in data["storage"]] == [
        (f"storage/{NFS}:/exports/datasets", 8)
    ]
    assert [i["incident"] for i in data["elsewhere"]] == ["INC-4"]


def test_without_levels_the_error_says_how_to_set_them(
    run: Run, fleet_sim: SimHandle, tmp_path: Path
) -> None:
    path = config(tmp_path / "s.yaml", kubeconfig=str(fleet_sim.write_kubeconfig(tmp_path / "kc")))

    code, out, err = run("--config", path, "topology")

    assert (code, out) == (2, "")
    assert "no topology levels are configured" in err
    assert "{name: row,  label: topology.example.com/row}" in err


def test_an_unreachable_api_says_what_to_check(run: Run, tmp_path: Path) -> None:
    import socket

    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    kubeconfig = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": f"http://127.0.0.1:{port}"}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "x",
    }
    (tmp_path / "kc").write_text(yaml.safe_dump(kubeconfig))
    path = config(
        tmp_path / "s.yaml",
        kubeconfig=str(tmp_path / "kc"),
        kube_timeout="2s",
        topology={"levels": LEVELS},
    )

    code, _, err = run("--config", path, "topology")

    assert code == 1
    assert "cannot list the nodes for the topology: the Kubernetes API is unreachable" in err
    assert "check the cluster address and network" in err


def test_without_a_cluster_the_error_names_the_settings(
    run: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    path = config(tmp_path / "s.yaml", topology={"levels": LEVELS})

    code, _, err = run("--config", path, "topology")

    assert code == 2
    assert "no Kubernetes cluster is configured: set `kubeconfig`" in err


def test_active_shows_only_the_domains_with_incidents_and_those_above_them(
    run: Run, settings_file: str, incidents: None
) -> None:
    code, out, _ = run("--config", settings_file, "topology", "--active")

    names = [line.split()[0] for line in out.splitlines()[1:] if line.strip()]
    assert code == 0
    assert names[:6] == [
        "row/a",
        "rack/a1",
        "power/pdu-a1",
        "leaf/ib-leaf-01",
        "leaf/ib-leaf-02",
        f"storage/{NFS}:/exports/datasets",
    ]
    assert "row/b" not in names and "rack/a2" not in names
    assert out.splitlines()[-1] == (
        "40 nodes in 15 domains (5 shown: those with incidents and above them)."
    )

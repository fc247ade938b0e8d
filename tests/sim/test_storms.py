"""The fleet's failure events: the alerts each raises (how many, their labels, and that
the shipped runbook meant for it matches them, through `bot.runbooks.catalog`), and what
each breaks in a running simulator."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from bot.config import load_settings
from bot.runbooks import catalog as catalogs
from bot.runbooks.catalog import Catalog
from bot.sim import Fleet, SimHandle, fleet, running, storms
from bot.sim.faults import MOUNT_FAILED
from bot.sim.kinds import EVENT
from tests.sim.waiting import TIME_SCALE

RUNBOOKS = Path(__file__).resolve().parents[2] / "runbooks"
NOW = datetime(2026, 12, 3, 13, 0, tzinfo=UTC)
NFS = "nfs-02.storage.svc.cluster.local"


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return catalogs.load(load_settings(runbooks_dir=RUNBOOKS))


@pytest.fixture(scope="module")
def layout() -> Fleet:
    return fleet(400)


@pytest.fixture
def sim(layout: Fleet) -> Iterator[SimHandle]:
    with running(layout.scenario, time_scale=TIME_SCALE) as handle:
        yield handle


def runbooks(catalog: Catalog, alerts: list[storms.Alert]) -> Counter[tuple[str, str]]:
    """(alertname, the runbook it matches) -> how many alerts."""
    found: Counter[tuple[str, str]] = Counter()
    for alert in alerts:
        matched = catalog.match(alert["labels"])
        found[(alert["labels"]["alertname"], matched.runbook.id if matched else "-")] += 1
    return found


def test_alerts_have_the_shape_prometheus_posts(layout: Fleet) -> None:
    (alert,) = storms.xid(layout, "gpu-node-0007", 79, gpu=5, now=NOW)

    assert set(alert) == {"labels", "annotations", "startsAt", "generatorURL"}
    assert alert["startsAt"] == "2026-12-03T13:00:00.000Z"
    assert alert["generatorURL"].startswith("http://prometheus:9090/graph?g0.expr=DCGM_EXP_XID")
    assert alert["labels"] == {
        "alertname": "GPUXIDError",
        "Hostname": "gpu-node-0007",
        "UUID": alert["labels"]["UUID"],
        "device": "nvidia5",
        "gpu": "5",
        "instance": "gpu-node-0007:9400",
        "job": "dcgm",
        "modelName": "NVIDIA H100 80GB HBM3",
        "pci_bus_id": "00000000:68:00.0",
        "severity": "critical",
        "xid": "79",
    }
    assert alert["labels"]["UUID"].startswith("GPU-")


def test_a_rows_cooling_raises_gpu_and_bmc_temperatures_for_overheating(
    layout: Fleet, catalog: Catalog
) -> None:
    alerts = storms.row_cooling(layout, "b", now=NOW)

    assert runbooks(catalog, alerts) == {
        ("GPUTemperatureHigh", "overheating"): 32 * 8,
        ("BMCTemperatureHigh", "overheating"): 32,
    }
    assert {a["labels"]["Hostname"] for a in alerts} == set(layout.rows["b"])
    assert {a["labels"]["row"] for a in alerts} == {"b"}
    assert {frozenset(a["annotations"]) for a in alerts} == {frozenset({"summary"})}  # no count
    assert len({frozenset(a["labels"].items()) for a in alerts}) == len(alerts)  # all distinct


def test_a_dead_leaf_switch_takes_every_port_of_its_16_nodes_for_ib_partition(
    layout: Fleet, catalog: Catalog
) -> None:
    alerts = storms.leaf_down(layout, "ib-leaf-03", now=NOW)

    assert runbooks(catalog, alerts) == {("InfiniBandPortDown", "ib-partition"): 16 * 4}
    assert {a["labels"]["node"] for a in alerts} == set(layout.leaves["ib-leaf-03"])
    assert {a["labels"]["device"] for a in alerts} == {"mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"}


def test_a_racks_lost_power_is_node_down_bmc_unreachable_and_ib_down(
    layout: Fleet, catalog: Catalog
) -> None:
    alerts = storms.rack_power(layout, "c2", now=NOW)

    assert runbooks(catalog, alerts) == {
        ("KubeNodeNotReady", "node-down"): 8,
        ("BMCUnreachable", "node-down"): 8,
        ("InfiniBandPortDown", "ib-partition"): 8 * 4,
    }
    assert {a["labels"]["node"] for a in alerts} == set(layout.racks["c2"])


def test_a_lost_nfs_server_alerts_on_each_of_its_nodes_for_storage_failure(
    catalog: Catalog,
) -> None:
    layout = fleet()  # 1,000 nodes: 200 per server
    alerts = storms.nfs_down(layout, NFS, now=NOW)

    assert runbooks(catalog, alerts) == {("SharedFilesystemUnreachable", "storage-failure"): 200}
    assert {a["labels"]["node"] for a in alerts} == set(layout.nfs[NFS])
    assert {(a["labels"]["storage"], a["labels"]["server"]) for a in alerts} == {
        (f"{NFS}:/exports/datasets", NFS)
    }


def test_an_xid_is_one_alert_for_gpu_xid(layout: Fleet, catalog: Catalog) -> None:
    assert runbooks(catalog, storms.xid(layout, "gpu-node-0100", 13, now=NOW)) == {
        ("GPUXIDError", "gpu-xid"): 1
    }


def test_an_unknown_node_or_domain_is_refused(layout: Fleet) -> None:
    with pytest.raises(ValueError, match="gpu-node-9999 is not a node of this fleet"):
        storms.xid(layout, "gpu-node-9999", 79)
    with pytest.raises(ValueError, match="this fleet has no rack 'x9'"):
        storms.rack_power(layout, "x9")
    with pytest.raises(ValueError, match="has GPUs 0 to 7, not 8"):
        storms.xid(layout, "gpu-node-0001", 79, gpu=8)


def test_in_the_simulator_each_event_breaks_what_its_alerts_say(
    layout: Fleet, sim: SimHandle
) -> None:
    cluster = sim.cluster
    mounting = layout.nfs[NFS][0]
    cluster.add_pod(
        "datasets",
        "reader",
        mounting,
        volumes=[{"name": "data", "persistentVolumeClaim": {"claimName": "datasets-nfs-02"}}],
    )

    storms.row_cooling(layout, "a", sim=sim)
    storms.leaf_down(layout, "ib-leaf-05", sim=sim)
    storms.rack_power(layout, "d1", sim=sim)
    storms.nfs_down(layout, NFS, sim=sim)
    storms.xid(layout, "gpu-node-0300", 79, gpu=2, sim=sim)

    hot = cluster.machine("gpu-node-0010")
    assert {g.temperature for g in hot.gpus} == {93.0} and hot.inlet_temperature == 41.0
    assert {g.temperature for g in cluster.machine("gpu-node-0033").gpus} == {34.0}
    assert not any(p.up for p in cluster.machine(layout.leaves["ib-leaf-05"][0]).ib_ports)
    dark = cluster.machine(layout.racks["d1"][0])
    assert dark.power == "Off" and not any(p.up for p in dark.ib_ports)
    snapshot = cluster.snapshot()
    assert {snapshot.nodes[n].ready for n in layout.racks["d1"]} == {False}
    assert snapshot.nodes["gpu-node-0001"].ready is True
    warned = [e for e in cluster.objects(EVENT) if e.get("reason") == MOUNT_FAILED]
    assert [(e["involvedObject"]["name"], e["source"]["host"]) for e in warned] == [
        ("reader", mounting)
    ]
    assert cluster.machine("gpu-node-0300").gpus[2].present is False


def test_notifications_group_alerts_as_an_alertmanager_route_would(layout: Fleet) -> None:
    from bot.alerts.payload import WebhookPayload

    alerts = storms.rack_power(layout, "a1", now=NOW)

    bodies = storms.notifications(alerts, ["alertname", "node"])
    by_group = {tuple(sorted(b["groupLabels"].items())): b for b in bodies}

    assert len(bodies) == 3 * 8  # three alert names on each of the rack's 8 nodes
    ib = by_group[(("alertname", "InfiniBandPortDown"), ("node", "gpu-node-0001"))]
    assert len(ib["alerts"]) == 4 and ib["commonLabels"]["node"] == "gpu-node-0001"
    assert "device" not in ib["commonLabels"]  # four HCAs: not common to the group
    assert ib["groupKey"] == '{}:{alertname="InfiniBandPortDown", node="gpu-node-0001"}'
    assert {a["status"] for b in bodies for a in b["alerts"]} == {"firing"}
    assert len({a["fingerprint"] for b in bodies for a in b["alerts"]}) == len(alerts)
    assert all(WebhookPayload.model_validate(b).alerts for b in bodies)  # what ingest takes

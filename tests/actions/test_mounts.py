"""k8s.pods_mounting on the simulated cluster through the real client: the pods (and their
nodes and jobs) that mount one NFS export, whichever way they mount it."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client

from bot.errors import ParamsInvalid
from bot.sim import SimHandle
from tests.actions.conftest import RunAction

pytestmark = pytest.mark.timeout(60)
NFS = "nfs.storage.svc.cluster.local"
TRAINERS = [f"gpu-node-0{i}" for i in range(1, 5)]


def _csi_claim(sim: SimHandle, server: str, share: str, sub: str = "") -> None:
    """serving/ckpt, bound to a PersistentVolume of the NFS CSI driver on server:share
    (in its subDir `sub`)."""
    core = client.CoreV1Api(sim.api_client())
    core.create_persistent_volume(
        {
            "metadata": {"name": "pv-ckpt"},
            "spec": {
                "capacity": {"storage": "1Ti"},
                "accessModes": ["ReadWriteMany"],
                "csi": {
                    "driver": "nfs.csi.k8s.io",
                    "volumeHandle": f"{server}#{share}",
                    "volumeAttributes": {"server": server, "share": share, "subDir": sub},
                },
                "claimRef": {"namespace": "serving", "name": "ckpt"},
            },
        }
    )
    sim.cluster.add_pod(
        "serving",
        "ckpt-writer",
        "gpu-node-03",
        volumes=[{"name": "ckpt", "persistentVolumeClaim": {"claimName": "ckpt"}}],
    )


def test_the_trainers_mounting_the_export_through_their_claim_are_found_with_their_job(
    run_action: RunAction, sim: SimHandle
) -> None:
    result: Any = run_action(
        "k8s.pods_mounting", storage=f"{NFS.upper()}:/exports/datasets/"
    ).result

    assert result.ok is True
    assert result.storage == f"{NFS}:/exports/datasets"
    assert [(p.name, p.node) for p in result.pods] == [
        (f"trainer-{i}", node) for i, node in enumerate(TRAINERS)
    ]
    assert result.jobs == ["StatefulSet ml/trainer"]
    assert result.nodes == TRAINERS and result.per_node == dict.fromkeys(TRAINERS, 1)
    assert result.claims == ["ml/datasets"]
    assert result.pods[0].mounts == [f"{NFS}:/exports/datasets (claim ml/datasets)"]
    assert result.summary == (
        f"4 live pods of 1 job on 4 nodes mount {NFS}:/exports/datasets (1 volume, 1 claim)"
    )


def test_inline_volumes_under_the_path_and_csi_shares_count_and_other_exports_do_not(
    run_action: RunAction, sim: SimHandle
) -> None:
    under = {"name": "sub", "nfs": {"server": NFS, "path": "/exports/datasets/team-a"}}
    beside = {"name": "scratch", "nfs": {"server": NFS, "path": "/exports/datasets-old"}}
    sim.cluster.add_pod("default", "notebook", "gpu-node-02", volumes=[under])
    sim.cluster.add_pod("default", "old-notebook", "gpu-node-02", volumes=[beside])
    _csi_claim(sim, "10.0.8.50", "/exports", sub="ckpt/serving")

    datasets: Any = run_action("k8s.pods_mounting", storage=f"{NFS}:/exports/datasets").result
    whole: Any = run_action("k8s.pods_mounting", storage=NFS).result
    ckpt: Any = run_action("k8s.pods_mounting", storage="10.0.8.50:/exports/ckpt").result

    names = {p.name for p in datasets.pods}
    assert "notebook" in names and "old-notebook" not in names
    notebook = next(p for p in datasets.pods if p.name == "notebook")
    assert notebook.mounts == [f"{NFS}:/exports/datasets/team-a (inline sub)"]
    assert notebook.job == "no controller"
    assert {"notebook", "old-notebook"} <= {p.name for p in whole.pods}
    assert [(p.name, p.node) for p in ckpt.pods] == [("ckpt-writer", "gpu-node-03")]
    assert (ckpt.volumes, ckpt.claims) == (["pv-ckpt"], ["serving/ckpt"])
    assert ckpt.pods[0].mounts == ["10.0.8.50:/exports/ckpt/serving (claim serving/ckpt)"]


def test_an_export_nobody_mounts_is_an_answer_not_an_error(
    run_action: RunAction, sim: SimHandle
) -> None:
    result: Any = run_action("k8s.pods_mounting", storage="10.0.9.9:/exports/home").result

    assert (result.ok, result.pods, result.nodes) == (True, [], [])
    assert result.summary == (
        "0 live pods of 0 jobs on 0 nodes mount 10.0.9.9:/exports/home (0 volumes, 0 claims)"
    )


@pytest.mark.parametrize(
    "storage", ["nfs-01;reboot:/x", "nfs-01:exports", "nfs-01:/a/../etc", "JuiceFS:ckpt"]
)
def test_what_is_not_an_nfs_export_is_refused_before_any_request(
    run_action: RunAction, sim: SimHandle, storage: str
) -> None:
    with pytest.raises(ParamsInvalid) as refused:
        run_action("k8s.pods_mounting", storage=storage)

    assert "storage=" in str(refused.value)
    assert sim.cluster.requests_made() == []

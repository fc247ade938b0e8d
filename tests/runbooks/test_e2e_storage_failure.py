"""The shipped storage-failure runbook end to end: an NFS export unreachable; the pods
mounting it are found, the Volcano queue is closed, the checks are done by hand, and the
queue reopens only after read/write and resume are verified. No node is cordoned."""

from __future__ import annotations

from typing import Any

import pytest

from tests.runbooks.drive import Drive

STORAGE = "nfs.storage.svc.cluster.local:/exports/datasets"

pytestmark = [pytest.mark.timeout(60), pytest.mark.parametrize("backend", ["sqlite"])]


def _queue(drive: Drive) -> dict[str, Any]:
    (queue,) = drive.sim.cluster.objects("Queue")
    return queue


def test_an_unreachable_nfs_export_closes_the_queue_until_it_is_verified(
    drive: Drive,
) -> None:
    number = drive.fire(
        alertname="SharedFilesystemUnreachable", storage=STORAGE, storage_kind="nfs"
    )

    impact = drive.results(number)["impact_mounts"]
    assert impact["claims"] == ["ml/datasets"]
    assert sorted((p["name"], p["node"]) for p in impact["pods"]) == [
        (f"trainer-{i}", f"gpu-node-0{i + 1}") for i in range(4)
    ]
    assert impact["jobs"] == ["StatefulSet ml/trainer"]
    assert drive.rows(number)["impact_mounts"].params == {"storage": STORAGE}
    assert drive.states(number)["impact_class"] == "skipped"
    assert drive.waiting(number) == ("checkpoint_writable", 0)

    drive.done(number, "checkpoint_writable", "alice", "touch /datasets/ckpt/x hangs")
    assert drive.waiting(number) == ("close_queue", 1)
    assert _queue(drive)["status"]["state"] == "Open"
    drive.approve(number, "close_queue", "alice")
    assert _queue(drive)["status"]["state"] == "Closed"

    states = drive.states(number)
    assert states["pause_by_hand"] == states["cordon_mounting"] == "skipped"
    assert states["client_mount"] == "skipped"  # the alert names no node
    for step, note in [
        ("nfs_server", "nfsd hung on the server; restarted it"),
        ("rw_test", "fio 1 GiB write/read from trainer-0: ok"),
        ("resume_check", "trainer resumed from ckpt 41000"),
    ]:
        assert drive.waiting(number) == (step, 0)
        drive.done(number, step, "bob", note)
        if step == "nfs_server":
            assert drive.states(number)["juicefs"] == "skipped"
    assert drive.waiting(number) == ("data_loss", 0)
    assert _queue(drive)["status"]["state"] == "Closed"
    drive.skip(number, "data_loss", "bob", "no checkpoint lost")

    assert drive.waiting(number) == ("reopen_queue", 1)
    drive.approve(number, "reopen_queue", "carol")

    assert _queue(drive)["status"]["state"] == "Open"
    assert drive.types(number)[-1] == "runbook.finished"
    assert not any(node.unschedulable for node in drive.sim.cluster.snapshot().nodes.values())
    assert drive.sim.cluster.requests_made(method="PATCH", path="/api/v1/nodes/*") == []
    assert drive.demanded(number) == {
        "impact_mounts": 0,
        "close_queue": 1,
        "reopen_queue": 1,
    }
    assert drive.verified(number)

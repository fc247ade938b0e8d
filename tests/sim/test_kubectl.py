"""Real kubectl against the simulator: discovery, get, cordon, uncordon and drain."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from bot.sim import SimHandle
from tests.sim.waiting import eventually
from tests.support.ci import skip_or_fail

KUBECTL = shutil.which("kubectl")


class Kubectl:
    def __init__(self, sim: SimHandle, home: Path) -> None:
        self.config = sim.write_kubeconfig(home / "kubeconfig")
        self.cache = home / "cache"
        self.env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}

    def __call__(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        assert KUBECTL is not None
        command = [KUBECTL, "--kubeconfig", str(self.config), "--cache-dir", str(self.cache)]
        return subprocess.run(
            [*command, *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=self.env,
            check=False,
        )


@pytest.fixture
def kubectl(sim: SimHandle, tmp_path: Path) -> Kubectl:
    if KUBECTL is None:
        skip_or_fail("kubectl is not on PATH", install="apt-get install kubectl")
    return Kubectl(sim, tmp_path)


def test_kubectl_get_nodes_json_lists_the_gpu_nodes(kubectl: Kubectl) -> None:
    result = kubectl("get", "nodes", "-o", "json")

    assert result.returncode == 0, result.stderr
    items = json.loads(result.stdout)["items"]
    assert [n["metadata"]["name"] for n in items] == [f"gpu-node-0{i}" for i in range(1, 5)]
    assert {n["status"]["capacity"]["nvidia.com/gpu"] for n in items} == {"8"}


def test_kubectl_cordon_and_uncordon_flip_unschedulable(sim: SimHandle, kubectl: Kubectl) -> None:
    cordon = kubectl("cordon", "gpu-node-01")
    cordoned = sim.cluster.snapshot().nodes["gpu-node-01"].unschedulable
    uncordon = kubectl("uncordon", "gpu-node-01")

    assert cordon.returncode == 0 and "node/gpu-node-01 cordoned" in cordon.stdout
    assert cordoned is True
    assert uncordon.returncode == 0 and "uncordoned" in uncordon.stdout
    assert sim.cluster.snapshot().nodes["gpu-node-01"].unschedulable is False
    patches = sim.cluster.requests_made("PATCH", "/api/v1/nodes/gpu-node-01")
    assert len(patches) == 2 and all(r.status == 200 for r in patches)


def test_kubectl_drain_evicts_controller_pods_and_leaves_daemonset_and_mirror_pods(
    sim: SimHandle, kubectl: Kubectl
) -> None:
    result = kubectl(
        "drain", "gpu-node-02", "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=60s"
    )

    assert result.returncode == 0, result.stderr
    assert "node/gpu-node-02 drained" in result.stdout
    after = sim.cluster.snapshot()
    left = after.pods_on("gpu-node-02")
    assert {ns for ns, _ in left} == {"gpu-operator", "kube-system"}
    assert ("kube-system", "kube-proxy-gpu-node-02") in left and len(left) == 3
    assert after.nodes["gpu-node-02"].unschedulable is True
    evictions = sim.cluster.requests_made("POST", "/api/v1/namespaces/*/pods/*/eviction")
    assert {r.path.split("/")[6] for r in evictions if r.status == 201} >= {"trainer-1"}

    def recreated_elsewhere() -> bool:
        trainer = sim.cluster.get("Pod", "ml", "trainer-1")
        serving = sim.cluster.objects("Pod", "serving")
        return (
            trainer is not None
            and trainer["spec"].get("nodeName") not in (None, "gpu-node-02")
            and trainer["status"]["phase"] == "Running"
            and len(serving) == 2
            and all(p["spec"].get("nodeName") not in (None, "gpu-node-02") for p in serving)
        )

    eventually(recreated_elsewhere, what="the drained pods to run on other nodes")


def test_kubectl_drain_refuses_a_bare_pod_without_force_and_evicts_nothing(
    sim: SimHandle, kubectl: Kubectl
) -> None:
    before = sim.cluster.snapshot().pods_on("gpu-node-01")

    result = kubectl(
        "drain", "gpu-node-01", "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=20s"
    )

    assert result.returncode != 0
    assert "default/debug-shell" in result.stderr
    assert "declare no controller" in result.stderr
    assert sim.cluster.requests_made("POST", "*/eviction") == []
    assert sim.cluster.snapshot().pods_on("gpu-node-01") == before


def test_kubectl_drain_blocked_by_a_budget_says_so_and_times_out(
    sim: SimHandle, kubectl: Kubectl
) -> None:
    # trainer-0 is being evicted but never finishes terminating, so the budget stays spent.
    sim.cluster.make_stuck("ml", "trainer-0")
    evicted = kubectl("delete", "pod", "trainer-0", "-n", "ml", "--wait=false")

    result = kubectl(
        "drain", "gpu-node-04", "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=2s"
    )

    assert evicted.returncode == 0, evicted.stderr
    assert result.returncode != 0
    assert "Cannot evict pod as it would violate the pod's disruption budget" in result.stderr
    assert ("ml", "trainer-3") in sim.cluster.snapshot().pods_on("gpu-node-04")
    refusals = sim.cluster.requests_made("POST", "/api/v1/namespaces/ml/pods/trainer-3/eviction")
    assert refusals and {r.status for r in refusals} == {429}


def test_kubectl_delete_waits_for_the_pod_to_be_gone(sim: SimHandle, kubectl: Kubectl) -> None:
    before = sim.cluster.get("Pod", "ml", "trainer-2")

    result = kubectl("delete", "pod", "trainer-2", "-n", "ml", "--timeout=20s")

    assert result.returncode == 0, result.stderr
    assert 'pod "trainer-2" deleted' in result.stdout
    after = sim.cluster.get("Pod", "ml", "trainer-2")
    assert before is not None
    assert after is None or after["metadata"]["uid"] != before["metadata"]["uid"]
    assert sim.cluster.requests_made("GET", "/api/v1/namespaces/ml/pods")[-1].query["watch"] == (
        "true"
    )

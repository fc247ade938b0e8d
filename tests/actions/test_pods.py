"""k8s.pods_on_nodes and k8s.pods_using_volume on the simulated cluster: what they report
for the seed's pods and volumes, what they leave out, and how they read the cluster."""

from __future__ import annotations

from typing import Any

from kubernetes import client

from bot.sim import SimHandle
from tests.actions.conftest import RunAction
from tests.sim.waiting import eventually

NFS = "nfs.storage.svc.cluster.local"
TRAINERS = [("ml", f"trainer-{i}", f"gpu-node-0{i + 1}") for i in range(4)]


def _claim_volume(claim: str) -> dict[str, Any]:
    return {"name": "data", "persistentVolumeClaim": {"claimName": claim}}


def _users(result: Any) -> list[tuple[str, str, str]]:
    return [(p.namespace, p.name, p.node) for p in result.pods]


def test_pods_on_nodes_lists_phase_owner_gpus_and_volumes_per_node(
    run_action: RunAction, sim: SimHandle
) -> None:
    result: Any = run_action("k8s.pods_on_nodes", nodes=["gpu-node-01", "gpu-node-02"]).result

    assert result.ok is True
    assert result.summary == "gpu-node-01: 5 pods, gpu-node-02: 5 pods"
    assert result.gpus_requested == {"gpu-node-01": 4, "gpu-node-02": 6}
    first = {p.name: p for p in result.pods["gpu-node-01"]}
    trainer = first["trainer-0"]
    assert (trainer.namespace, trainer.phase, trainer.owner, trainer.gpus) == (
        "ml",
        "Running",
        "StatefulSet ml/trainer",
        4,
    )
    assert trainer.volumes == ["datasets: pvc datasets"]
    assert first["debug-shell"].owner == "no controller"
    assert first["kube-proxy-gpu-node-01"].owner == "static pod"
    inference = next(p for p in result.pods["gpu-node-02"] if p.namespace == "serving")
    assert inference.volumes == ["model-cache: emptyDir"]
    assert len(sim.cluster.requests_made("GET", "/api/v1/pods")) == 2


def test_pods_on_nodes_names_what_is_not_a_node_and_reads_each_node_once(
    run_action: RunAction, sim: SimHandle
) -> None:
    result: Any = run_action(
        "k8s.pods_on_nodes", nodes=["gpu-node-03", "gpu-node-03", "gpu-node-99"]
    ).result

    assert result.ok is False
    assert result.missing == ["gpu-node-99"]
    assert list(result.pods) == ["gpu-node-03"]
    assert result.summary == "gpu-node-03: 5 pods; not nodes: gpu-node-99 (kubectl get nodes)"
    selectors = [r.query["fieldSelector"] for r in sim.cluster.requests_made("GET", "/api/v1/pods")]
    assert selectors == ["spec.nodeName=gpu-node-03", "spec.nodeName=gpu-node-99"]


def test_pods_on_nodes_leaves_finished_pods_out_of_the_gpu_count(
    run_action: RunAction, sim: SimHandle
) -> None:
    core = client.CoreV1Api(sim.api_client())
    pod = {
        "metadata": {"name": "burn-in"},
        "spec": {
            "nodeName": "gpu-node-04",
            "restartPolicy": "Never",
            "containers": [
                {
                    "name": "main",
                    "image": "busybox:1.36",
                    "command": ["gpu-burn"],  # not in the command table: exits 127
                    "resources": {"requests": {"nvidia.com/gpu": "2"}},
                }
            ],
        },
    }
    core.create_namespaced_pod("default", pod)
    eventually(
        lambda: sim.cluster.get("Pod", "default", "burn-in")["status"]["phase"] == "Failed",
        what="burn-in to fail",
    )

    result: Any = run_action("k8s.pods_on_nodes", nodes=["gpu-node-04"]).result

    burn_in = next(p for p in result.pods["gpu-node-04"] if p.name == "burn-in")
    assert (burn_in.phase, burn_in.gpus) == ("Failed", 2)
    assert result.gpus_requested == {"gpu-node-04": 4}


def test_pods_using_a_claim_are_the_trainers_on_all_four_nodes(
    run_action: RunAction, sim: SimHandle
) -> None:
    result: Any = run_action("k8s.pods_using_volume", claim="ml/datasets").result

    assert result.ok is True
    assert result.summary == (
        "4 live pods in 1 namespace on 4 nodes use claim ml/datasets (1 claim)"
    )
    assert _users(result) == TRAINERS
    assert [p.mounts for p in result.pods] == [["ml/datasets"]] * 4
    assert (result.claims, result.per_namespace) == (["ml/datasets"], {"ml": 4})
    assert result.nodes == ["gpu-node-01", "gpu-node-02", "gpu-node-03", "gpu-node-04"]
    # Only the claim's namespace is listed.
    assert sim.cluster.requests_made("GET", "/api/v1/pods") == []
    assert len(sim.cluster.requests_made("GET", "/api/v1/namespaces/ml/pods")) == 1


def test_an_nfs_server_covers_the_claims_bound_to_its_volumes_and_inline_mounts(
    run_action: RunAction, sim: SimHandle
) -> None:
    inline = {"name": "scratch", "nfs": {"server": NFS, "path": "/exports/scratch"}}
    sim.cluster.add_pod("default", "notebook", "gpu-node-02", volumes=[inline])

    result: Any = run_action("k8s.pods_using_volume", nfs_server=NFS.upper()).result
    other: Any = run_action("k8s.pods_using_volume", nfs_server="10.0.0.9").result

    assert ("default", "notebook", "gpu-node-02") in _users(result)
    notebook = next(p for p in result.pods if p.name == "notebook")
    assert notebook.mounts == [f"{NFS}:/exports/scratch"]
    assert result.per_namespace == {"default": 1, "ml": 4}
    assert result.claims == ["ml/datasets"]
    assert (other.ok, other.pods, other.claims) == (True, [], [])
    assert (
        other.summary == "0 live pods in 0 namespaces on 0 nodes use NFS server 10.0.0.9 (0 claims)"
    )


def test_a_storage_class_covers_its_claims_in_every_namespace(
    run_action: RunAction, sim: SimHandle
) -> None:
    claim = {
        "metadata": {"name": "cache"},
        "spec": {
            "storageClassName": "nfs-client",
            "accessModes": ["ReadWriteMany"],
            "resources": {"requests": {"storage": "1Ti"}},
        },
    }
    client.CoreV1Api(sim.api_client()).create_namespaced_persistent_volume_claim("serving", claim)
    sim.cluster.add_pod("serving", "warmer", "gpu-node-03", volumes=[_claim_volume("cache")])

    result: Any = run_action("k8s.pods_using_volume", storage_class="nfs-client").result

    assert result.claims == ["ml/datasets", "serving/cache"]
    assert result.per_namespace == {"ml": 4, "serving": 1}
    assert ("serving", "warmer", "gpu-node-03") in _users(result)


def test_finished_pods_are_left_out_and_unscheduled_ones_have_no_node(
    run_action: RunAction, sim: SimHandle
) -> None:
    core = client.CoreV1Api(sim.api_client())

    def pod(name: str, **spec: Any) -> dict[str, Any]:
        container = {"name": "main", "image": "busybox:1.36", "command": ["eval.py"]}
        container.update(spec.pop("container", {}))
        body = {"containers": [container], "volumes": [_claim_volume("datasets")], **spec}
        return {"metadata": {"name": name}, "spec": body}

    core.create_namespaced_pod(
        "ml", pod("eval-once", nodeName="gpu-node-01", restartPolicy="Never")
    )
    huge = {"resources": {"requests": {"nvidia.com/gpu": "64"}}}
    core.create_namespaced_pod("ml", pod("too-big", container=huge))
    eventually(
        lambda: sim.cluster.get("Pod", "ml", "eval-once")["status"]["phase"] == "Failed",
        what="eval-once to finish",
    )

    result: Any = run_action("k8s.pods_using_volume", claim="ml/datasets").result

    assert _users(result) == [("ml", "too-big", ""), *TRAINERS]
    assert next(p for p in result.pods if p.name == "too-big").phase == "Pending"
    assert result.nodes == ["gpu-node-01", "gpu-node-02", "gpu-node-03", "gpu-node-04"]


def test_a_claim_or_storage_class_that_does_not_exist_is_named(
    run_action: RunAction, sim: SimHandle
) -> None:
    claim: Any = run_action("k8s.pods_using_volume", claim="ml/checkpoints").result
    sc: Any = run_action("k8s.pods_using_volume", storage_class="fast-nvme").result

    assert claim.ok is False
    assert claim.summary == (
        "cannot read claim ml/checkpoints: it does not exist (kubectl get pvc -n ml)"
    )
    assert sc.ok is False
    assert sc.summary == (
        "cannot read storage class fast-nvme: it does not exist (kubectl get storageclass)"
    )
    assert sim.cluster.requests_made("GET", "*/pods") == []


def test_a_large_namespace_is_read_in_pages(run_action: RunAction, sim: SimHandle) -> None:
    for i in range(520):
        sim.cluster.add_pod(
            "ml", f"sweep-{i:03d}", "gpu-node-01", volumes=[_claim_volume("datasets")]
        )

    result: Any = run_action("k8s.pods_using_volume", claim="ml/datasets").result

    assert len(result.pods) == 524
    first, second = sim.cluster.requests_made("GET", "/api/v1/namespaces/ml/pods")
    assert first.query["limit"] == second.query["limit"] == "500"
    assert "continue" not in first.query and second.query["continue"]

"""Jobs through the official client: pinned pods, the scenario's command table, cascades."""

from __future__ import annotations

from typing import Any

from kubernetes import client

from bot.sim import SimHandle
from tests.sim.waiting import eventually


def test_job_pinned_to_a_cordoned_node_runs_the_scenario_command(sim: SimHandle, api: Any) -> None:
    core, batch = client.CoreV1Api(api), client.BatchV1Api(api)
    core.patch_node("gpu-node-03", {"spec": {"unschedulable": True}})
    job = client.V1Job(
        metadata=client.V1ObjectMeta(generate_name="gpu-check-"),
        spec=client.V1JobSpec(
            backoff_limit=0,
            template=client.V1PodTemplateSpec(
                spec=client.V1PodSpec(
                    node_name="gpu-node-03",
                    restart_policy="Never",
                    containers=[
                        client.V1Container(name="check", image="cuda", command=["nvidia-smi"])
                    ],
                )
            ),
        ),
    )

    created = batch.create_namespaced_job("default", job)
    name = created.metadata.name

    def finished() -> Any:
        status = batch.read_namespaced_job(name, "default").status
        return status if (status.succeeded or status.failed) else None

    status = eventually(finished, what="the job to finish")
    pod = core.list_namespaced_pod("default", label_selector=f"job-name={name}").items[0]
    log = core.read_namespaced_pod_log(pod.metadata.name, "default")

    assert name.startswith("gpu-check-")
    assert status.failed == 1 and status.succeeded == 0
    assert [c.type for c in status.conditions if c.status == "True"][-1] == "Failed"
    assert pod.spec.node_name == "gpu-node-03" and pod.status.phase == "Failed"
    assert pod.status.container_statuses[0].state.terminated.exit_code == 255
    assert "Unable to determine the device handle" in log
    assert sim.cluster.pod_log("default", pod.metadata.name) == log


def test_job_log_honours_tail_lines_and_unknown_commands_exit_127(api: Any) -> None:
    core, batch = client.CoreV1Api(api), client.BatchV1Api(api)

    def run(command: list[str]) -> client.V1Pod:
        job = batch.create_namespaced_job(
            "default",
            {
                "metadata": {"generateName": "probe-"},
                "spec": {
                    "backoffLimit": 0,
                    "template": {
                        "spec": {
                            "nodeName": "gpu-node-01",
                            "restartPolicy": "Never",
                            "containers": [{"name": "c", "image": "cuda", "command": command}],
                        }
                    },
                },
            },
        )

        def done() -> client.V1Pod | None:
            selector = f"job-name={job.metadata.name}"
            items = core.list_namespaced_pod("default", label_selector=selector).items
            return items[0] if items and items[0].status.phase in ("Succeeded", "Failed") else None

        return eventually(done, what=f"{command} to finish")

    ecc = run(["nvidia-smi", "-q", "-d", "ECC"])
    missing = run(["xid-doctor", "--all"])

    tail = core.read_namespaced_pod_log(ecc.metadata.name, "default", tail_lines=1)
    head = core.read_namespaced_pod_log(ecc.metadata.name, "default", limit_bytes=12)
    assert ecc.status.phase == "Succeeded"
    assert tail == "            DRAM Uncorrectable            : 0\n"
    assert head == "============"
    assert missing.status.container_statuses[0].state.terminated.exit_code == 127
    assert "command not found" in core.read_namespaced_pod_log(missing.metadata.name, "default")


def test_deleting_a_job_in_background_deletes_its_pods(sim: SimHandle, api: Any) -> None:
    core, batch = client.CoreV1Api(api), client.BatchV1Api(api)
    batch.create_namespaced_job(
        "default",
        {
            "metadata": {"name": "sleepy"},
            "spec": {
                "template": {
                    "spec": {
                        "restartPolicy": "Never",
                        "containers": [{"name": "c", "image": "busybox", "command": ["sleep"]}],
                    }
                }
            },
        },
    )
    eventually(
        lambda: core.list_namespaced_pod("default", label_selector="job-name=sleepy").items,
        what="the job's pod",
    )

    batch.delete_namespaced_job("sleepy", "default", propagation_policy="Background")

    assert batch.list_namespaced_job("default").items == []
    eventually(
        lambda: not core.list_namespaced_pod("default", label_selector="job-name=sleepy").items,
        what="the job's pods to go",
    )

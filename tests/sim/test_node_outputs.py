"""The simulator's node tools: nvidia-smi, dcgmi and ibstat rendered from each node's machine
and the pods on it, in formats the bot's own parsers read; and where they rank against
the scenario's command table."""

from __future__ import annotations

from typing import Any

import pytest

from bot.actions.gpu import dcgmi, nvidia_smi
from bot.actions.gpu.reset import parse_compute_apps
from bot.actions.infiniband import ibstat
from bot.sim import jobs, node_outputs, pods, seed
from bot.sim.cluster import Cluster
from bot.sim.kinds import POD
from bot.sim.node_outputs import Answer

QUERY = (
    "--query-gpu=index,uuid,name,pci.bus_id,temperature.gpu,utilization.gpu,memory.used,"
    "memory.total,power.draw,ecc.errors.uncorrected.aggregate.total,remapped_rows.pending,"
    "clocks_throttle_reasons.active"
)
APPS = "--query-compute-apps=gpu_uuid,pid,process_name,used_memory"


@pytest.fixture
def cluster() -> Cluster:
    return Cluster(seed())


def run(cluster: Cluster, node: str, *argv: str) -> Answer:
    answer = node_outputs.answer(cluster, node, list(argv))
    assert answer is not None, f"{argv} is not rendered"
    return answer


def query(cluster: Cluster, node: str) -> nvidia_smi.QueryGpuOutput:
    answer = run(cluster, node, "nvidia-smi", QUERY, "--format=csv")
    assert answer.exit_code == 0, answer.output
    return nvidia_smi.parse_query_gpu(answer.output)


def gpu_pod(cluster: Cluster, node: str) -> dict[int, str]:
    return {i: p["metadata"]["name"] for i, p in node_outputs.gpu_users(cluster, node).items()}


def test_query_gpu_prints_the_real_csv_header_with_units_and_one_row_per_gpu(
    cluster: Cluster,
) -> None:
    answer = run(cluster, "gpu-node-01", "nvidia-smi", QUERY, "--format=csv")
    header, first, *_ = answer.output.splitlines()

    assert header == (
        "index, uuid, name, pci.bus_id, temperature.gpu, utilization.gpu [%], "
        "memory.used [MiB], memory.total [MiB], power.draw [W], "
        "ecc.errors.uncorrected.aggregate.total, remapped_rows.pending, "
        "clocks_event_reasons.active"
    )
    machine = cluster.machines["gpu-node-01"]
    assert first.startswith(f"0, {machine.gpus[0].uuid}, NVIDIA H100 80GB HBM3, 00000000:18:00.0, ")
    assert first.endswith(", 97 %, 70956 MiB, 81559 MiB, 652.31 W, 0, No, 0x0000000000000000")
    parsed = nvidia_smi.parse_query_gpu(answer.output)
    assert [g.index for g in parsed.gpus] == list(range(8))
    assert [g.uuid for g in parsed.gpus] == [g.uuid for g in machine.gpus]
    # trainer-0 holds GPUs 0-3; the other four idle at their resting temperature.
    assert [g.utilization_pct for g in parsed.gpus] == [97] * 4 + [0] * 4
    assert {g.temperature_c for g in parsed.gpus[4:]} == {34}
    assert parsed.gpus[7].clock_event_reasons == ["Idle"]


def test_noheader_nounits_gives_bare_values_in_the_queried_order(cluster: Cluster) -> None:
    answer = run(
        cluster,
        "gpu-node-04",
        "nvidia-smi",
        "--query-gpu=memory.used,index",
        "--format=csv,noheader,nounits",
    )

    assert answer.output.splitlines() == ["70956, 0", "70956, 1", "70956, 2", "70956, 3"] + [
        f"0, {i}" for i in range(4, 8)
    ]


def test_an_unknown_field_is_refused_as_nvidia_smi_refuses_it(cluster: Cluster) -> None:
    answer = run(cluster, "gpu-node-01", "nvidia-smi", "--query-gpu=index,foo.bar", "--format=csv")

    assert (answer.exit_code, answer.output.strip()) == (
        2,
        'Field "foo.bar" is not a valid field to query.',
    )


def test_a_lost_gpu_vanishes_from_nvidia_smi_and_the_others_keep_their_indices(
    cluster: Cluster,
) -> None:
    cluster.lose_gpu("gpu-node-02", 5)

    parsed = query(cluster, "gpu-node-02")

    assert [g.index for g in parsed.gpus] == [0, 1, 2, 3, 4, 6, 7]
    assert nvidia_smi.missing_gpus(8, parsed) == [5]
    listed = run(cluster, "gpu-node-02", "nvidia-smi", "-L").output
    assert "GPU 5:" not in listed and listed.count("(UUID: GPU-") == 7


def test_heat_and_ecc_show_as_nvidia_smi_shows_them(cluster: Cluster) -> None:
    cluster.heat_gpu("gpu-node-04", 6, 91)
    cluster.machines["gpu-node-04"].gpus[7].ecc_uncorrected = 2

    gpus = query(cluster, "gpu-node-04").gpus

    assert gpus[6].temperature_c == 91
    assert gpus[6].clock_event_reasons == ["Idle", "SW Thermal Slowdown", "HW Thermal Slowdown"]
    assert (gpus[7].ecc_uncorrected_total, gpus[7].remapped_rows_pending) == (2, True)


def test_gpus_go_to_pods_oldest_first_and_show_as_compute_processes(cluster: Cluster) -> None:
    assert gpu_pod(cluster, "gpu-node-01") == dict.fromkeys(range(4), "trainer-0")
    node02 = gpu_pod(cluster, "gpu-node-02")
    assert [node02[i] for i in range(4)] == ["trainer-1"] * 4
    assert node02[4].startswith("llm-inference-") and node02[5] == node02[4]
    assert 6 not in node02 and 7 not in node02

    answer = run(cluster, "gpu-node-02", "nvidia-smi", APPS, "--format=csv,noheader,nounits")
    processes = parse_compute_apps(answer.output)

    machine = cluster.machines["gpu-node-02"]
    assert [p.gpu_uuid for p in processes] == [g.uuid for g in machine.gpus[:6]]
    assert [p.process_name for p in processes] == ["/usr/bin/python3"] * 4 + [
        "/opt/tritonserver/bin/tritonserver"
    ] * 2
    assert len({p.pid for p in processes}) == 6
    assert {p.used_memory_mib for p in processes} == {70956}


def test_compute_apps_with_a_header_name_used_memory_as_nvidia_smi_does(
    cluster: Cluster,
) -> None:
    answer = run(cluster, "gpu-node-01", "nvidia-smi", APPS, "--format=csv")

    assert answer.output.splitlines()[0] == "gpu_uuid, pid, process_name, used_gpu_memory [MiB]"
    assert answer.output.splitlines()[1].endswith(", /usr/bin/python3, 70956 MiB")


def test_a_finished_pod_frees_its_gpus(cluster: Cluster) -> None:
    trainer = cluster.store.get(POD, "ml", "trainer-0")
    pods.mark_finished(trainer, 0, cluster.now())

    assert gpu_pod(cluster, "gpu-node-01") == {}
    answer = run(cluster, "gpu-node-01", "nvidia-smi", APPS, "--format=csv,noheader")
    assert answer.output == ""


def test_a_reset_is_refused_while_the_gpu_is_in_use_and_changes_nothing(
    cluster: Cluster,
) -> None:
    answer = run(cluster, "gpu-node-01", "nvidia-smi", "--gpu-reset", "-i", "2")

    assert answer.exit_code == 255
    assert answer.output.startswith(
        "The following GPUs could not be reset:\n"
        "  GPU 00000000:38:00.0: In use by another client\n\n"
        "1 device is currently being used by one or more other processes"
    )
    assert answer.effect is None


def test_a_reset_of_an_idle_gpu_succeeds_and_applies_its_pending_row_remap(
    cluster: Cluster,
) -> None:
    gpu = cluster.machines["gpu-node-01"].gpus[6]
    gpu.ecc_uncorrected = 2

    answer = run(cluster, "gpu-node-01", "nvidia-smi", "--gpu-reset", "-i", "6")

    assert (answer.exit_code, answer.output) == (
        0,
        "GPU 00000000:78:00.0 was successfully reset.\nAll done.\n",
    )
    assert query(cluster, "gpu-node-01").gpus[6].remapped_rows_pending is True
    assert answer.effect is not None
    answer.effect()
    assert gpu.resets == 1
    after = query(cluster, "gpu-node-01").gpus[6]
    assert (after.remapped_rows_pending, after.ecc_uncorrected_total) == (False, 2)


def test_a_lost_gpu_cannot_be_reset_and_a_wrong_index_finds_no_device(
    cluster: Cluster,
) -> None:
    cluster.lose_gpu("gpu-node-04", 7)

    lost = run(cluster, "gpu-node-04", "nvidia-smi", "--gpu-reset", "-i", "7")
    nowhere = run(cluster, "gpu-node-04", "nvidia-smi", "-r", "-i", "9")

    assert lost.exit_code == 15
    assert lost.output == (
        "Unable to determine the device handle for GPU 00000000:88:00.0: GPU is lost.  "
        "Reboot the system to recover this GPU\n"
    )
    assert (nowhere.exit_code, nowhere.output) == (6, "No devices were found\n")


def test_dcgmi_diag_json_passes_a_healthy_node_in_the_dcgm_3_shape(cluster: Cluster) -> None:
    answer = run(cluster, "gpu-node-01", "dcgmi", "diag", "-r", "2", "-j")

    assert answer.exit_code == 0
    assert answer.output.startswith('{\n   "DCGM GPU Diagnostic" : {\n')
    report = dcgmi.parse(answer.output)
    assert report.passed and report.version == "3.3.5"
    assert report.by_gpu() == dict.fromkeys(range(8), "Pass")
    assert [r.test for r in report.results if r.gpu is None][:2] == ["Denylist", "NVML Library"]
    assert {r.test for r in report.results if r.gpu == 0} == {
        "PCIe",
        "GPU Memory",
        "Memory Bandwidth",
    }


def test_dcgmi_fails_lost_hot_and_ecc_gpus_each_with_dcgms_own_error(cluster: Cluster) -> None:
    cluster.lose_gpu("gpu-node-03", 1)
    cluster.heat_gpu("gpu-node-03", 2, 92)
    cluster.machines["gpu-node-03"].gpus[5].ecc_uncorrected = 3

    answer = run(cluster, "gpu-node-03", "dcgmi", "diag", "-r", "3", "-j")
    report = dcgmi.parse(answer.output)

    assert answer.exit_code == node_outputs.DCGM_FAILED
    assert report.failed_gpus() == [1, 2, 5]
    errors = {(r.test, r.gpu): [w.error_id for w in r.warnings] for r in report.with_status("Fail")}
    assert errors[("PCIe", 1)] == [65]
    assert errors[("Targeted Power", 2)] == [42]
    assert errors[("GPU Memory", 5)] == [4]
    assert errors[("Page Retirement/Row Remap", None)] == [85]
    assert errors[("Permissions and OS Blocks", None)] == [20]
    assert ("PCIe", 2) not in errors  # heat shows under load, not on the bus test


def test_level_1_checks_only_the_deployment_so_a_hot_gpu_passes_it(cluster: Cluster) -> None:
    cluster.heat_gpu("gpu-node-03", 2, 92)

    report = dcgmi.parse(run(cluster, "gpu-node-03", "dcgmi", "diag", "-r", "1", "-j").output)

    assert report.passed
    assert {r.category for r in report.results} == {"Deployment"}


def test_dcgmi_without_json_prints_the_result_table(cluster: Cluster) -> None:
    cluster.lose_gpu("gpu-node-03", 1)

    answer = run(cluster, "gpu-node-03", "dcgmi", "diag", "-r", "2")

    lines = answer.output.splitlines()
    assert lines[0] == "Successfully ran diagnostic for group."
    assert "| PCIe                      | Fail - GPU: 1" in answer.output
    assert "| PCIe                      | Pass - GPU: 0, 2, 3, 4, 5, 6, 7" in answer.output
    assert answer.exit_code == node_outputs.DCGM_FAILED


def test_ibstat_prints_every_hca_and_a_down_port_as_ibstat_does(cluster: Cluster) -> None:
    cluster.set_ib_port("gpu-node-02", "mlx5_1", False)

    adapters = ibstat.parse(run(cluster, "gpu-node-02", "ibstat").output)

    assert [a.name for a in adapters] == ["mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"]
    states = [(p.state, p.physical_state, p.rate) for a in adapters for p in a.ports]
    assert states == [
        ("Active", "LinkUp", 200),
        ("Down", "Polling", 10),
        ("Active", "LinkUp", 200),
        ("Active", "LinkUp", 200),
    ]
    assert adapters[0].ca_type == "MT4123"
    assert adapters[0].node_guid == adapters[0].ports[0].port_guid


def test_ibstat_of_one_port_and_of_an_unknown_hca(cluster: Cluster) -> None:
    one = run(cluster, "gpu-node-01", "ibstat", "mlx5_3", "1")
    unknown = run(cluster, "gpu-node-01", "ibstat", "mlx5_9")

    [adapter] = ibstat.parse(one.output)
    assert one.output.startswith("CA: 'mlx5_3'\nPort 1:\nState: Active\n")
    assert (adapter.name, [p.number for p in adapter.ports]) == ("mlx5_3", [1])
    assert unknown.exit_code == 255
    assert unknown.output == "ibpanic: [4711] main: 'mlx5_9' IB device can't be found\n"


def test_other_commands_are_not_rendered(cluster: Cluster) -> None:
    assert node_outputs.answer(cluster, "gpu-node-01", ["dmesg"]) is None
    assert node_outputs.answer(cluster, "gpu-node-01", ["nvidia-smi", "topo", "-m"]) is None
    assert node_outputs.answer(cluster, "gpu-node-99", ["ibstat"]) is None


def job_pod(node: str, *argv: str) -> dict[str, Any]:
    return {"spec": {"nodeName": node, "containers": [{"name": "run", "command": list(argv)}]}}


def test_the_scenario_table_wins_when_exact_or_for_the_node_then_the_hardware_answers(
    cluster: Cluster,
) -> None:
    exact, _ = jobs.run_of(cluster, job_pod("gpu-node-01", "dcgmi", "diag", "-r", "1"))
    on_node_03, _ = jobs.run_of(
        cluster, job_pod("gpu-node-03", "nvidia-smi", QUERY, "--format=csv")
    )
    hardware, _ = jobs.run_of(cluster, job_pod("gpu-node-01", "nvidia-smi", QUERY, "--format=csv"))
    default, _ = jobs.run_of(cluster, job_pod("gpu-node-01", "nvidia-smi", "topo", "-m"))
    unknown, _ = jobs.run_of(cluster, job_pod("gpu-node-01", "ibdiagnet"))

    assert exact.output.startswith("Successfully ran diagnostic for group.")
    assert "Deployment                | Pass" in exact.output  # the table's, not rendered
    assert (on_node_03.exit_code, on_node_03.output) == (
        255,
        "Unable to determine the device handle for GPU0000:3B:00.0: Unknown Error\n",
    )
    assert hardware.output.startswith("index, uuid, name, pci.bus_id")
    assert default.output.startswith("+-----")  # the default first-word nvidia-smi entry
    assert unknown.exit_code == 127


def test_a_reset_changes_the_machine_when_its_job_ends_not_when_it_is_planned(
    cluster: Cluster,
) -> None:
    pod = job_pod("gpu-node-01", "nvidia-smi", "--gpu-reset", "-i", "5")

    entry, effect = jobs.run_of(cluster, pod)
    assert cluster.machines["gpu-node-01"].gpus[5].resets == 0
    assert entry.exit_code == 0 and effect is not None
    effect()
    assert cluster.machines["gpu-node-01"].gpus[5].resets == 1

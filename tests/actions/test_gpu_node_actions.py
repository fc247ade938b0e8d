"""GPU and InfiniBand diagnostics through node Jobs on the simulated cluster: health
snapshots, DCGM diagnostics, GPU resets and InfiniBand port checks, each against the
hardware state the simulator keeps for every node."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from bot.errors import ParamsInvalid
from bot.sim import SimHandle
from bot.sim.scenario import Command
from tests.actions.conftest import Recorder, RunAction
from tests.sim.waiting import eventually

JOBS = "/apis/batch/v1/namespaces/runbook-bot/jobs*"


@pytest.fixture
def sim_with_namespace(sim: SimHandle) -> Iterator[SimHandle]:
    """The seed cluster with the bot's namespace, as the deploy manifests create it."""
    client.CoreV1Api(sim.api_client()).create_namespace({"metadata": {"name": "runbook-bot"}})
    yield sim


def jobs_created(sim: SimHandle) -> int:
    return len(sim.cluster.requests_made("POST", JOBS))


def resets(sim: SimHandle, node: str, index: int) -> int:
    return sim.cluster.machine(node).gpus[index].resets


def set_ecc(sim: SimHandle, node: str, index: int, errors: int) -> None:
    with sim.cluster.lock:
        sim.cluster.machines[node].gpus[index].ecc_uncorrected = errors


@pytest.mark.parametrize(
    ("name", "raw", "field"),
    [
        ("gpu.reset", {"node": "gpu-node-01", "gpu": 64}, "gpu"),
        ("gpu.reset", {"node": "gpu-node-01; reboot", "gpu": 1}, "node"),
        ("gpu.diag", {"node": "gpu-node-01", "level": 4}, "level"),
        ("gpu.diag", {"node": "gpu-node-01", "image": "$(id)"}, "image"),
        ("gpu.health_snapshot", {"node": "gpu-node-01", "command": ["sh"]}, "command"),
        ("ib.port_status", {"node": "gpu-node-01", "expected_rate": 0}, "expected_rate"),
    ],
)
def test_bad_parameters_are_refused_before_any_job(
    run_action: RunAction,
    sim_with_namespace: SimHandle,
    name: str,
    raw: dict[str, Any],
    field: str,
) -> None:
    with pytest.raises(ParamsInvalid, match=rf"{name}: invalid parameters: {field}="):
        run_action(name, **raw)

    assert jobs_created(sim_with_namespace) == 0


# -- gpu.health_snapshot ----------------------------------------------------------------


def test_a_healthy_node_shows_eight_gpus_and_no_finding(
    run_action: RunAction, sim_with_namespace: SimHandle, recorder: Recorder
) -> None:
    result: Any = run_action("gpu.health_snapshot", node="gpu-node-01").result

    assert (result.ok, result.healthy, result.findings) == (True, True, [])
    assert (result.expected_gpus, result.visible_gpus, result.missing_count) == (8, 8, 0)
    assert result.summary == "gpu-node-01: all 8 GPUs healthy"
    machine = sim_with_namespace.cluster.machine("gpu-node-01")
    assert [(g.index, g.uuid, g.bus_id) for g in result.gpus] == [
        (g.index, g.uuid, g.pci_bus_id) for g in machine.gpus
    ]
    # trainer-0 runs on GPUs 0-3.
    assert [g.utilization_pct for g in result.gpus] == [97] * 4 + [0] * 4
    assert result.gpus[0].memory_total_mib == 81559
    assert result.gpus[5].clock_event_reasons == ["Idle"]
    assert result.gpus[0].remapped_rows_pending is False
    assert recorder.types() == ["action.started", "action.finished"]
    assert jobs_created(sim_with_namespace) == 1


def test_a_lost_gpu_is_a_finding_by_index_and_fails_dcgmi_on_that_gpu(
    run_action: RunAction, sim_with_namespace: SimHandle
) -> None:
    sim_with_namespace.cluster.lose_gpu("gpu-node-02", 5)

    snapshot: Any = run_action("gpu.health_snapshot", node="gpu-node-02").result
    diag: Any = run_action("gpu.diag", node="gpu-node-02").result

    assert (snapshot.ok, snapshot.healthy) == (True, False)
    assert (snapshot.visible_gpus, snapshot.missing_count, snapshot.missing) == (7, 1, [5])
    [finding] = snapshot.findings
    assert (finding.kind, finding.gpu) == ("missing", 5)
    assert finding.message.startswith("GPU 5 missing: fell off the bus? XID 79")
    assert snapshot.summary.startswith(
        "gpu-node-02: 7/8 GPUs visible; GPU 5 missing: fell off the bus? XID 79"
    )
    assert (diag.ok, diag.passed, diag.level, diag.failed_gpus) == (True, False, 2, [5])
    assert diag.gpus[5] == "Fail" and diag.gpus[4] == "Pass"
    assert diag.summary.startswith("dcgmi diag -r 2 FAILED on gpu-node-02 (GPU 5): ")
    assert "PCIe on GPU 5: API call nvmlDeviceGetHandleByIndex_v2 failed for GPU 5" in diag.summary
    assert diag.exit_code == 226 and diag.dcgm_version == "3.3.5"


def test_renumbered_survivors_are_reported_by_count_and_bus_ids(
    run_action: RunAction, sim_with_namespace: SimHandle
) -> None:
    # After a rescan NVML numbers the survivors 0..6: the count is all that is left.
    rows = "\n".join(
        f"{i}, GPU-{i:08x}-0000-0000-0000-000000000000, NVIDIA H100 80GB HBM3, "
        f"00000000:{0x18 + 0x10 * i:02X}:00.0, 40, 0 %, 0 MiB, 81559 MiB, 70.00 W, 0"
        for i in range(7)
    )
    header = (
        "index, uuid, name, pci.bus_id, temperature.gpu, utilization.gpu [%], "
        "memory.used [MiB], memory.total [MiB], power.draw [W], "
        "ecc.errors.uncorrected.aggregate.total"
    )
    sim_with_namespace.cluster.commands.append(
        Command(command=["nvidia-smi"], node="gpu-node-04", output=f"{header}\n{rows}\n")
    )

    result: Any = run_action("gpu.health_snapshot", node="gpu-node-04").result

    assert (result.missing_count, result.missing) == (1, [])
    [finding] = result.findings
    assert finding.gpu is None
    assert finding.message.startswith("1 of 8 GPUs missing: fell off the bus? XID 79; the indices")
    assert "00000000:18:00.0, 00000000:28:00.0" in finding.message


def test_a_hot_gpu_is_a_finding_with_its_slowdown_and_fails_dcgmi_under_load(
    run_action: RunAction, sim_with_namespace: SimHandle
) -> None:
    sim_with_namespace.cluster.heat_gpu("gpu-node-04", 6, 91)

    snapshot: Any = run_action("gpu.health_snapshot", node="gpu-node-04").result
    diag: Any = run_action("gpu.diag", node="gpu-node-04", level=2).result

    assert [(f.kind, f.gpu) for f in snapshot.findings] == [("hot", 6), ("slowdown", 6)]
    assert snapshot.findings[0].message.startswith("GPU 6 at 91 C (>= 85 C)")
    assert snapshot.findings[1].message == (
        "GPU 6 clocks slowed: SW Thermal Slowdown, HW Thermal Slowdown"
    )
    assert [g.healthy for g in snapshot.gpus] == [True] * 6 + [False, True]
    assert (diag.passed, diag.failed_gpus) == (False, [6])
    assert diag.failures == [
        "Memory Bandwidth on GPU 6: Temperature 91 of GPU 6 exceeded user-specified maximum "
        "allowed temperature 85"
    ]


def test_an_optional_field_the_driver_refuses_is_dropped_and_the_query_rerun(
    run_action: RunAction, sim_with_namespace: SimHandle, recorder: Recorder
) -> None:
    refused = (
        "--query-gpu=index,uuid,name,pci.bus_id,temperature.gpu,utilization.gpu,memory.used,"
        "memory.total,power.draw,ecc.errors.uncorrected.aggregate.total,retired_pages.pending,"
        "remapped_rows.pending,remapped_rows.failure,clocks_throttle_reasons.active"
    )
    sim_with_namespace.cluster.commands.append(
        Command(
            command=["nvidia-smi", refused, "--format=csv"],
            exit_code=2,
            output='Field "remapped_rows.pending" is not a valid field to query.\n\n',
        )
    )

    result: Any = run_action("gpu.health_snapshot", node="gpu-node-01").result

    assert (result.ok, result.healthy) == (True, True)
    assert {g.remapped_rows_pending for g in result.gpus} == {None}
    assert {g.remapped_rows_failure for g in result.gpus} == {False}
    assert "nvidia-smi on gpu-node-01 does not know remapped_rows.pending; asking without" in (
        recorder.progress
    )
    assert jobs_created(sim_with_namespace) == 2


def test_nvidia_smi_failing_outright_is_not_a_snapshot_and_says_what_to_check(
    run_action: RunAction, sim_with_namespace: SimHandle, recorder: Recorder
) -> None:
    # The seed's gpu-node-03 has an nvidia-smi that cannot reach a GPU.
    result: Any = run_action("gpu.health_snapshot", node="gpu-node-03").result

    assert (result.ok, result.healthy, result.missing_count) == (False, False, 8)
    assert result.summary.startswith(
        "gpu-node-03: nvidia-smi exited 255 without listing any GPU: Unable to determine "
        "the device handle for GPU0000:3B:00.0: Unknown Error; a GPU the driver cannot "
        "reach has usually fallen off the bus (XID 79)"
    )
    assert recorder.types() == ["action.started", "action.failed"]


def test_ecc_errors_show_a_pending_remap_that_a_reset_applies_and_diag_then_passes(
    run_action: RunAction, sim_with_namespace: SimHandle
) -> None:
    sim = sim_with_namespace
    set_ecc(sim, "gpu-node-01", 6, 2)

    before: Any = run_action("gpu.health_snapshot", node="gpu-node-01").result
    failed: Any = run_action("gpu.diag", node="gpu-node-01").result
    reset: Any = run_action("gpu.reset", node="gpu-node-01", gpu=6).result
    after: Any = run_action("gpu.health_snapshot", node="gpu-node-01").result
    passed: Any = run_action("gpu.diag", node="gpu-node-01").result

    assert [(f.kind, f.gpu) for f in before.findings] == [("ecc", 6), ("remap_pending", 6)]
    assert failed.failed_gpus == [6]
    assert "GPU Memory on GPU 6: Detected 2 volatile double-bit ECC error(s) in GPU 6." in (
        failed.failures
    )
    assert (reset.ok, reset.reset) == (True, True)
    assert [f.kind for f in after.findings] == ["ecc"]  # the aggregate count stays
    assert (passed.passed, passed.failed_gpus) == (True, [])
    assert passed.summary == "dcgmi diag -r 2 passed on gpu-node-01 (33 results, 8 GPUs)"


# -- gpu.reset ----------------------------------------------------------------------------


def test_a_reset_is_refused_with_the_processes_while_a_pod_uses_the_gpu(
    run_action: RunAction, sim_with_namespace: SimHandle, recorder: Recorder
) -> None:
    sim = sim_with_namespace

    result: Any = run_action("gpu.reset", node="gpu-node-01", gpu=2).result

    assert result.ok is False
    assert result.summary.startswith("GPU 2 on gpu-node-01 is in use by 1 process: pid ")
    assert "/usr/bin/python3 (70956 MiB); drain its workloads first (k8s.drain" in result.summary
    assert resets(sim, "gpu-node-01", 2) == 0
    assert jobs_created(sim) == 2  # the two looks; no reset Job
    assert recorder.types() == ["action.started", "action.failed"]


def test_an_idle_gpu_is_reset_by_a_privileged_job(
    run_action: RunAction, sim_with_namespace: SimHandle
) -> None:
    sim = sim_with_namespace
    # Keep the Jobs (the delete is refused) to look at how the reset ran.
    sim.cluster.fail_requests(JOBS, 403, times=3, method="DELETE")

    result: Any = run_action("gpu.reset", node="gpu-node-01", gpu=6).result

    assert (result.ok, result.reset, result.gpu) == (True, True, 6)
    assert result.uuid == sim.cluster.machine("gpu-node-01").gpus[6].uuid
    assert result.bus_id == "00000000:78:00.0"
    assert result.output == "GPU 00000000:78:00.0 was successfully reset.\nAll done.\n"
    assert result.summary.startswith("GPU 6 (00000000:78:00.0) on gpu-node-01 was reset; verify")
    assert resets(sim, "gpu-node-01", 6) == 1
    pods = {
        tuple(c["command"]): (c["securityContext"]["privileged"], spec["hostPID"])
        for job in sim.cluster.objects("Job", "runbook-bot")
        for spec in [job["spec"]["template"]["spec"]]
        for c in spec["containers"]
    }
    assert pods == {
        ("nvidia-smi", "--query-gpu=index,uuid,pci.bus_id", "--format=csv,noheader"): (
            False,
            False,
        ),
        (
            "nvidia-smi",
            "--query-compute-apps=gpu_uuid,pid,process_name,used_memory",
            "--format=csv,noheader,nounits",
        ): (False, True),
        ("nvidia-smi", "--gpu-reset", "-i", "6"): (True, False),
    }


def test_a_gpu_freed_by_draining_its_node_can_be_reset(
    run_action: RunAction, sim_with_namespace: SimHandle
) -> None:
    sim = sim_with_namespace
    refused: Any = run_action("gpu.reset", node="gpu-node-04", gpu=0).result
    assert refused.ok is False and "in use by 1 process" in refused.summary

    drained: Any = run_action("k8s.drain", node="gpu-node-04", reason="reset GPU 0").result
    assert drained.ok, drained.summary
    eventually(
        lambda: ("ml", "trainer-3") not in sim.cluster.snapshot().pods_on("gpu-node-04"),
        what="trainer-3 to leave gpu-node-04",
    )
    result: Any = run_action("gpu.reset", node="gpu-node-04", gpu=0).result

    assert (result.ok, result.reset) == (True, True)
    assert resets(sim, "gpu-node-04", 0) == 1


def test_a_dry_run_looks_for_real_and_only_validates_the_reset(
    run_action: RunAction, sim_with_namespace: SimHandle
) -> None:
    sim = sim_with_namespace

    idle: Any = run_action("gpu.reset", ctx_={"dry_run": True}, node="gpu-node-01", gpu=7).result
    busy: Any = run_action("gpu.reset", ctx_={"dry_run": True}, node="gpu-node-01", gpu=1).result

    assert (idle.ok, idle.dry_run, idle.reset) == (True, True, False)
    assert idle.summary == (
        "would reset GPU 7 (00000000:88:00.0) on gpu-node-01: no process uses it (dry run)"
    )
    assert (busy.ok, busy.dry_run) == (False, True)
    assert "is in use by 1 process" in busy.summary
    assert resets(sim, "gpu-node-01", 7) == 0
    posts = sim.cluster.requests_made("POST", JOBS)
    assert [p.query.get("dryRun") for p in posts] == [None, None, "All", None, None]


def test_a_lost_gpu_is_not_reset_and_the_way_out_is_a_power_cycle(
    run_action: RunAction, sim_with_namespace: SimHandle
) -> None:
    sim_with_namespace.cluster.lose_gpu("gpu-node-01", 7)

    result: Any = run_action("gpu.reset", node="gpu-node-01", gpu=7).result

    assert result.ok is False
    assert result.summary == (
        "GPU 7 is not visible to nvidia-smi on gpu-node-01 (it lists 0, 1, 2, 3, 4, 5, 6): a "
        "GPU that fell off the bus (XID 79) cannot be reset; power-cycle the node through its "
        "BMC, then run gpu.diag level=3"
    )


def test_a_reset_the_driver_refuses_says_what_holds_the_gpu(
    run_action: RunAction, sim_with_namespace: SimHandle
) -> None:
    # The look finds no process, but the driver still refuses (an agent holds the GPU).
    sim_with_namespace.cluster.commands.append(
        Command(
            command=["nvidia-smi", "--gpu-reset", "-i", "5"],
            exit_code=255,
            output="The following GPUs could not be reset:\n"
            "  GPU 00000000:68:00.0: In use by another client\n\n"
            "1 device is currently being used by one or more other processes.\n",
        )
    )

    result: Any = run_action("gpu.reset", node="gpu-node-01", gpu=5).result

    assert result.ok is False
    assert result.summary.startswith(
        "GPU 5 on gpu-node-01 was not reset (nvidia-smi exit 255: The following GPUs could "
        "not be reset: GPU 00000000:68:00.0: In use by another client"
    )
    assert "nv-hostengine/DCGM, dcgm-exporter, Fabric Manager" in result.summary


# -- gpu.diag ---------------------------------------------------------------------------


def test_a_healthy_node_passes_level_1_and_the_dry_run_only_validates(
    run_action: RunAction, sim_with_namespace: SimHandle
) -> None:
    sim = sim_with_namespace

    quick: Any = run_action("gpu.diag", node="gpu-node-04", level=1).result
    # As typed on the command line: level=3 arrives as text.
    dry: Any = run_action("gpu.diag", ctx_={"dry_run": True}, node="gpu-node-04", level="3").result

    assert (quick.ok, quick.passed, quick.gpus) == (True, True, {})
    assert quick.summary == "dcgmi diag -r 1 passed on gpu-node-04 (9 results, deployment checks)"
    assert {t.category for t in quick.tests} == {"Deployment"}
    assert (dry.ok, dry.dry_run, dry.summary) == (
        True,
        True,
        "would run `dcgmi diag -r 3 -j` on gpu-node-04 (dry run)",
    )
    [real, validated] = sim.cluster.requests_made("POST", JOBS)
    assert (real.query.get("dryRun"), validated.query.get("dryRun")) == (None, "All")


def test_a_diag_that_cannot_reach_dcgm_says_so(
    run_action: RunAction, sim_with_namespace: SimHandle
) -> None:
    sim_with_namespace.cluster.commands.append(
        Command(
            command=["dcgmi", "diag", "-r", "2", "-j"],
            node="gpu-node-02",
            exit_code=255,
            output="Error: unable to establish a connection to the specified host: localhost\n"
            "Error: Unable to connect to host engine. Host engine connection "
            "invalid/disconnected.\n",
        )
    )

    result: Any = run_action("gpu.diag", node="gpu-node-02").result

    assert result.ok is False
    assert result.summary.startswith(
        "dcgmi diag -r 2 on gpu-node-02 exited 255 without a report (dcgmi diag printed no "
        "JSON: Error: unable to establish a connection to the specified host: localhost); "
        "check that DCGM's host engine runs on the node"
    )


def test_a_diag_dcgm_could_not_run_reports_dcgms_reason(
    run_action: RunAction, sim_with_namespace: SimHandle
) -> None:
    report = Path(__file__).parent.parent / "fixtures" / "dcgmi" / "diag-runtime-error.json"
    sim_with_namespace.cluster.commands.append(
        Command(
            command=["dcgmi", "diag", "-r", "3", "-j"],
            exit_code=255,
            output=report.read_text(encoding="utf-8"),
        )
    )

    result: Any = run_action("gpu.diag", node="gpu-node-01", level=3).result

    assert result.ok is False
    assert result.summary.startswith(
        "dcgmi diag -r 3 could not run on gpu-node-01: Error: unable to establish a "
        "connection to the specified host: localhost"
    )


# -- ib.port_status -----------------------------------------------------------------------


def test_every_infiniband_port_active_at_200_is_healthy(
    run_action: RunAction, sim_with_namespace: SimHandle
) -> None:
    result: Any = run_action("ib.port_status", node="gpu-node-01").result

    assert (result.ok, result.healthy, result.bad_ports) == (True, True, [])
    assert result.summary == ("gpu-node-01: all 4 InfiniBand ports Active/LinkUp at >= 200 Gb/s")
    assert [(p.port, p.state, p.rate) for p in result.ports] == [
        (f"mlx5_{i}/1", "Active", 200) for i in range(4)
    ]


def test_a_down_port_and_a_slow_port_are_named(
    run_action: RunAction, sim_with_namespace: SimHandle
) -> None:
    sim = sim_with_namespace
    sim.cluster.set_ib_port("gpu-node-02", "mlx5_1", False)
    with sim.cluster.lock:
        sim.cluster.machines["gpu-node-02"].ib_ports[3].rate = 100

    result: Any = run_action("ib.port_status", node="gpu-node-02").result

    assert (result.ok, result.healthy) == (True, False)
    assert result.bad_ports == [
        "mlx5_1/1: State Down (want Active), Physical state Polling (want LinkUp), "
        "Rate 10 (want >= 200)",
        "mlx5_3/1: Rate 100 (want >= 200)",
    ]
    assert result.summary.startswith("gpu-node-02: 2 of 4 InfiniBand ports bad: mlx5_1/1: ")
    lower: Any = run_action("ib.port_status", node="gpu-node-02", expected_rate=100).result
    assert [b.split(":")[0] for b in lower.bad_ports] == ["mlx5_1/1"]


def test_an_image_without_ibstat_is_named(
    run_action: RunAction, sim_with_namespace: SimHandle
) -> None:
    sim_with_namespace.cluster.commands.append(
        Command(
            command=["ibstat"],
            node="gpu-node-03",
            exit_code=127,
            output="/bin/sh: 1: ibstat: command not found\n",
        )
    )

    result: Any = run_action("ib.port_status", node="gpu-node-03").result

    assert result.ok is False
    assert result.summary.startswith(
        "ibstat is not in the node Job's image on gpu-node-03; pass image="
    )


def test_diag_runs_on_the_nodes_network_to_reach_its_dcgm_host_engine(
    run_action: RunAction, sim_with_namespace: SimHandle
) -> None:
    sim = sim_with_namespace
    sim.cluster.fail_requests(JOBS, 403, times=3, method="DELETE")  # keep the Job to look

    result: Any = run_action("gpu.diag", node="gpu-node-01", level=1).result

    assert result.ok and result.passed
    (job,) = sim.cluster.objects("Job", "runbook-bot")
    spec = job["spec"]["template"]["spec"]
    assert spec["hostNetwork"] is True
    assert spec["containers"][0]["command"] == ["dcgmi", "diag", "-r", "1", "-j"]

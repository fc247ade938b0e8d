"""The `dcgmi diag -j` parser against DCGM 3.x-shaped reports (tests/fixtures/dcgmi): per
test per GPU verdicts, DCGM's error ids and severities, runtime errors, the DCGM 4.x shape
and older spellings, and text that is no report at all."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bot.actions.gpu import dcgmi

FIXTURES = Path(__file__).parent.parent / "fixtures" / "dcgmi"
DEPLOYMENT = [
    "Denylist",
    "NVML Library",
    "CUDA Main Library",
    "Permissions and OS Blocks",
    "Persistence Mode",
    "Environment Variables",
    "Page Retirement/Row Remap",
    "Graphics Processes",
    "Inforom",
]


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")


def test_a_passing_level_2_report_gives_each_test_on_each_gpu() -> None:
    report = dcgmi.parse(fixture("diag-r2-pass.json"))

    assert report.passed
    assert (report.version, report.driver_version) == ("3.3.5", "535.161.08")
    node_wide = [r for r in report.results if r.gpu is None]
    assert [r.test for r in node_wide] == DEPLOYMENT
    assert {r.category for r in node_wide} == {"Deployment"}
    per_gpu = [(r.category, r.test) for r in report.results if r.gpu == 7]
    assert per_gpu == [
        ("Integration", "PCIe"),
        ("Hardware", "GPU Memory"),
        ("Stress", "Memory Bandwidth"),
    ]
    assert report.by_gpu() == dict.fromkeys(range(8), "Pass")
    assert report.failed_gpus() == []
    pcie0 = next(r for r in report.results if (r.test, r.gpu) == ("PCIe", 0))
    assert pcie0.info == [
        "GPU to Host bandwidth:\t\t25.47 GB/s, GPU 0 Host to GPU bandwidth:\t\t25.91 GB/s"
    ]


def test_a_double_bit_ecc_error_fails_gpu_memory_on_that_gpu_and_the_node_check() -> None:
    report = dcgmi.parse(fixture("diag-r2-fail-dbe.json"))

    assert not report.passed
    assert report.failed_gpus() == [3]
    failed = {(r.test, r.gpu): r.warnings for r in report.with_status("Fail")}
    assert set(failed) == {("GPU Memory", 3), ("Page Retirement/Row Remap", None)}
    [dbe] = failed[("GPU Memory", 3)]
    assert dbe.message == "Detected 2 volatile double-bit ECC error(s) in GPU 3."
    assert (dbe.error_id, dbe.category, dbe.severity, dbe.severity_name) == (4, 10, 6, "reset")
    [remap] = failed[("Page Retirement/Row Remap", None)]
    assert remap.error_id == 85
    assert report.by_gpu()[3] == "Fail"
    assert report.by_gpu()[6] == "Warn"
    [replays] = report.with_status("Warn")
    assert (replays.test, replays.gpu, replays.warnings[0].severity_name) == ("PCIe", 6, "monitor")
    assert [(r.test, r.gpu) for r in report.with_status("Skip")] == [("Memory Bandwidth", 3)]


def test_a_lost_gpu_fails_every_test_that_touches_it_at_level_3() -> None:
    report = dcgmi.parse(fixture("diag-r3-gpu-lost.json"))

    assert report.failed_gpus() == [5]
    lost = [r for r in report.with_status("Fail") if r.gpu == 5]
    assert [r.test for r in lost] == [
        "PCIe",
        "GPU Memory",
        "Diagnostic",
        "Memory Bandwidth",
        "Targeted Stress",
        "Targeted Power",
    ]
    assert {w.message for r in lost for w in r.warnings} == {
        "API call nvmlDeviceGetHandleByIndex_v2 failed for GPU 5: 'GPU is lost'"
    }
    assert {w.severity_name for r in lost for w in r.warnings} == {"isolate"}
    assert all(s == "Pass" for g, s in report.by_gpu().items() if g != 5)


def test_a_runtime_error_is_a_report_that_did_not_pass() -> None:
    report = dcgmi.parse(fixture("diag-runtime-error.json"))

    assert not report.passed
    assert report.results == []
    assert report.runtime_error == (
        "Error: unable to establish a connection to the specified host: localhost\n"
        "Error: Unable to connect to host engine. Host engine connection invalid/disconnected."
    )


def test_the_dcgm_4_shape_is_read_by_entity() -> None:
    report = dcgmi.parse(fixture("diag-r1-dcgm4.json"))

    assert report.passed
    assert (report.version, report.driver_version) == ("4.2.3", "570.124.06")
    assert [(r.test, r.gpu, r.status) for r in report.results] == [
        ("software", 0, "Pass"),
        ("software", 1, "Pass"),
    ]


def test_text_around_the_document_is_kept_as_notes() -> None:
    text = "WARNING: THIS SHOULD NOT HAPPEN\n" + fixture("diag-r2-pass.json") + "\nbye\n"

    report = dcgmi.parse(text)

    assert report.passed
    assert report.notes == ["WARNING: THIS SHOULD NOT HAPPEN", "bye"]


def edited(name: str, change: Any) -> str:
    document = json.loads(fixture(name))
    change(document["DCGM GPU Diagnostic"])
    return json.dumps(document)


def test_older_spellings_upper_case_gpu_ids_and_plain_string_warnings_are_read() -> None:
    def older(root: dict[str, Any]) -> None:
        denylist = root["test_categories"][0]["tests"][0]["results"][0]
        denylist.update(gpu_ids="0,1,2,3,4,5,6,7", status="PASS")
        memory = root["test_categories"][2]["tests"][0]["results"][3]
        memory.update(status="FAIL", warnings="GPU 3: ECC DBE", info="tested 79 GB")
        del memory["gpu_id"]
        memory["gpu_ids"] = 3
        root["test_categories"][0]["tests"].insert(1, None)  # jsoncpp's array gaps

    report = dcgmi.parse(edited("diag-r2-pass.json", older))

    assert report.results[0].status == "Pass" and report.results[0].gpu is None
    [failed] = report.with_status("Fail")
    assert (failed.test, failed.gpu, failed.info) == ("GPU Memory", 3, ["tested 79 GB"])
    assert [(w.message, w.error_id) for w in failed.warnings] == [("GPU 3: ECC DBE", None)]
    assert len(report.results) == 33


def test_a_status_the_parser_does_not_know_is_refused_by_name() -> None:
    def odd(root: dict[str, Any]) -> None:
        root["test_categories"][0]["tests"][0]["results"][0]["status"] = "Maybe"

    with pytest.raises(ValueError, match="test 'Denylist' has an unknown status 'Maybe'"):
        dcgmi.parse(edited("diag-r2-pass.json", odd))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "Error: unable to establish a connection to the specified host: localhost\n",
            "dcgmi diag printed no JSON: Error: unable to establish a connection",
        ),
        ("", r"dcgmi diag printed no JSON: \(no output\)"),
        ('{"DCGM GPU Diagnostic": {"test_categories": [', "dcgmi diag JSON is malformed"),
        ('{"something": {}}', "has none of DCGM GPU Diagnostic, DCGM Diagnostic"),
        (
            '{"DCGM GPU Diagnostic": {"test_categories": {}}}',
            "test_categories is not a list",
        ),
        (
            '{"DCGM GPU Diagnostic": {"test_categories": [{"category": "Hardware", "tests": '
            '[{"name": "GPU Memory", "results": [{"gpu_id": "x", "status": "Pass"}]}]}]}}',
            "GPU Memory gpu_id is not a GPU index: 'x'",
        ),
    ],
)
def test_output_that_is_no_report_is_refused_naming_what_is_wrong(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        dcgmi.parse(text)

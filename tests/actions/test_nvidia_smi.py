"""nvidia-smi parsers against real H200 output (tests/fixtures/nvidia-smi) and faulty
variants derived from it by editing copies in the test."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from bot.actions.gpu import nvidia_smi

FIXTURES = Path(__file__).parent.parent / "fixtures" / "nvidia-smi"
UUID = "GPU-929ea7b2-1467-014f-75dc-f07d92d86687"
BUS_ID = "00000000:00:06.0"
DAILY_HEADER = (
    "index, name, temperature.gpu, utilization.gpu [%], memory.used [MiB], power.draw [W]"
)


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")


def set_value(text: str, section: str, key: str, value: str) -> str:
    """Change the first `key : value` line after the `section` line of `nvidia-smi -q`."""
    start = text.index(f"    {section}\n")
    line = re.compile(rf"^(\s+{re.escape(key)}\s+: ).*$", re.MULTILINE).search(text, start)
    assert line, f"{key} not found under {section}"
    return text[: line.start()] + line.group(1) + value + text[line.end() :]


def test_real_query_gpu_csv_gives_the_h200_values() -> None:
    [gpu] = nvidia_smi.parse_query_gpu(fixture("query-gpu.csv")).gpus

    assert (gpu.index, gpu.name, gpu.uuid, gpu.bus_id) == (0, "NVIDIA H200", UUID, BUS_ID)
    assert (gpu.temperature_c, gpu.utilization_pct) == (44, 0)
    assert (gpu.memory_used_mib, gpu.memory_total_mib, gpu.power_draw_w) == (0, 143771, 118.43)
    assert (gpu.ecc_uncorrected_total, gpu.ecc_corrected_total) == (0, 0)
    assert gpu.retired_pages_pending is None  # [N/A] on the H200: it remaps rows instead
    assert (gpu.remapped_rows_pending, gpu.remapped_rows_failure) == (False, False)
    assert (gpu.clock_event_bits, gpu.clock_event_reasons) == (1, ["Idle"])


def test_noheader_nounits_output_is_mapped_by_the_queried_fields() -> None:
    text = "0, NVIDIA H200, 44, 0, 0, 118.43\n1, NVIDIA H200, 51, 97, 80123, 690.10\n"
    fields = [c.strip() for c in DAILY_HEADER.split(",")]

    gpus = nvidia_smi.parse_query_gpu(text, fields=fields).gpus

    assert [(g.index, g.temperature_c, g.utilization_pct) for g in gpus] == [
        (0, 44, 0),
        (1, 51, 97),
    ]
    assert gpus[1].power_draw_w == 690.10


def test_columns_are_found_by_header_name_in_any_order() -> None:
    text = "memory.used [MiB], index, some.new_field\n12 MiB, 3, 7\n"

    [gpu] = nvidia_smi.parse_query_gpu(text).gpus

    assert (gpu.index, gpu.memory_used_mib, gpu.other) == (3, 12, {"some.new_field": "7"})


def test_na_and_not_supported_become_none() -> None:
    text = f"{DAILY_HEADER}\n0, NVIDIA H200, [N/A], [Not Supported], 0 MiB, [GPU requires reset]\n"

    [gpu] = nvidia_smi.parse_query_gpu(text).gpus

    assert (gpu.temperature_c, gpu.utilization_pct, gpu.power_draw_w) == (None, None, None)
    assert gpu.memory_used_mib == 0


def eight_gpus(drop: int | None = None) -> str:
    header, row = fixture("query-gpu.csv").splitlines()
    rows = [re.sub(r"^0,", f"{i},", row) for i in range(8) if i != drop]
    return "\n".join([header, *rows]) + "\n"


def test_a_gpu_line_removed_is_reported_missing() -> None:
    parsed = nvidia_smi.parse_query_gpu(eight_gpus(drop=5))

    assert nvidia_smi.missing_gpus(8, parsed) == [5]
    assert nvidia_smi.missing_gpus(8, parsed.gpus) == [5]


def test_all_gpus_present_means_none_missing() -> None:
    assert nvidia_smi.missing_gpus(8, nvidia_smi.parse_query_gpu(eight_gpus())) == []


def test_error_lines_for_a_lost_gpu_are_kept_as_messages() -> None:
    lost = "Unable to determine the device handle for GPU0000:1B:00.0: Unknown Error"
    text = eight_gpus(drop=7).replace("\n1,", f"\n{lost}\n1,", 1)

    parsed = nvidia_smi.parse_query_gpu(text)

    assert parsed.messages == [lost]
    assert nvidia_smi.missing_gpus(8, parsed) == [7]


def test_pending_remap_and_an_active_slowdown_in_the_csv_are_read() -> None:
    header, row = fixture("query-gpu.csv").splitlines()
    row = row.replace("No, No, 0x0000000000000001", "Yes, No, 0x0000000000000048")

    [gpu] = nvidia_smi.parse_query_gpu(f"{header}\n{row}\n").gpus

    assert (gpu.remapped_rows_pending, gpu.remapped_rows_failure) == (True, False)
    assert gpu.clock_event_reasons == ["HW Slowdown", "HW Thermal Slowdown"]


def test_a_malformed_value_names_the_line() -> None:
    text = f"{DAILY_HEADER}\n0, NVIDIA H200, hot, 0 %, 0 MiB, 1 W\n"

    with pytest.raises(ValueError, match="--query-gpu line 2: temperature_c"):
        nvidia_smi.parse_query_gpu(text)


def test_output_without_an_index_column_is_refused() -> None:
    with pytest.raises(ValueError, match="no index column"):
        nvidia_smi.parse_query_gpu("name, uuid\nNVIDIA H200, GPU-1\n")


def test_real_q_output_gives_the_h200_fields() -> None:
    report = nvidia_smi.parse_query(fixture("nvidia-smi-q.txt"))

    assert (report.driver_version, report.cuda_version, report.attached_gpus) == (
        "580.159.04",
        "13.0",
        1,
    )
    [gpu] = report.gpus
    assert (gpu.bus_id, gpu.product_name, gpu.uuid, gpu.minor_number) == (
        BUS_ID,
        "NVIDIA H200",
        UUID,
        0,
    )
    assert gpu.pending_page_blacklist is None  # N/A on the H200
    assert (gpu.remapped_rows_pending, gpu.remapped_rows_failure) == (False, False)
    assert gpu.remapped_rows_uncorrectable == 0
    assert gpu.recovery_action == "None"
    assert (gpu.active_clock_event_reasons, gpu.slowdown_reasons) == (["Idle"], [])
    assert gpu.pending["Remapped Rows/Pending"] == "No"
    assert gpu.pending["ECC Errors/Channel Repair Pending"] == "No"
    assert gpu.xid_lines == []  # the real H200 output has no XID line


def test_remapped_rows_pending_yes_and_failure_are_read() -> None:
    text = set_value(fixture("nvidia-smi-q.txt"), "Remapped Rows", "Pending", "Yes")
    text = set_value(text, "Remapped Rows", "Remapping Failure Occurred", "Yes")
    text = set_value(text, "Remapped Rows", "Uncorrectable Error", "3")

    [gpu] = nvidia_smi.parse_query(text).gpus

    assert (gpu.remapped_rows_pending, gpu.remapped_rows_failure) == (True, True)
    assert gpu.remapped_rows_uncorrectable == 3
    assert gpu.pending["ECC Mode/Pending"] == "Enabled"  # other "Pending" keys untouched


def test_pending_page_blacklist_on_an_older_card_is_read() -> None:
    text = set_value(fixture("nvidia-smi-q.txt"), "Retired Pages", "Pending Page Blacklist", "Yes")

    assert nvidia_smi.parse_query(text).gpus[0].pending_page_blacklist is True


@pytest.mark.parametrize("name", ["nvidia-smi-q.txt", "nvidia-smi-q-performance.txt"])
def test_an_active_thermal_slowdown_is_reported(name: str) -> None:
    text = set_value(fixture(name), "Clocks Event Reasons", "Idle", "Not Active")
    text = set_value(text, "Clocks Event Reasons", "HW Slowdown", "Active")
    text = set_value(text, "Clocks Event Reasons", "HW Thermal Slowdown", "Active")

    [gpu] = nvidia_smi.parse_query(text).gpus

    assert gpu.active_clock_event_reasons == ["HW Slowdown", "HW Thermal Slowdown"]
    assert gpu.slowdown_reasons == ["HW Slowdown", "HW Thermal Slowdown"]


def test_reason_counters_are_not_mistaken_for_active_reasons() -> None:
    [gpu] = nvidia_smi.parse_query(fixture("nvidia-smi-q-performance.txt")).gpus

    assert gpu.active_clock_event_reasons == ["Idle"]


def test_a_line_mentioning_xid_is_kept() -> None:
    # Synthetic: the captured H200 output has no XID line; drivers that print one are
    # matched the way `nvidia-smi -q | grep -i xid` would.
    text = fixture("nvidia-smi-q.txt").replace(
        "    Processes                                          : None\n",
        "    Processes                                          : None\n"
        "    Last Xid                                           : 79\n",
    )

    assert nvidia_smi.parse_query(text).gpus[0].xid_lines == ["Last Xid: 79"]


def test_each_gpu_section_of_a_multi_gpu_node_is_parsed_separately() -> None:
    one = fixture("nvidia-smi-q.txt")
    section = one[one.index(f"GPU {BUS_ID}\n") :]
    other = set_value(
        section.replace(BUS_ID, "00000000:00:07.0"), "Remapped Rows", "Pending", "Yes"
    )
    text = (
        one.replace(
            "Attached GPUs                                          : 1",
            "Attached GPUs                                          : 2",
        )
        + other
    )

    report = nvidia_smi.parse_query(text)

    assert report.attached_gpus == 2
    assert [(g.bus_id, g.remapped_rows_pending) for g in report.gpus] == [
        (BUS_ID, False),
        ("00000000:00:07.0", True),
    ]

"""The XID catalog against gpu-faults.md, `classify`, and the `gpu.classify_xid` action."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from bot.actions.gpu import xid
from bot.errors import ConfigInvalid, ParamsInvalid
from tests.actions.conftest import Recorder, RunAction

# The classes table of docs/xid.md, row by row, as written there.
# Kept literal on purpose: the test checks the YAML, so it must not read the YAML.
DOC_TABLE: list[tuple[str, list[int]]] = [
    ("application", [13, 31, 8, 32, 94]),
    ("informational", [43, 63, 92, 154]),
    ("reset_gpu", [48, 62, 64, 95, 109, 119, 120, 140, 143]),
    ("nvlink", [74]),
    ("fallen_off_bus", [79]),
    ("fabric_manager", [45]),
]
DOC_CODES = [(code, fault_class) for fault_class, codes in DOC_TABLE for code in codes]
# dcgmi diag levels the doc gives: -r 2 after a reset, -r 3 after XID 79.
DOC_DIAGNOSTICS = {"reset_gpu": 2, "drain_and_reset": 2, "fallen_off_bus": 3}


@pytest.mark.parametrize(("code", "fault_class"), DOC_CODES)
def test_every_code_in_the_doc_maps_to_its_class(code: int, fault_class: str) -> None:
    found = xid.classify([code])

    assert (found.fault_class, found.combination) == (fault_class, False)
    assert found.meaning and found.meaning != xid.UNKNOWN_MEANING
    assert found.diagnostics_level == DOC_DIAGNOSTICS.get(fault_class)


def test_catalog_holds_exactly_the_codes_of_the_doc() -> None:
    assert sorted(xid.CATALOG.codes) == sorted(code for code, _ in DOC_CODES)


@pytest.mark.parametrize("fault_class", sorted(xid.FAULT_CLASSES))
def test_each_class_carries_the_doc_diagnostics_level(fault_class: str) -> None:
    rule = xid.CATALOG.classes[fault_class]  # type: ignore[index]

    assert rule.diagnostics == DOC_DIAGNOSTICS.get(fault_class)


def test_48_alone_resets_the_gpu_but_with_63_or_64_drains_and_resets() -> None:
    alone = xid.classify([48])
    with_63 = xid.classify([48, 63])
    with_64 = xid.classify([64, 48])

    assert alone.fault_class == "reset_gpu"
    assert (with_63.fault_class, with_63.combination) == ("drain_and_reset", True)
    assert (with_64.fault_class, with_64.combination) == ("drain_and_reset", True)
    assert "node stays cordoned until verified" in with_63.action
    assert [d.fault_class for d in with_63.details] == ["reset_gpu", "informational"]


def test_63_alone_is_only_recorded() -> None:
    assert xid.classify([63]).action == "record; watch the trend"


def test_45_alone_restarts_fabric_manager_but_defers_to_an_accompanying_xid() -> None:
    assert xid.classify([45]).fault_class == "fabric_manager"
    assert xid.classify([45, 13]).fault_class == "application"
    assert xid.classify([45, 79]).fault_class == "fallen_off_bus"


def test_the_most_severe_class_wins_when_codes_arrive_together() -> None:
    found = xid.classify([13, 79, 63])

    assert found.fault_class == "fallen_off_bus"
    assert found.codes == [13, 79, 63]


@pytest.mark.parametrize("codes", [[999], [0], [1000], [13, 777]])
def test_unknown_codes_mean_manual_contact_vendor(codes: list[int]) -> None:
    found = xid.classify(codes)

    assert (found.fault_class, found.action) == ("unknown", "manual, contact vendor")
    assert found.diagnostics_level is None


def test_repeated_codes_are_counted_once() -> None:
    assert xid.classify([79, 79]).codes == [79]


def test_classify_refuses_an_empty_list() -> None:
    with pytest.raises(ValueError, match="at least one XID"):
        xid.classify([])


def test_repeat_rules_are_data_with_their_sources() -> None:
    rules = {r.name: (r.source, r.scope, r.count, r.window) for r in xid.CATALOG.repeats}

    assert rules == {
        "card_drops": ("seed", "card", 2, timedelta(days=7)),
        "same_fatal_xid": ("NVSentinel", "gpu", 5, timedelta(hours=24)),
        "node_remediations": ("NVSentinel", "node", 5, timedelta(days=7)),
    }
    card = next(r for r in xid.CATALOG.repeats if r.name == "card_drops")
    assert card.consequence.startswith("RMA")


def test_summary_for_79_names_the_gpu_the_fault_and_the_steps() -> None:
    line = xid.summary(xid.classify([79]), gpu=5)

    assert line == (
        "XID 79 on GPU 5: GPU has fallen off the bus; cordon, drain, power-cycle through "
        "the BMC, dcgmi diag -r 3 before returning"
    )


def test_action_classifies_79_on_gpu_5_and_records_the_run(
    run_action: RunAction, recorder: Recorder
) -> None:
    result: Any = run_action("gpu.classify_xid", xid=79, gpu=5).result

    assert (result.ok, result.fault_class, result.diagnostics_level) == (True, "fallen_off_bus", 3)
    assert (result.codes, result.gpu, result.node) == ([79], 5, None)
    assert result.summary.startswith("XID 79 on GPU 5: GPU has fallen off the bus; cordon")
    assert recorder.types() == ["action.started", "action.finished"]


def test_action_takes_codes_seen_together_and_a_node(run_action: RunAction) -> None:
    result: Any = run_action("gpu.classify_xid", xid=[48, 63], gpu=2, node="gpu-node-03").result

    assert result.fault_class == "drain_and_reset"
    assert result.summary.startswith("XID 48+63 on gpu-node-03 GPU 2: double-bit ECC error")


@pytest.mark.parametrize(
    "raw",
    [
        {"xid": -1},
        {"xid": 1001},
        {"xid": "79; reboot"},
        {"xid": "7" * 10 * 1024},
        {"xid": "x" * 10 * 1024},
        {"xid": []},
        {"xid": 79, "gpu": 64},
        {"xid": 79, "node": "Node_1; rm -rf /"},
        {"xid": 79, "command": "reboot"},
    ],
    ids=[
        "negative",
        "above-1000",
        "injection",
        "10KiB-digits",
        "10KiB-text",
        "empty",
        "gpu-64",
        "bad-node",
        "extra-key",
    ],
)
def test_bad_input_is_refused_before_anything_runs(
    run_action: RunAction, recorder: Recorder, raw: dict[str, Any]
) -> None:
    with pytest.raises(ParamsInvalid, match="gpu.classify_xid: invalid parameters"):
        run_action("gpu.classify_xid", **raw)

    assert recorder.records == []


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("classes: [unclosed\n", "not valid YAML"),
        ("- just\n- a list\n", "(top level)"),
        ("classes: {}\ncodes: {}\n", "classes application, informational"),
        ("classes: {}\ncodes: {79: {class: lost, meaning: x}}\n", "codes.79.class"),
    ],
    ids=["syntax", "not-a-mapping", "classes-missing", "unknown-class"],
)
def test_broken_catalog_names_the_file_and_the_reason(
    tmp_path: Path, text: str, reason: str
) -> None:
    path = tmp_path / "xid.yaml"
    path.write_text(text, encoding="utf-8")

    with pytest.raises(ConfigInvalid) as info:
        xid.load_catalog(path)

    assert f"XID catalog {path}" in str(info.value)
    assert reason in str(info.value)


def test_catalog_with_an_unknown_key_is_refused(tmp_path: Path) -> None:
    text = xid.CATALOG_PATH.read_text(encoding="utf-8").replace(
        "  79: {class: fallen_off_bus,", "  79: {severity: 9, class: fallen_off_bus,"
    )
    path = tmp_path / "xid.yaml"
    path.write_text(text, encoding="utf-8")

    with pytest.raises(ConfigInvalid, match=r"codes\.79\.severity: Extra inputs"):
        xid.load_catalog(path)


def test_missing_catalog_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigInvalid, match="cannot read it"):
        xid.load_catalog(tmp_path / "absent.yaml")

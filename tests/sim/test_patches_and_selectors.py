"""Patch formats and selectors, unit by unit: the parts every PATCH and list goes through."""

from __future__ import annotations

from typing import Any

import pytest

from bot.sim import patches, selectors
from bot.sim.status import ApiError

NODE: dict[str, Any] = {
    "metadata": {"name": "n", "labels": {"a": "1", "b": "2"}},
    "spec": {"taints": [{"key": "x", "effect": "NoSchedule"}]},
    "status": {"conditions": [{"type": "Ready", "status": "True"}]},
}
SMP = "application/strategic-merge-patch+json"


def test_strategic_merge_replaces_taints_but_merges_conditions_by_type() -> None:
    patched = patches.apply(
        SMP,
        NODE,
        {
            "spec": {"taints": [{"key": "y", "effect": "NoExecute"}]},
            "status": {"conditions": [{"type": "DiskPressure", "status": "False"}]},
            "$setElementOrder/conditions": [{"type": "Ready"}, {"type": "DiskPressure"}],
        },
    )

    assert patched["spec"]["taints"] == [{"key": "y", "effect": "NoExecute"}]
    assert [c["type"] for c in patched["status"]["conditions"]] == ["Ready", "DiskPressure"]
    assert NODE["spec"]["taints"] == [{"key": "x", "effect": "NoSchedule"}]  # not mutated


def test_strategic_merge_deletes_list_entries_and_keys() -> None:
    patched = patches.apply(
        SMP,
        NODE,
        {
            "metadata": {"labels": {"a": None}},
            "status": {"conditions": [{"type": "Ready", "$patch": "delete"}]},
        },
    )

    assert patched["metadata"]["labels"] == {"b": "2"}
    assert patched["status"]["conditions"] == []


def test_merge_patch_null_removes_and_lists_replace() -> None:
    patched = patches.apply(
        "application/merge-patch+json",
        NODE,
        {"metadata": {"labels": {"b": None, "c": "3"}}, "spec": {"taints": []}},
    )

    assert patched["metadata"]["labels"] == {"a": "1", "c": "3"}
    assert patched["spec"]["taints"] == []


def test_json_patch_supports_escaped_paths_append_move_and_copy() -> None:
    patched = patches.apply(
        "application/json-patch+json",
        NODE,
        [
            {"op": "add", "path": "/metadata/labels/nvidia.com~1gpu.present", "value": "true"},
            {"op": "add", "path": "/spec/taints/-", "value": {"key": "z", "effect": "NoSchedule"}},
            {"op": "move", "from": "/metadata/labels/a", "path": "/metadata/labels/moved"},
            {"op": "copy", "from": "/metadata/labels/b", "path": "/metadata/labels/copied"},
            {"op": "replace", "path": "/spec/taints/0/effect", "value": "NoExecute"},
        ],
    )

    assert patched["metadata"]["labels"] == {
        "b": "2",
        "nvidia.com/gpu.present": "true",
        "moved": "1",
        "copied": "2",
    }
    assert [(t["key"], t["effect"]) for t in patched["spec"]["taints"]] == [
        ("x", "NoExecute"),
        ("z", "NoSchedule"),
    ]


@pytest.mark.parametrize(
    "operation",
    [
        {"op": "remove", "path": "/spec/missing"},
        {"op": "replace", "path": "/spec/taints/5", "value": 1},
        {"op": "test", "path": "/metadata/name", "value": "other"},
    ],
)
def test_json_patch_on_missing_paths_or_failed_tests_is_422(operation: dict[str, Any]) -> None:
    with pytest.raises(ApiError) as refused:
        patches.apply("application/json-patch+json", NODE, [operation])

    assert refused.value.code == 422


@pytest.mark.parametrize(
    ("text", "labels", "matches"),
    [
        ("a=1", {"a": "1"}, True),
        ("a==1,b=2", {"a": "1", "b": "3"}, False),
        ("a!=1", {}, True),
        ("a in (1, 2),b notin (3)", {"a": "2", "b": "4"}, True),
        ("a in (1,2)", {"a": "3"}, False),
        ("a,!b", {"a": "x"}, True),
        ("!a", {"a": "x"}, False),
    ],
)
def test_label_selector_forms(text: str, labels: dict[str, str], matches: bool) -> None:
    requirements = selectors.parse_labels(text)

    assert selectors.match_labels(requirements, {"metadata": {"labels": labels}}) is matches


def test_label_selector_objects_handle_expressions_and_empty_matches_all() -> None:
    selector = {
        "matchLabels": {"app": "trainer"},
        "matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["debug"]}],
    }

    assert selectors.match_selector(selector, {"app": "trainer", "tier": "gpu"})
    assert not selectors.match_selector(selector, {"app": "trainer", "tier": "debug"})
    assert selectors.match_selector({}, {"anything": "goes"})


def test_field_selectors_know_their_kind_and_refuse_unknown_fields() -> None:
    tests = selectors.parse_fields("spec.nodeName=gpu-node-01,status.phase!=Failed", "Pod")
    pod = {"spec": {"nodeName": "gpu-node-01"}, "status": {"phase": "Running"}}

    assert selectors.match_fields(tests, pod)
    with pytest.raises(ApiError) as refused:
        selectors.parse_fields("spec.nodeName=x", "Node")
    assert refused.value.code == 400

"""Parser for `dcgmi diag -r N -j`, as a node Job captures it: text in, a typed report out.

DCGM 3.x prints one JSON document under "DCGM GPU Diagnostic": `test_categories`, each
with `tests`, each with `results`: one per GPU (`gpu_id`, a string) for hardware tests,
one for the whole node (no GPU) for the deployment checks. A result has a `status`
(Pass, Fail, Warn, Skip), optional `info` (a string, or a list in newer releases) and
optional `warnings` (objects with `warning`, `error_id`, `error_category`,
`error_severity`). A failure to run at all is the same document with `runtime_error`.
DCGM 4.x renamed the root "DCGM Diagnostic", moved the versions into `metadata` and
names entities (`entity_group`, `entity_id`); both shapes are read. Older spellings
(`gpu_ids` as a list, upper-case statuses, warnings as plain strings) are accepted.
Nothing here runs a command; text without a diagnostic raises `ValueError`.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

Status = Literal["Pass", "Fail", "Warn", "Skip", "Not Run"]
ROOTS = ("DCGM GPU Diagnostic", "DCGM Diagnostic")
_STATUSES: dict[str, Status] = {
    "pass": "Pass",
    "passed": "Pass",
    "fail": "Fail",
    "failed": "Fail",
    "warn": "Warn",
    "warning": "Warn",
    "skip": "Skip",
    "skipped": "Skip",
    "not run": "Not Run",
    "notrun": "Not Run",
}
# DCGM's error severities (dcgm_errors.h): what the failure asks of the operator.
SEVERITIES = {
    0: "none",
    1: "monitor",
    2: "isolate",
    3: "unknown",
    4: "triage",
    5: "config",
    6: "reset",
}


class _Parsed(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class DiagWarning(_Parsed):
    message: str
    error_id: int | None = Field(None, description="DCGM_FR_* code, e.g. 4 for a volatile DBE")
    category: int | None = None
    severity: int | None = Field(None, description="2 isolate, 4 triage, 6 drain and reset")

    @property
    def severity_name(self) -> str | None:
        return SEVERITIES.get(self.severity, "unknown") if self.severity is not None else None


class DiagResult(_Parsed):
    """One test's verdict on one GPU, or on the whole node when `gpu` is None."""

    category: str
    test: str
    gpu: int | None = None
    status: Status
    info: list[str] = Field(default_factory=list)
    warnings: list[DiagWarning] = Field(default_factory=list)


class DiagReport(_Parsed):
    version: str | None = None
    driver_version: str | None = None
    results: list[DiagResult] = Field(default_factory=list)
    runtime_error: str | None = Field(None, description="dcgmi could not run the diagnostic")
    notes: list[str] = Field(
        default_factory=list, description="text printed around the JSON document"
    )

    @property
    def passed(self) -> bool:
        """Ran, produced results, and nothing failed (a Warn does not fail the run)."""
        return (
            self.runtime_error is None
            and bool(self.results)
            and all(r.status != "Fail" for r in self.results)
        )

    def with_status(self, status: Status) -> list[DiagResult]:
        return [r for r in self.results if r.status == status]

    def failed_gpus(self) -> list[int]:
        return sorted({r.gpu for r in self.with_status("Fail") if r.gpu is not None})

    def by_gpu(self) -> dict[int, Status]:
        """Each GPU's worst status over all its tests (Fail over Warn over Pass over Skip)."""
        rank = {"Fail": 4, "Warn": 3, "Pass": 2, "Skip": 1, "Not Run": 0}
        worst: dict[int, Status] = {}
        for result in self.results:
            if result.gpu is None:
                continue
            seen = worst.get(result.gpu)
            if seen is None or rank[result.status] > rank[seen]:
                worst[result.gpu] = result.status
        return dict(sorted(worst.items()))


def parse(text: str) -> DiagReport:
    """Parse the output of `dcgmi diag ... -j`; lines around the document become notes."""
    start = text.find("{")
    if start < 0:
        first = next((line.strip() for line in text.splitlines() if line.strip()), "")
        raise ValueError(f"dcgmi diag printed no JSON: {first[:200] or '(no output)'}")
    try:
        document, end = json.JSONDecoder().raw_decode(text, start)
    except json.JSONDecodeError as exc:
        raise ValueError(f"dcgmi diag JSON is malformed: {exc}") from exc
    if not isinstance(document, dict):
        raise ValueError("dcgmi diag JSON is not an object")
    notes = [
        line.strip() for line in (text[:start] + "\n" + text[end:]).splitlines() if line.strip()
    ]
    root_key = next((key for key in ROOTS if key in document), None)
    if root_key is None:
        raise ValueError(f"dcgmi diag JSON has none of {', '.join(ROOTS)}: {sorted(document)}")
    root = _object(document[root_key], root_key)
    metadata = _object(document.get("metadata") or {}, "metadata")
    results = [
        result
        for category in _list(root.get("test_categories"), "test_categories")
        for result in _category(_object(category, "test category"))
    ]
    runtime_error = root.get("runtime_error") or document.get("runtime_error")
    return DiagReport(
        version=_text(root.get("version") or metadata.get("version")),
        driver_version=_text(
            root.get("Driver Version Detected") or metadata.get("Driver Version Detected")
        ),
        results=results,
        runtime_error=str(runtime_error).strip() if runtime_error else None,
        notes=notes,
    )


def _category(category: dict[str, Any]) -> list[DiagResult]:
    name = str(category.get("category") or "")
    out = []
    # jsoncpp fills gaps in arrays with null; DCGM's own parser skips them too.
    for test in _list(category.get("tests"), f"{name} tests"):
        if test is None:
            continue
        test = _object(test, f"{name} test")
        test_name = str(test.get("name") or "")
        for result in _list(test.get("results"), f"{test_name} results"):
            if result is None:
                continue
            out.extend(_results(name, test_name, _object(result, f"{test_name} result")))
    return out


def _results(category: str, test: str, result: dict[str, Any]) -> list[DiagResult]:
    """One JSON result; an older `gpu_ids` list of several GPUs gives one result each."""
    status = _status(result.get("status"), test)
    info = _strings(result.get("info"))
    warnings = [_warning(w) for w in _list(result.get("warnings"), f"{test} warnings", wrap=True)]
    gpus: list[int | None] = [None]
    if "gpu_id" in result:
        gpus = [_int(result["gpu_id"], f"{test} gpu_id")]
    elif "entity_id" in result and str(result.get("entity_group", "GPU")).upper() == "GPU":
        gpus = [_int(result["entity_id"], f"{test} entity_id")]
    elif "gpu_ids" in result:
        ids = [i for i in str(result["gpu_ids"]).split(",") if i.strip()]
        # A list of every GPU is a node-wide verdict (the deployment checks).
        gpus = [_int(ids[0], f"{test} gpu_ids")] if len(ids) == 1 else [None]
    return [
        DiagResult(category=category, test=test, gpu=g, status=status, info=info, warnings=warnings)
        for g in gpus
    ]


def _warning(raw: Any) -> DiagWarning:
    if isinstance(raw, str):
        return DiagWarning(message=raw.strip())
    entry = _object(raw, "warning")
    return DiagWarning(
        message=str(entry.get("warning") or "").strip(),
        error_id=_optional_int(entry.get("error_id")),
        category=_optional_int(entry.get("error_category")),
        severity=_optional_int(entry.get("error_severity")),
    )


def _status(raw: Any, test: str) -> Status:
    status = _STATUSES.get(str(raw or "").strip().lower())
    if status is None:
        raise ValueError(f"dcgmi diag test {test!r} has an unknown status {raw!r}")
    return status


def _strings(raw: Any) -> list[str]:
    if raw is None:
        return []
    items = raw if isinstance(raw, list) else [raw]
    return [str(item).strip() for item in items if item is not None and str(item).strip()]


def _object(raw: Any, what: str) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise ValueError(f"dcgmi diag JSON: {what} is not an object")
    return raw


def _list(raw: Any, what: str, *, wrap: bool = False) -> list[Any]:
    if raw is None:
        return []
    if wrap and not isinstance(raw, list):
        return [raw]
    if not isinstance(raw, list):
        raise ValueError(f"dcgmi diag JSON: {what} is not a list")
    return raw


def _int(raw: Any, what: str) -> int:
    try:
        return int(str(raw).strip())
    except ValueError:
        raise ValueError(f"dcgmi diag JSON: {what} is not a GPU index: {raw!r}") from None


def _optional_int(raw: Any) -> int | None:
    try:
        return int(raw) if raw is not None else None
    except (TypeError, ValueError):
        return None


def _text(raw: Any) -> str | None:
    if raw is None:
        return None
    return str(raw).strip() or None

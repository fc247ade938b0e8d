"""XID classification: which class of fault an NVIDIA XID is and what to do about it.

The facts live in `xid.yaml` next to this module, loaded and validated once at import (a
broken catalog stops the bot at start with the file and the reason). `classify` turns one
or more XID codes seen together into a `Classification`; the read-only action
`gpu.classify_xid` wraps it for runbooks and chat.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal, get_args

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from bot.actions.context import ActionContext
from bot.actions.registry import Risk, action
from bot.actions.types import GpuIndex, NodeName, Params, Result
from bot.durations import Duration
from bot.errors import ConfigInvalid

CATALOG_PATH = Path(__file__).with_name("xid.yaml")

FaultClass = Literal[
    "application",
    "informational",
    "reset_gpu",
    "drain_and_reset",
    "nvlink",
    "fallen_off_bus",
    "fabric_manager",
    "unknown",
]
FAULT_CLASSES: tuple[FaultClass, ...] = get_args(FaultClass)
UNKNOWN_MEANING = "not in the XID catalog"


class _Entry(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class ClassRule(_Entry):
    severity: int = Field(ge=0, description="higher wins when XIDs arrive together")
    action: str = Field(min_length=1)
    diagnostics: Literal[1, 2, 3, 4] | None = Field(None, description="dcgmi diag -r level")
    on_repeat: str | None = None


class CodeEntry(_Entry):
    fault_class: FaultClass = Field(alias="class")
    meaning: str = Field(min_length=1)
    alone: bool = Field(False, description="the class holds only when the code comes alone")


class Combination(_Entry):
    all_of: list[int] = Field(min_length=1)
    any_of: list[int] = Field(default_factory=list)
    fault_class: FaultClass = Field(alias="class")
    meaning: str = Field(min_length=1)

    def matches(self, codes: set[int]) -> bool:
        return set(self.all_of) <= codes and (not self.any_of or bool(codes & set(self.any_of)))


class RepeatRule(_Entry):
    name: str
    source: str
    scope: Literal["gpu", "card", "node"]
    count: int = Field(ge=1)
    window: Duration
    consequence: str = Field(min_length=1)
    classes: list[FaultClass] = Field(
        default_factory=list, description="fault classes that count (empty: every class)"
    )
    same_code: bool = Field(False, description="count only repeats of one XID code")


class Catalog(_Entry):
    classes: dict[FaultClass, ClassRule]
    codes: dict[Annotated[int, Field(ge=0, le=1000)], CodeEntry]
    combinations: list[Combination] = Field(default_factory=list)
    repeats: list[RepeatRule] = Field(default_factory=list)

    @model_validator(mode="after")
    def _complete(self) -> Catalog:
        missing = [name for name in FAULT_CLASSES if name not in self.classes]
        if missing:
            raise ValueError(f"classes {', '.join(missing)} are not described")
        for combo in self.combinations:
            strangers = sorted(set(combo.all_of + combo.any_of) - set(self.codes))
            if strangers:
                raise ValueError(f"combination names codes not in the catalog: {strangers}")
        return self


def load_catalog(path: Path) -> Catalog:
    """Read and validate a catalog; `ConfigInvalid` names the file and what is wrong."""
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigInvalid(f"XID catalog {path}: cannot read it ({exc.strerror})") from exc
    except yaml.YAMLError as exc:
        raise ConfigInvalid(f"XID catalog {path}: not valid YAML: {exc}") from exc
    try:
        return Catalog.model_validate(raw)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or '(top level)'}: {e['msg']}"
            for e in exc.errors()
        )
        raise ConfigInvalid(f"XID catalog {path} is invalid: {problems}") from exc


CATALOG = load_catalog(CATALOG_PATH)


class CodeMeaning(BaseModel):
    code: int
    fault_class: FaultClass
    meaning: str


class Classification(BaseModel):
    codes: list[int]
    fault_class: FaultClass
    meaning: str
    action: str
    diagnostics_level: int | None = Field(None, description="dcgmi diag -r level to verify")
    on_repeat: str | None = None
    combination: bool = Field(False, description="decided by a combination of codes")
    details: list[CodeMeaning]


def classify(codes: list[int], catalog: Catalog = CATALOG) -> Classification:
    """Classify XIDs seen together (on one GPU, one event): the most severe class wins,
    a combination rule (48 with 63/64) can raise it, and a code that only counts alone
    (45) defers to the codes that came with it."""
    seen = list(dict.fromkeys(codes))
    if not seen:
        raise ValueError("classify needs at least one XID code")
    details = [_meaning(code, catalog) for code in seen]
    candidates: list[tuple[FaultClass, str, bool]] = [
        (c.fault_class, c.meaning, True) for c in catalog.combinations if c.matches(set(seen))
    ]
    # A code that counts only alone (45) defers to its companions, unless all are such codes.
    counted = [d for d in details if len(seen) == 1 or not _alone_only(d.code, catalog)]
    candidates += [(d.fault_class, d.meaning, False) for d in counted or details]
    fault_class, meaning, combined = max(candidates, key=lambda c: catalog.classes[c[0]].severity)
    rule = catalog.classes[fault_class]
    return Classification(
        codes=seen,
        fault_class=fault_class,
        meaning=meaning,
        action=rule.action,
        diagnostics_level=rule.diagnostics,
        on_repeat=rule.on_repeat,
        combination=combined,
        details=details,
    )


def _meaning(code: int, catalog: Catalog) -> CodeMeaning:
    entry = catalog.codes.get(code)
    if entry is None:
        return CodeMeaning(code=code, fault_class="unknown", meaning=UNKNOWN_MEANING)
    return CodeMeaning(code=code, fault_class=entry.fault_class, meaning=entry.meaning)


def _alone_only(code: int, catalog: Catalog) -> bool:
    entry = catalog.codes.get(code)
    return entry is not None and entry.alone


def summary(found: Classification, *, gpu: int | None = None, node: str | None = None) -> str:
    """One line: `XID 79 on GPU 5: GPU has fallen off the bus; cordon, drain, ...`."""
    parts = [part for part in (node, f"GPU {gpu}" if gpu is not None else None) if part]
    where = f" on {' '.join(parts)}" if parts else ""
    codes = "+".join(str(c) for c in found.codes)
    return f"XID {codes}{where}: {found.meaning}; {found.action}"


XidCode = Annotated[int, Field(ge=0, le=1000)]


class XidParams(Params):
    xid: XidCode | Annotated[list[XidCode], Field(min_length=1, max_length=32)] = Field(
        description="the XID code, or the codes seen together"
    )
    gpu: GpuIndex | None = Field(None, description="the GPU index the XID was reported on")
    node: NodeName | None = Field(None, description="the node the GPU is in")


class XidClassification(Result):
    codes: list[int]
    fault_class: FaultClass
    meaning: str
    action: str
    diagnostics_level: int | None = None
    on_repeat: str | None = None
    gpu: int | None = None
    node: str | None = None
    details: list[CodeMeaning] = Field(default_factory=list)


@action(
    "gpu.classify_xid",
    params=XidParams,
    result=XidClassification,
    risk=Risk.READ,
    description="What an XID means and what to do: class, node action, diagnostics level.",
    dry_run=True,
)
def classify_xid(ctx: ActionContext, params: XidParams) -> XidClassification:
    codes = params.xid if isinstance(params.xid, list) else [params.xid]
    found = classify(codes)
    return XidClassification(
        ok=True,
        summary=summary(found, gpu=params.gpu, node=params.node),
        dry_run=ctx.dry_run,
        codes=found.codes,
        fault_class=found.fault_class,
        meaning=found.meaning,
        action=found.action,
        diagnostics_level=found.diagnostics_level,
        on_repeat=found.on_repeat,
        gpu=params.gpu,
        node=params.node,
        details=found.details,
    )

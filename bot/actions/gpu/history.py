"""`gpu.fault_history` (read): the GPU faults a node and one of its cards had before.

A fault is a firing episode of an alert carrying an XID (label `xid`) on the node: each
time Alertmanager reports it starting anew, whether that opened an incident or reopened
one. The card is the GPU's UUID when the alert has one (a card keeps its UUID when it
moves slot), else the node and GPU index. The catalog's repeat rules (`xid.yaml`) are
evaluated here: the seed's ">= 2 drops of one card in a week -> RMA" decides whether the
XID runbook returns the node to service or keeps it cordoned for a replacement.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from pydantic import BaseModel, Field

from bot.actions.context import ActionContext
from bot.actions.gpu import xid
from bot.actions.kubernetes.nodes import NodeParams
from bot.actions.registry import Risk, action
from bot.actions.types import GpuIndex, Result
from bot.durations import Duration, format_duration
from bot.errors import PermanentActionError

XID_LABELS = ("xid", "err_code", "xid_code")
UUID_PATTERN = r"^GPU-[0-9a-fA-F-]{8,64}$"


class FaultHistoryParams(NodeParams):
    gpu: GpuIndex | None = Field(None, description="the GPU's index on the node")
    uuid: str | None = Field(None, pattern=UUID_PATTERN, description="the GPU's UUID")
    window: Duration = Field(
        timedelta(days=7),
        ge=timedelta(hours=1),
        le=timedelta(days=90),
        description="how far back to look",
    )


class Fault(BaseModel):
    incident: int
    at: datetime
    xid: int
    fault_class: str
    gpu: str = ""
    uuid: str = ""


class RepeatHit(BaseModel):
    rule: str
    source: str
    count: int
    threshold: int
    window: str
    consequence: str


class FaultHistory(Result):
    node: str
    card: str = Field("", description="the card asked about: UUID or node/GPU index")
    faults: list[Fault] = Field(default_factory=list, description="on the node, oldest first")
    card_faults: int = 0
    drops: int = Field(0, description="the card's drops in the window of the seed's RMA rule")
    rma: bool = Field(False, description="the seed's rule holds: replace the card")
    repeats: list[RepeatHit] = Field(default_factory=list, description="rules that hold")


@action(
    "gpu.fault_history",
    params=FaultHistoryParams,
    result=FaultHistory,
    risk=Risk.READ,
    description="XID faults on the node and card across incidents; applies the repeat "
    "rules (>= 2 drops of one card in a week -> RMA).",
    dry_run=True,
)
def fault_history(ctx: ActionContext, params: FaultHistoryParams) -> FaultHistory:
    if ctx.alert_history is None:
        raise PermanentActionError(
            "gpu.fault_history needs the incident database; run it from the bot or with "
            "the database setting pointing at it"
        )
    now = ctx.clock.now()
    longest = max([params.window, *(r.window for r in xid.CATALOG.repeats)])
    faults = _faults(ctx.alert_history(params.node, now - longest))
    card = params.uuid or (f"{params.node}/GPU {params.gpu}" if params.gpu is not None else "")
    mine = [f for f in faults if _same_card(f, params)] if card else []
    hits = [hit for rule in xid.CATALOG.repeats if (hit := _evaluate(rule, faults, mine, now))]
    drop_rule = next((r for r in xid.CATALOG.repeats if r.name == "card_drops"), None)
    drops = _count(drop_rule, mine, now) if drop_rule else 0
    rma = any(h.rule == "card_drops" for h in hits)
    shown = [f for f in faults if f.at >= now - params.window]
    summary = f"{len(shown)} XID faults on {params.node} in {format_duration(params.window)}"
    if card:
        summary += f"; {card}: {sum(1 for f in mine if f.at >= now - params.window)}"
        summary += f", {drops} drop{'s' if drops != 1 else ''} in a week"
    if rma:
        summary += " -> RMA: keep the node cordoned until the card is replaced"
    elif hits:
        summary += "; " + "; ".join(f"{h.rule}: {h.consequence}" for h in hits)
    return FaultHistory(
        ok=True,
        summary=summary,
        node=params.node,
        card=card,
        faults=shown,
        card_faults=len([f for f in mine if f.at >= now - params.window]),
        drops=drops,
        rma=rma,
        repeats=hits,
    )


def _faults(alerts: list[dict[str, Any]]) -> list[Fault]:
    """One fault per card, XID code and firing episode (its start time)."""
    seen: dict[tuple[str, int, datetime], Fault] = {}
    for alert in alerts:
        labels = alert["labels"]
        code = next((labels[k] for k in XID_LABELS if str(labels.get(k, "")).isdigit()), None)
        if code is None:
            continue
        gpu, uuid = str(labels.get("gpu", "")), str(labels.get("UUID", labels.get("uuid", "")))
        key = (uuid or f"{gpu}", int(code), alert["starts_at"])
        if key not in seen:
            seen[key] = Fault(
                incident=int(alert["incident"]),
                at=alert["starts_at"],
                xid=int(code),
                fault_class=xid.classify([int(code)]).fault_class,
                gpu=gpu,
                uuid=uuid,
            )
    return sorted(seen.values(), key=lambda f: (f.at, f.incident))


def _same_card(fault: Fault, params: FaultHistoryParams) -> bool:
    if params.uuid and fault.uuid:
        return fault.uuid.lower() == params.uuid.lower()
    return params.gpu is not None and fault.gpu == str(params.gpu)


def _counted(rule: xid.RepeatRule, faults: list[Fault], now: datetime) -> list[Fault]:
    return [
        f
        for f in faults
        if f.at >= now - rule.window and (not rule.classes or f.fault_class in rule.classes)
    ]


def _count(rule: xid.RepeatRule, faults: list[Fault], now: datetime) -> int:
    """Distinct episodes (card, start) among the counted faults; per code for same-code
    rules. XIDs a card raises together are one drop, not several."""
    counted = _counted(rule, faults, now)
    if rule.same_code:
        by_code: dict[int, set[tuple[str, datetime]]] = {}
        for f in counted:
            by_code.setdefault(f.xid, set()).add((f.uuid or f.gpu, f.at))
        return max((len(v) for v in by_code.values()), default=0)
    return len({(f.uuid or f.gpu, f.at) for f in counted})


def _evaluate(
    rule: xid.RepeatRule, node_faults: list[Fault], card_faults: list[Fault], now: datetime
) -> RepeatHit | None:
    faults = node_faults if rule.scope == "node" else card_faults
    count = _count(rule, faults, now)
    if count < rule.count:
        return None
    return RepeatHit(
        rule=rule.name,
        source=rule.source,
        count=count,
        threshold=rule.count,
        window=format_duration(rule.window),
        consequence=" ".join(rule.consequence.split()),
    )

"""Read-only BMC actions: what `ipmitool chassis power status`, `sel elist`, `sensor list`
and `mc info` show, through whichever protocol the node's BMC speaks."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from bot.actions.bmc import calls
from bot.actions.bmc.protocol import BmcInfo, Reading, SelEntry, SensorKind
from bot.actions.context import ActionContext
from bot.actions.kubernetes.nodes import NodeParams
from bot.actions.registry import Risk, action
from bot.actions.types import Result


class BmcResult(Result):
    node: str
    bmc: str = Field(description="protocol and address of the node's BMC")


class PowerStatus(BmcResult):
    power: str = Field(description="on, off, powering on, powering off or unknown")


@action(
    "bmc.power_status",
    params=NodeParams,
    result=PowerStatus,
    risk=Risk.READ,
    description="The node's power state as its BMC reports it (ipmitool chassis power status).",
    dry_run=True,
)
def power_status(ctx: ActionContext, params: NodeParams) -> PowerStatus:
    with calls.session(ctx, params.node) as bmc:
        state = calls.retried(ctx, bmc.power_state)
    return PowerStatus(
        ok=True,
        summary=f"{params.node} is powered {state.value}",
        node=params.node,
        bmc=bmc.target.where(),
        power=state.value,
    )


class SelParams(NodeParams):
    limit: int = Field(20, ge=1, le=1000, description="newest entries to show")


class SelList(BmcResult):
    entries: list[SelEntry] = Field(default_factory=list, description="oldest first")


@action(
    "bmc.sel_list",
    params=SelParams,
    result=SelList,
    risk=Risk.READ,
    description="The newest entries of the BMC's System Event Log (ipmitool sel elist).",
    dry_run=True,
)
def sel_list(ctx: ActionContext, params: SelParams) -> SelList:
    with calls.session(ctx, params.node) as bmc:
        entries = calls.retried(ctx, lambda: bmc.sel(params.limit))
    last = (
        f"; newest: {entries[-1].time} {entries[-1].sensor}: {entries[-1].event}" if entries else ""
    )
    return SelList(
        ok=True,
        summary=f"{len(entries)} SEL entries from {params.node}'s BMC{last}",
        node=params.node,
        bmc=bmc.target.where(),
        entries=entries,
    )


class SensorParams(NodeParams):
    kind: Literal["temperature", "fan", "power", "voltage"] | None = Field(
        None, description="only this kind of sensor"
    )


class Sensors(BmcResult):
    readings: list[Reading] = Field(default_factory=list)
    alarms: list[str] = Field(default_factory=list, description="readings not ok, as text")


@action(
    "bmc.sensors",
    params=SensorParams,
    result=Sensors,
    risk=Risk.READ,
    description="Fans, temperatures, power and voltages from the BMC (ipmitool sensor list); "
    "readings in warning or critical state are listed as alarms.",
    dry_run=True,
)
def sensors(ctx: ActionContext, params: SensorParams) -> Sensors:
    with calls.session(ctx, params.node) as bmc:
        readings = calls.retried(ctx, bmc.sensors)
    wanted: SensorKind | None = params.kind
    if wanted is not None:
        readings = [r for r in readings if r.kind == wanted]
    alarms = [
        f"{r.name} {'' if r.value is None else f'{r.value:g} {r.unit} '}{r.status}".strip()
        for r in readings
        if r.status in ("warning", "critical")
    ]
    what = f"{params.kind} " if params.kind else ""
    summary = f"{len(readings)} {what}sensors on {params.node}: " + (
        f"{len(alarms)} in alarm ({'; '.join(alarms[:3])})" if alarms else "all ok"
    )
    return Sensors(
        ok=True,
        summary=summary,
        node=params.node,
        bmc=bmc.target.where(),
        readings=readings,
        alarms=alarms,
    )


class Info(BmcResult):
    info: BmcInfo


@action(
    "bmc.info",
    params=NodeParams,
    result=Info,
    risk=Risk.READ,
    description="The BMC's firmware version, manufacturer and model (ipmitool mc info).",
    dry_run=True,
)
def info(ctx: ActionContext, params: NodeParams) -> Info:
    with calls.session(ctx, params.node) as bmc:
        found = calls.retried(ctx, bmc.info)
    made = " ".join(part for part in (found.manufacturer, found.model) if part)
    return Info(
        ok=True,
        summary=f"{params.node}'s BMC runs firmware {found.firmware}"
        + (f" ({made})" if made else ""),
        node=params.node,
        bmc=bmc.target.where(),
        info=found,
    )

"""`ib.port_status` (read): run `ibstat` on a node and judge every InfiniBand port.

The seed's check is `ibstat | grep -E "State|Rate"` expecting `State: Active, Rate: 200`.
Here a port is healthy when its State is Active, its Physical state LinkUp and its Rate
at least `expected_rate` Gb/s; the node is healthy when every InfiniBand port is. Ports
whose link layer is Ethernet (RoCE) are listed but not judged. A node whose `ibstat`
lists no InfiniBand port at all is not healthy: on a GPU node that is a missing HCA or
driver, not a clean bill.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from pydantic import BaseModel, Field

from bot.actions.context import ActionContext
from bot.actions.infiniband import ibstat
from bot.actions.kubernetes import node_job, nodes
from bot.actions.registry import Risk, action
from bot.actions.types import ImageRef, Result
from bot.errors import PermanentActionError

TIMEOUT = timedelta(minutes=1)
RETRY_DELAY = 30.0


class PortStatusParams(nodes.NodeParams):
    expected_rate: int = Field(200, ge=1, le=3200, description="Gb/s each port must reach")
    image: ImageRef | None = Field(
        None, description="image with ibstat (infiniband-diags); default: node_job_image"
    )


class PortState(BaseModel):
    port: str = Field(description="HCA/port, e.g. mlx5_0/1")
    ca_type: str | None = None
    state: str | None = None
    physical_state: str | None = None
    rate: float | None = Field(None, description="Gb/s")
    link_layer: str | None = None
    base_lid: int | None = None
    sm_lid: int | None = None
    port_guid: str | None = None
    healthy: bool | None = Field(None, description="None: not judged (Ethernet)")
    problem: str | None = None


class IbPortStatus(Result):
    node: str
    expected_rate: int
    healthy: bool = False
    ports: list[PortState] = Field(default_factory=list)
    bad_ports: list[str] = Field(default_factory=list, description="one line per bad port")


@action(
    "ib.port_status",
    params=PortStatusParams,
    result=IbPortStatus,
    risk=Risk.READ,
    description="Run ibstat on a node: healthy when every InfiniBand port is Active/LinkUp "
    "at the expected rate (default 200 Gb/s); lists the bad ports.",
    dry_run=True,
)
def port_status(ctx: ActionContext, params: PortStatusParams) -> IbPortStatus:
    # A read runs even in a dry run: its Job only reads, and is gone afterwards.
    run = node_job.run_checked(
        replace(ctx, dry_run=False),
        params.node,
        ["ibstat"],
        retry_delay=RETRY_DELAY,
        missing="pass image= an image with infiniband-diags (or set node_job_image)",
        image=params.image,
        timeout=TIMEOUT,
    )
    try:
        adapters = ibstat.parse(run.log_tail)
    except ValueError as exc:
        raise PermanentActionError(
            f"ibstat on {params.node} exited {run.exit_code} and printed what it should not "
            f"({exc}); run `ibstat` on the node to see why"
        ) from exc
    if run.exit_code != 0 and not adapters:
        last = run.log_tail.strip().splitlines()[-1:] or ["no output"]
        raise PermanentActionError(
            f"ibstat failed on {params.node} (exit {run.exit_code}): {last[0][:200]}; check "
            "the HCA driver (ibv_devices, dmesg | grep mlx5)"
        )
    states = [
        _judge(adapter, port, params.expected_rate)
        for adapter in adapters
        for port in adapter.ports
    ]
    judged = [s for s in states if s.healthy is not None]
    bad = [f"{s.port}: {s.problem}" for s in judged if not s.healthy]
    healthy = bool(judged) and not bad
    if not judged:
        summary = (
            f"{params.node}: ibstat lists no InfiniBand port; check that the HCAs and "
            "their driver are present (ibv_devices, lspci | grep Mellanox)"
        )
    elif bad:
        summary = f"{params.node}: {len(bad)} of {len(judged)} InfiniBand ports bad: " + "; ".join(
            bad
        )
    else:
        summary = (
            f"{params.node}: all {len(judged)} InfiniBand ports Active/LinkUp at "
            f">= {params.expected_rate} Gb/s"
        )
    return IbPortStatus(
        ok=True,
        summary=summary,
        dry_run=ctx.dry_run,
        node=params.node,
        expected_rate=params.expected_rate,
        healthy=healthy,
        ports=states,
        bad_ports=bad,
    )


def _judge(adapter: ibstat.Adapter, port: ibstat.Port, expected_rate: int) -> PortState:
    problems = []
    if port.infiniband:
        if port.state != "Active":
            problems.append(f"State {port.state or '?'} (want Active)")
        if port.physical_state != "LinkUp":
            problems.append(f"Physical state {port.physical_state or '?'} (want LinkUp)")
        if port.rate is None or port.rate < expected_rate:
            problems.append(f"Rate {port.rate_text} (want >= {expected_rate})")
    return PortState(
        port=ibstat.port_name(adapter, port),
        ca_type=adapter.ca_type,
        state=port.state,
        physical_state=port.physical_state,
        rate=port.rate,
        link_layer=port.link_layer,
        base_lid=port.base_lid,
        sm_lid=port.sm_lid,
        port_guid=port.port_guid,
        healthy=(not problems) if port.infiniband else None,
        problem=", ".join(problems) or None,
    )

"""Splitting a domain incident, over the HTTP API: what the request carries and the answer.

POST `/api/incidents/{n}/split` with `{"nodes": ["gpu-a-01"], "reason": "..."}`, as the
owner of the personal token (`bot.alerts.splitting`).
"""

from __future__ import annotations

from typing import Annotated, ClassVar

from pydantic import Field

from bot.api.models import Answer
from bot.api.requests import MAX_NOTE, Decision

MAX_NODES = 200
"""Nodes one request splits out: a body that names more does not fit `MAX_BODY_BYTES`."""


class SplitRequest(Decision):
    """Split these nodes out of a domain incident, each into a node incident of its own."""

    nodes: list[Annotated[str, Field(min_length=1, max_length=253)]] = Field(
        min_length=1,
        max_length=MAX_NODES,
        description="the nodes to split out (their alerts move to a node incident each)",
    )
    reason: str | None = Field(None, max_length=MAX_NOTE, description="why")

    EXAMPLE: ClassVar[str] = '{"nodes": ["gpu-node-02"], "reason": "its own fan failed"}'


class SplitDone(Answer):
    incident: str = Field(pattern=r"^INC-[0-9]+$", description="the domain incident")
    into: dict[str, str] = Field(description="each node -> the incident now holding its alerts")

"""Typed parameters for actions: untrusted text becomes these, or nothing runs.

Alert labels and chat input reach an executor only through these types (DESIGN
invariant 4): a node name is a DNS-1123 subdomain, a namespace a DNS-1123 label, a GPU
index a small int. Anything else is refused by the parameter model before any API call.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

DNS1123_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
DNS1123_LABEL = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
# Kubernetes qualified names: an optional DNS prefix and a 63-character name.
LABEL_KEY = (
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$"
)
LABEL_VALUE = r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$"

NodeName = Annotated[str, StringConstraints(pattern=DNS1123_SUBDOMAIN, max_length=253)]
Namespace = Annotated[str, StringConstraints(pattern=DNS1123_LABEL, max_length=63)]
PodName = Annotated[str, StringConstraints(pattern=DNS1123_SUBDOMAIN, max_length=253)]
LabelKey = Annotated[str, StringConstraints(pattern=LABEL_KEY, max_length=316)]
LabelValue = Annotated[str, StringConstraints(pattern=LABEL_VALUE, max_length=63)]
GpuIndex = Annotated[int, Field(ge=0, le=63)]
Reason = Annotated[str, StringConstraints(max_length=500, strip_whitespace=True)]


class Params(BaseModel):
    """Base of every action's parameter model: unknown keys are errors, values immutable."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class Result(BaseModel):
    """Base of every action's result: whether it did its work and one line saying what."""

    model_config = ConfigDict(extra="forbid")

    ok: bool
    summary: str
    dry_run: bool = False

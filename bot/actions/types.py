"""Typed parameters for actions: untrusted text becomes these, or nothing runs.

Alert labels and chat input reach an executor only through these types (DESIGN
invariant 4): a node name is a DNS-1123 subdomain, a namespace a DNS-1123 label, a GPU
index a small int, a container command a short list of printable arguments with no shell
in it. Anything else is refused by the parameter model before any API call.
"""

from __future__ import annotations

import ipaddress
import os
import re
from datetime import timedelta
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StringConstraints

from bot.durations import Duration

DNS1123_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
DNS1123_LABEL = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
# Kubernetes qualified names: an optional DNS prefix and a 63-character name.
LABEL_KEY = (
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$"
)
LABEL_VALUE = r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$"
CLAIM_REF = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?/" + DNS1123_SUBDOMAIN[1:]
# registry[:port]/repository[:tag][@sha256:digest]; repositories are lowercase.
IMAGE_REF = (
    r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?(:[0-9]{1,5})?"
    r"(/[a-z0-9]+([._-]+[a-z0-9]+)*)*"
    r"(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(@sha256:[a-f0-9]{64})?$"
)
# An argument never carries NUL, a newline, a tab or an escape sequence.
CONTROL = re.compile(r"[\x00-\x1f\x7f]")
SHELLS = frozenset({"sh", "bash", "dash", "ash", "zsh", "ksh", "mksh", "csh", "tcsh", "fish"})


def _image(value: str) -> str:
    if not re.fullmatch(IMAGE_REF, value):
        raise ValueError("not an image reference (registry/repository:tag or @sha256:digest)")
    return value


def _host(value: str) -> str:
    """A DNS-1123 host name (lowercased) or an IP address, as a PersistentVolume names it."""
    try:
        return str(ipaddress.ip_address(value))
    except ValueError:
        pass
    if not re.fullmatch(DNS1123_SUBDOMAIN, value.lower()):
        raise ValueError("not a host name or IP address")
    return value.lower()


def _printable(value: str) -> str:
    if CONTROL.search(value):
        raise ValueError("an argument must not contain control characters (NUL, newline, tab)")
    return value


def _no_shell(argv: list[str]) -> list[str]:
    # The list is the container's argv. A shell anywhere in it (sh -c, env bash, nsenter
    # ... sh) would turn one templated argument into many commands.
    for arg in argv:
        if os.path.basename(arg) in SHELLS:
            raise ValueError(f"{arg!r} is a shell; give the program and its arguments as a list")
    return argv


NodeName = Annotated[str, StringConstraints(pattern=DNS1123_SUBDOMAIN, max_length=253)]
Namespace = Annotated[str, StringConstraints(pattern=DNS1123_LABEL, max_length=63)]
PodName = Annotated[str, StringConstraints(pattern=DNS1123_SUBDOMAIN, max_length=253)]
ObjectName = Annotated[str, StringConstraints(pattern=DNS1123_SUBDOMAIN, max_length=253)]
"""A cluster-scoped object's name: a Volcano queue, a storage class."""
ClaimRef = Annotated[str, StringConstraints(pattern=CLAIM_REF, max_length=317)]
"""A PersistentVolumeClaim as `namespace/name`."""
LabelKey = Annotated[str, StringConstraints(pattern=LABEL_KEY, max_length=316)]
LabelValue = Annotated[str, StringConstraints(pattern=LABEL_VALUE, max_length=63)]
TaintEffect = Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]
GpuIndex = Annotated[int, Field(ge=0, le=63)]
Reason = Annotated[str, StringConstraints(max_length=500, strip_whitespace=True)]
Host = Annotated[str, StringConstraints(max_length=253), AfterValidator(_host)]
ImageRef = Annotated[str, StringConstraints(max_length=512), AfterValidator(_image)]
Argument = Annotated[
    str, StringConstraints(min_length=1, max_length=256), AfterValidator(_printable)
]
Argv = Annotated[list[Argument], Field(min_length=1, max_length=32), AfterValidator(_no_shell)]
"""A container command: 1 to 32 printable arguments of at most 256 characters, no shell."""
JobTimeout = Annotated[Duration, Field(ge=timedelta(seconds=5), le=timedelta(minutes=30))]
LogBytes = Annotated[int, Field(ge=64, le=1024 * 1024)]


class Params(BaseModel):
    """Base of every action's parameter model: unknown keys are errors, values immutable."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class Result(BaseModel):
    """Base of every action's result: whether it did its work and one line saying what."""

    model_config = ConfigDict(extra="forbid")

    ok: bool
    summary: str
    dry_run: bool = False

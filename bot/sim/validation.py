"""What the simulated apiserver refuses to store: the checks the bot's writes can trip.

Not the whole of Kubernetes validation: metadata maps, node cordon and taint fields,
pod and Job templates, Lease and Volcano Queue fields. Failures are 422 Invalid.
"""

from __future__ import annotations

from typing import Any

from bot.sim.kinds import JOB, LEASE, NODE, POD, QUEUE, Kind
from bot.sim.status import invalid

Obj = dict[str, Any]

TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
QUEUE_STATES = ("Open", "Closed", "Closing", "Unknown")


def validate(kind: Kind, obj: Obj) -> None:
    meta = obj.get("metadata")
    name = str(meta.get("name", "")) if isinstance(meta, dict) else ""
    if not isinstance(meta, dict):
        raise invalid(kind, name, "metadata", "Required value")
    for field in ("labels", "annotations"):
        values = meta.get(field)
        if values is None:
            continue
        if not isinstance(values, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in values.items()
        ):
            raise invalid(
                kind, name, f"metadata.{field}", "Invalid value: must map strings to strings"
            )
    check = _CHECKS.get(kind.kind)
    if check is not None:
        check(kind, name, obj)


def _node(kind: Kind, name: str, obj: Obj) -> None:
    spec = obj.get("spec") or {}
    if "unschedulable" in spec and not isinstance(spec["unschedulable"], bool):
        raise invalid(kind, name, "spec.unschedulable", "Invalid value: must be a boolean")
    taints = spec.get("taints")
    if taints is None:
        return
    if not isinstance(taints, list):
        raise invalid(kind, name, "spec.taints", "Invalid value: must be a list")
    seen = set()
    for i, taint in enumerate(taints):
        where = f"spec.taints[{i}]"
        if not isinstance(taint, dict) or not isinstance(taint.get("key"), str) or not taint["key"]:
            raise invalid(kind, name, f"{where}.key", "Required value")
        if taint.get("effect") not in TAINT_EFFECTS:
            raise invalid(
                kind,
                name,
                f"{where}.effect",
                f"Unsupported value: {taint.get('effect')!r}: supported values: "
                + ", ".join(f'"{e}"' for e in TAINT_EFFECTS),
            )
        if "value" in taint and taint["value"] is not None and not isinstance(taint["value"], str):
            raise invalid(kind, name, f"{where}.value", "Invalid value: must be a string")
        pair = (taint["key"], taint["effect"])
        if pair in seen:
            raise invalid(kind, name, where, f"Duplicate value: {taint['key']}:{taint['effect']}")
        seen.add(pair)


def _containers(kind: Kind, name: str, spec: Any, where: str) -> None:
    containers = spec.get("containers") if isinstance(spec, dict) else None
    if not isinstance(containers, list) or not containers:
        raise invalid(kind, name, f"{where}.containers", "Required value")
    for i, item in enumerate(containers):
        for field in ("name", "image"):
            if (
                not isinstance(item, dict)
                or not isinstance(item.get(field), str)
                or not item[field]
            ):
                raise invalid(kind, name, f"{where}.containers[{i}].{field}", "Required value")
        for field in ("command", "args"):
            value = item.get(field)
            if value is not None and (
                not isinstance(value, list) or not all(isinstance(v, str) for v in value)
            ):
                raise invalid(
                    kind,
                    name,
                    f"{where}.containers[{i}].{field}",
                    "Invalid value: must be a list of strings",
                )


def _pod(kind: Kind, name: str, obj: Obj) -> None:
    _containers(kind, name, obj.get("spec"), "spec")


def _job(kind: Kind, name: str, obj: Obj) -> None:
    template = (obj.get("spec") or {}).get("template")
    if not isinstance(template, dict):
        raise invalid(kind, name, "spec.template", "Required value")
    spec = template.get("spec")
    _containers(kind, name, spec, "spec.template.spec")
    policy = spec.get("restartPolicy") if isinstance(spec, dict) else None
    if policy not in ("Never", "OnFailure"):
        raise invalid(
            kind,
            name,
            "spec.template.spec.restartPolicy",
            f'Unsupported value: "{policy or "Always"}": supported values: "OnFailure", "Never"',
        )


def _lease(kind: Kind, name: str, obj: Obj) -> None:
    spec = obj.get("spec") or {}
    duration = spec.get("leaseDurationSeconds")
    if duration is not None and (not isinstance(duration, int) or duration <= 0):
        raise invalid(kind, name, "spec.leaseDurationSeconds", "Invalid value: must be positive")


def _queue(kind: Kind, name: str, obj: Obj) -> None:
    state = (obj.get("status") or {}).get("state")
    if state is not None and state not in QUEUE_STATES:
        raise invalid(kind, name, "status.state", f"Unsupported value: {state!r}")
    weight = (obj.get("spec") or {}).get("weight")
    if weight is not None and (not isinstance(weight, int) or weight < 1):
        raise invalid(kind, name, "spec.weight", "Invalid value: must be at least 1")


_CHECKS = {
    NODE.kind: _node,
    POD.kind: _pod,
    JOB.kind: _job,
    LEASE.kind: _lease,
    QUEUE.kind: _queue,
}

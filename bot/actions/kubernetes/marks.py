"""The annotations the bot writes on nodes it changes, and how to read them back.

`runbook-bot/cordoned-by` etc. say which incident, who and why; they are how the bot
knows a node is "its" cordon (and may be uncordoned by it) and how the circuit breaker
counts the nodes it holds. A human uncordon clears `spec.unschedulable` but leaves our
annotations: such a node is no longer ours, and the bot never re-cordons it silently.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

PREFIX = "runbook-bot/"
INCIDENT = PREFIX + "incident"
BY = PREFIX + "by"
REASON = PREFIX + "reason"
AT = PREFIX + "at"
CORDONED = PREFIX + "cordoned"
"""Present (value "true") while the bot's cordon stands."""

KEYS = (INCIDENT, BY, REASON, AT, CORDONED)

TAINTS = PREFIX + "taints"
"""JSON list of the taints the bot added: [{key, effect, incident, by, reason, at}]."""
OUT_OF_SERVICE = ("NoSchedule", "NoExecute")
"""Taint effects that keep new pods off (or evict them): the circuit breaker counts these."""


def cordon_annotations(
    *, incident: str | None, actor: str, reason: str, at: datetime
) -> dict[str, str]:
    return {
        INCIDENT: incident or "",
        BY: actor,
        REASON: reason[:250],
        AT: at.isoformat().replace("+00:00", "Z"),
        CORDONED: "true",
    }


def cleared() -> dict[str, None]:
    """A merge patch removing every bot annotation."""
    return dict.fromkeys(KEYS)


def annotations_of(node: Any) -> dict[str, str]:
    meta = getattr(node, "metadata", None)
    return dict(getattr(meta, "annotations", None) or {})


def cordoned_by_bot(node: Any) -> bool:
    """The node is unschedulable and the bot's cordon mark is on it."""
    spec = getattr(node, "spec", None)
    return bool(getattr(spec, "unschedulable", False)) and (
        annotations_of(node).get(CORDONED) == "true"
    )


def holder(node: Any) -> str:
    """Who holds the bot's cordon, for messages: "INC-41 (alice)"."""
    notes = annotations_of(node)
    who = notes.get(BY) or "unknown"
    return f"{notes[INCIDENT]} ({who})" if notes.get(INCIDENT) else f"{who}, outside any incident"


def taint_records(node: Any) -> list[dict[str, str]]:
    """The bot's records of the taints it added; an edited or broken annotation reads as none."""
    try:
        data = json.loads(annotations_of(node).get(TAINTS) or "[]")
    except ValueError:
        return []
    if not isinstance(data, list):
        return []
    return [
        item
        for item in data
        if isinstance(item, dict)
        and isinstance(item.get("key"), str)
        and isinstance(item.get("effect"), str)
    ]


def tainted_by_bot(node: Any) -> bool:
    """A taint the bot added that keeps pods off the node is still on it."""
    present = {(t.key, t.effect) for t in getattr(node.spec, "taints", None) or []}
    return any(
        (item["key"], item["effect"]) in present and item["effect"] in OUT_OF_SERVICE
        for item in taint_records(node)
    )


def held_by_bot(node: Any) -> bool:
    """The bot holds this node out of service: its cordon, or its NoSchedule/NoExecute taint."""
    return cordoned_by_bot(node) or tainted_by_bot(node)

"""Watches: `?watch=true` on a list URL streams ADDED/MODIFIED/DELETED events as JSON lines.

Without a resourceVersion (or with "0") the stream starts with ADDED for every matching
object, as the apiserver does; with one it replays the store's history after it, or
sends a 410 Expired ERROR event when the history no longer reaches back. Events are
filtered by namespace and selectors on the object as it is in the event. The stream
ends at `timeoutSeconds` (default 300 here), on client disconnect, or on shutdown.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from bot.sim.kinds import Kind
from bot.sim.selectors import match_fields, match_labels, parse_fields, parse_labels
from bot.sim.status import ApiError, bad_request

if TYPE_CHECKING:
    from bot.sim.cluster import Cluster

Obj = dict[str, Any]
POLL_SECONDS = 0.02
DEFAULT_TIMEOUT = 300


def _line(kind: str, obj: Obj) -> bytes:
    return json.dumps({"type": kind, "object": obj}, separators=(",", ":")).encode() + b"\n"


def prepare(
    cluster: Cluster, kind: Kind, namespace: str | None, query: dict[str, str]
) -> AsyncIterator[bytes]:
    """Validate the watch request now (errors become responses) and return its stream."""
    labels = parse_labels(query.get("labelSelector"))
    fields = parse_fields(query.get("fieldSelector"), kind.kind)
    try:
        timeout = int(query.get("timeoutSeconds") or DEFAULT_TIMEOUT)
        since = query.get("resourceVersion") or "0"
        start = int(since)
    except ValueError as exc:
        raise bad_request("resourceVersion and timeoutSeconds must be integers") from exc

    def wanted(changed_kind: Kind, obj: Obj) -> bool:
        meta = obj["metadata"]
        return (
            changed_kind is kind
            and (namespace is None or meta.get("namespace") == namespace)
            and match_labels(labels, obj)
            and match_fields(fields, obj)
        )

    async def stream() -> AsyncIterator[bytes]:
        with cluster.lock:
            if start == 0:
                cursor = int(cluster.store.resource_version)
                initial = [
                    _line("ADDED", obj)
                    for obj in cluster.store.items(kind, namespace)
                    if wanted(kind, obj)
                ]
            else:
                cursor, initial = start, []
        for line in initial:
            yield line
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and not cluster.stopping.is_set():
            with cluster.lock:
                changes = cluster.store.changes_since(cursor)
            if changes is None:
                expired = ApiError(410, f"too old resource version: {cursor}", reason="Expired")
                yield _line("ERROR", expired.body())
                return
            for change in changes:
                cursor = change.version
                if wanted(change.kind, change.obj):
                    yield _line(change.type, change.obj)
            await asyncio.sleep(POLL_SECONDS)

    return stream()

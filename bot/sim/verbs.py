"""The API verbs on any kind: list, get, create, replace (PUT), patch, and pod logs.

Each takes the cluster lock, works on the store, and returns deep copies. Writes honor
`dryRun=All` (validated and answered, never stored), resourceVersion preconditions
(409 Conflict), and status subresources (a main-resource write keeps the old status; a
/status write changes only the status).
"""

from __future__ import annotations

import base64
import copy
import json
from typing import TYPE_CHECKING, Any

from bot.sim import deletion, manifests, patches, pods, status
from bot.sim.kinds import EVENT, JOB, POD, Kind
from bot.sim.selectors import match_fields, match_labels, parse_fields, parse_labels
from bot.sim.status import bad_request
from bot.sim.validation import validate

if TYPE_CHECKING:
    from bot.sim.cluster import Cluster

Obj = dict[str, Any]

IMMUTABLE_META = (
    "uid",
    "creationTimestamp",
    "name",
    "namespace",
    "generation",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
)


def dry_run(query: dict[str, str]) -> bool:
    value = query.get("dryRun")
    if value is None:
        return False
    if value != "All":
        raise bad_request(f'dryRun: Unsupported value: "{value}": supported values: "All"')
    return True


def _page_token(offset: int, version: str) -> str:
    raw = json.dumps({"offset": offset, "rv": version}).encode()
    return base64.urlsafe_b64encode(raw).decode()


def _page_start(token: str) -> int:
    try:
        offset = json.loads(base64.urlsafe_b64decode(token.encode()))["offset"]
    except (ValueError, KeyError, TypeError) as exc:
        raise bad_request("continue key is not valid: illegal base64 data") from exc
    return int(offset)


def list_objects(cluster: Cluster, kind: Kind, namespace: str | None, query: dict[str, str]) -> Obj:
    labels = parse_labels(query.get("labelSelector"))
    fields = parse_fields(query.get("fieldSelector"), kind.kind)
    try:
        limit = int(query.get("limit") or 0)
    except ValueError as exc:
        raise bad_request(f"limit: invalid value {query['limit']!r}") from exc
    with cluster.lock:
        found = [
            obj
            for obj in cluster.store.items(kind, namespace)
            if match_labels(labels, obj) and match_fields(fields, obj)
        ]
        version = cluster.store.resource_version
        start = _page_start(query["continue"]) if query.get("continue") else 0
        meta: Obj = {"resourceVersion": version}
        if limit > 0:
            end = start + limit
            if end < len(found):
                meta["continue"] = _page_token(end, version)
                meta["remainingItemCount"] = len(found) - end
            found = found[start:end]
        else:
            found = found[start:]
        return {
            "kind": kind.list_kind,
            "apiVersion": kind.api_version,
            "metadata": meta,
            "items": copy.deepcopy(found),
        }


def get_object(cluster: Cluster, kind: Kind, namespace: str | None, name: str) -> Obj:
    with cluster.lock:
        return copy.deepcopy(cluster.store.get(kind, namespace, name))


def create(
    cluster: Cluster, kind: Kind, namespace: str | None, body: Any, query: dict[str, str]
) -> Obj:
    if not isinstance(body, dict):
        raise bad_request(f"the body must be a {kind.kind} object")
    obj = copy.deepcopy(body)
    meta = obj.setdefault("metadata", {})
    if kind.namespaced:
        if meta.get("namespace") not in (None, "", namespace):
            raise bad_request(
                "the namespace of the provided object does not match the namespace sent on "
                "the request"
            )
        meta["namespace"] = namespace
    for field in ("uid", "resourceVersion", "deletionTimestamp", "deletionGracePeriodSeconds"):
        meta.pop(field, None)
    obj["apiVersion"], obj["kind"] = kind.api_version, kind.kind
    validate(kind, obj)
    preview = dry_run(query)
    with cluster.lock:
        now = cluster.now()
        if kind.has_status:
            obj["status"] = {}
        if kind is POD:
            pods.complete(obj)
        elif kind is EVENT:
            manifests.event_defaults(obj, now)
        if preview:
            if not meta.get("name") and meta.get("generateName"):
                meta["name"] = cluster.store.generate_name(kind, namespace, meta["generateName"])
            if cluster.store.find(kind, namespace, meta.get("name", "")) is not None:
                raise status.already_exists(kind, meta["name"])
            meta["uid"] = cluster.store.new_uid()
            return obj
        if kind is JOB:
            meta["uid"] = cluster.store.new_uid()
            if not meta.get("name") and meta.get("generateName"):
                meta["name"] = cluster.store.generate_name(kind, namespace, meta["generateName"])
            manifests.job_defaults(obj)
        return copy.deepcopy(cluster.store.insert(kind, obj, now))


def _store_change(
    cluster: Cluster,
    kind: Kind,
    current: Obj,
    proposed: Obj,
    *,
    subresource: str | None,
    preview: bool,
) -> Obj:
    """Validate `proposed` as the next state of `current` and store it unless previewing."""
    name = current["metadata"]["name"]
    new_meta = proposed.get("metadata")
    if not isinstance(new_meta, dict):
        raise status.invalid(kind, name, "metadata", "Required value")
    expected = new_meta.get("resourceVersion")
    if expected not in (None, "") and expected != current["metadata"]["resourceVersion"]:
        raise status.modified(kind, name)
    if new_meta.get("name") not in (None, name):
        raise bad_request(
            f"the name of the object ({new_meta.get('name')}) does not match the name on the "
            f"URL ({name})"
        )
    if subresource == "status":
        result = copy.deepcopy(current)
        result["status"] = copy.deepcopy(proposed.get("status") or {})
    else:
        result = copy.deepcopy(proposed)
        for field in IMMUTABLE_META:
            if field in current["metadata"]:
                result["metadata"][field] = current["metadata"][field]
        if kind.has_status and "status" in current:
            result["status"] = copy.deepcopy(current["status"])
        if result.get("spec") != current.get("spec") and "generation" in current["metadata"]:
            result["metadata"]["generation"] = current["metadata"]["generation"] + 1
    result["apiVersion"], result["kind"] = kind.api_version, kind.kind
    validate(kind, result)
    if preview:
        return result
    if result == current:
        return copy.deepcopy(current)
    return copy.deepcopy(cluster.store.write(kind, result))


def replace(
    cluster: Cluster,
    kind: Kind,
    namespace: str | None,
    name: str,
    body: Any,
    query: dict[str, str],
    subresource: str | None = None,
) -> Obj:
    if not isinstance(body, dict):
        raise bad_request(f"the body must be a {kind.kind} object")
    preview = dry_run(query)
    with cluster.lock:
        current = cluster.store.get(kind, namespace, name)
        return _store_change(cluster, kind, current, body, subresource=subresource, preview=preview)


def patch(
    cluster: Cluster,
    kind: Kind,
    namespace: str | None,
    name: str,
    content_type: str,
    body: Any,
    query: dict[str, str],
    subresource: str | None = None,
) -> Obj:
    preview = dry_run(query)
    with cluster.lock:
        current = cluster.store.get(kind, namespace, name)
        proposed = patches.apply(content_type, current, body)
        return _store_change(
            cluster, kind, current, proposed, subresource=subresource, preview=preview
        )


def delete(
    cluster: Cluster,
    kind: Kind,
    namespace: str | None,
    name: str,
    body: Any,
    query: dict[str, str],
) -> tuple[int, Obj]:
    options = deletion.DeleteOptions.parse(body, query)
    with cluster.lock:
        return deletion.delete_object(cluster, kind, namespace, name, options)


def evict(cluster: Cluster, namespace: str, name: str, body: Any, query: dict[str, str]) -> Obj:
    with cluster.lock:
        return deletion.evict(cluster, namespace, name, body, query)


def read_log(cluster: Cluster, namespace: str, name: str, query: dict[str, str]) -> str:
    with cluster.lock:
        pod = cluster.store.get(POD, namespace, name)
        names = [c["name"] for c in pod["spec"].get("containers") or []]
        wanted = query.get("container")
        if wanted is None and len(names) > 1:
            raise bad_request(
                f"a container name must be specified for pod {name}, choose one of: {names}"
            )
        if wanted is not None and wanted not in names:
            raise bad_request(f"container {wanted} is not valid for pod {name}")
        if pod["status"].get("phase") == "Pending":
            raise bad_request(
                f'container "{wanted or names[0]}" in pod "{name}" is waiting to start: '
                "ContainerCreating"
            )
        text = cluster.books.logs.get(pod["metadata"]["uid"], "")
    try:
        tail = int(query["tailLines"]) if "tailLines" in query else None
        limit = int(query["limitBytes"]) if "limitBytes" in query else None
    except ValueError as exc:
        raise bad_request("tailLines and limitBytes must be integers") from exc
    if tail is not None:
        text = "".join(text.splitlines(keepends=True)[-tail:] if tail > 0 else [])
    if limit is not None:
        text = text.encode()[:limit].decode(errors="ignore")
    return text

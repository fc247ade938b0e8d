"""DELETE and the Eviction subresource: graceful pod deletion, cascades, budgets.

A pod bound to a node is marked terminating (deletionTimestamp,
deletionGracePeriodSeconds) and the kubelet removes it when the grace period has passed;
an unbound or finished pod, or grace 0, goes at once. Deleting a controller cascades to
its pods unless the propagation policy is Orphan (the default for batch/v1 Jobs).
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from bot.sim import disruption, pods, status
from bot.sim.controllers import OWNER_KINDS, owned
from bot.sim.kinds import JOB, NAMESPACE, POD, Kind
from bot.sim.status import ApiError, bad_request

if TYPE_CHECKING:
    from bot.sim.cluster import Cluster

Obj = dict[str, Any]


@dataclass(frozen=True)
class DeleteOptions:
    grace_seconds: int | None = None
    propagation: str | None = None
    dry_run: bool = False
    uid: str | None = None
    resource_version: str | None = None

    @classmethod
    def parse(cls, body: Any, query: dict[str, str]) -> DeleteOptions:
        """DeleteOptions from a JSON body, completed by query parameters."""
        if body is None:
            body = {}
        if not isinstance(body, dict):
            raise bad_request("DeleteOptions must be a JSON object")
        grace = body.get("gracePeriodSeconds", query.get("gracePeriodSeconds"))
        propagation = body.get("propagationPolicy", query.get("propagationPolicy"))
        if body.get("orphanDependents") is True or query.get("orphanDependents") == "true":
            propagation = propagation or "Orphan"
        if propagation not in (None, "Orphan", "Background", "Foreground"):
            raise bad_request(f"propagationPolicy: Unsupported value: {propagation!r}")
        dry_run = body.get("dryRun") or ([query["dryRun"]] if "dryRun" in query else [])
        if any(value != "All" for value in dry_run):
            raise bad_request(f'dryRun: Unsupported value: {dry_run!r}: supported values: "All"')
        preconditions = body.get("preconditions") or {}
        try:
            grace_seconds = None if grace is None else int(grace)
        except (TypeError, ValueError) as exc:
            raise bad_request(f"gracePeriodSeconds: invalid value {grace!r}") from exc
        return cls(
            grace_seconds=grace_seconds,
            propagation=propagation,
            dry_run=bool(dry_run),
            uid=preconditions.get("uid"),
            resource_version=preconditions.get("resourceVersion"),
        )


def _check_preconditions(kind: Kind, obj: Obj, options: DeleteOptions) -> None:
    meta = obj["metadata"]
    if options.uid is not None and options.uid != meta["uid"]:
        raise status.conflict(
            kind,
            meta["name"],
            f"Precondition failed: UID in precondition: {options.uid}, "
            f"UID in object meta: {meta['uid']}",
        )
    if options.resource_version is not None and options.resource_version != meta["resourceVersion"]:
        raise status.conflict(
            kind,
            meta["name"],
            f"Precondition failed: ResourceVersion in precondition: {options.resource_version}, "
            f"ResourceVersion in object meta: {meta['resourceVersion']}",
        )


def delete_pod(cluster: Cluster, namespace: str, name: str, options: DeleteOptions) -> Obj:
    """Delete a pod as the API does; return the pod as the response shows it."""
    pod = cluster.store.get(POD, namespace, name)
    _check_preconditions(POD, pod, options)
    grace = options.grace_seconds
    if grace is None or grace < 0:
        grace = int(pod["spec"].get("terminationGracePeriodSeconds", 30))
    if not pod["spec"].get("nodeName") or pods.is_terminal(pod):
        grace = 0
    if options.dry_run:
        preview = copy.deepcopy(pod)
        if grace > 0 and not pods.is_deleting(preview):
            preview["metadata"]["deletionTimestamp"] = pods.stamp(cluster.now())
            preview["metadata"]["deletionGracePeriodSeconds"] = grace
        return preview
    if grace == 0:
        cluster.forget(pod)
        return copy.deepcopy(cluster.store.remove(POD, namespace, name))
    cluster.begin_delete(pod, grace, time.monotonic())
    return copy.deepcopy(pod)


def delete_object(
    cluster: Cluster, kind: Kind, namespace: str | None, name: str, options: DeleteOptions
) -> tuple[int, Obj]:
    """DELETE on any kind; returns the status code and the body."""
    if kind is POD:
        return 200, delete_pod(cluster, namespace or "", name, options)
    obj = cluster.store.get(kind, namespace, name)
    _check_preconditions(kind, obj, options)
    details: Obj = {"name": name, "kind": kind.plural, "uid": obj["metadata"]["uid"]}
    if kind.group:
        details = {"name": name, "group": kind.group, "kind": kind.plural, "uid": details["uid"]}
    if options.dry_run:
        return 200, status.success(200, details)
    if kind.kind in OWNER_KINDS:
        default = "Orphan" if kind is JOB else "Background"
        _cascade(cluster, obj, options.propagation or default)
    if kind is NAMESPACE:
        for other, item in list(cluster.store):
            if other.namespaced and item["metadata"].get("namespace") == name:
                cluster.store.remove(other, name, item["metadata"]["name"])
    cluster.store.remove(kind, namespace, name)
    return 200, status.success(200, details)


def _cascade(cluster: Cluster, owner: Obj, propagation: str) -> None:
    for pod in owned(cluster, owner):
        if propagation == "Orphan":
            pod["metadata"]["ownerReferences"] = [
                ref
                for ref in pod["metadata"].get("ownerReferences") or []
                if ref.get("uid") != owner["metadata"]["uid"]
            ]
            if not pod["metadata"]["ownerReferences"]:
                del pod["metadata"]["ownerReferences"]
            cluster.store.write(POD, pod)
        elif not pods.is_deleting(pod):
            meta = pod["metadata"]
            delete_pod(cluster, meta["namespace"], meta["name"], DeleteOptions())


def evict(cluster: Cluster, namespace: str, name: str, body: Any, query: dict[str, str]) -> Obj:
    """POST pods/{name}/eviction: delete the pod if its disruption budget allows."""
    if not isinstance(body, dict):
        raise bad_request("the Eviction body must be a JSON object")
    meta = body.get("metadata") or {}
    if meta.get("name") not in (None, name):
        raise bad_request(
            f"name in URL does not match name in Eviction object: {meta.get('name')} != {name}"
        )
    pod = cluster.store.get(POD, namespace, name)
    fault = cluster.take_eviction_fault(namespace, name)
    if fault is not None:
        raise _budget_flavoured(cluster, pod, fault)
    options = DeleteOptions.parse(body.get("deleteOptions"), query)
    _check_preconditions(POD, pod, options)
    disruption.check_eviction(cluster.store, pod)
    delete_pod(cluster, namespace, name, options)
    # The eviction REST spends the disruption in the budget's status in the same step, so
    # no watcher of the budget sees a disruption left that this eviction took.
    disruption.refresh(cluster.store, pod, cluster.now())
    return status.success(201)


def _budget_flavoured(cluster: Cluster, pod: Obj, fault: ApiError) -> ApiError:
    """An injected 429 reads like a real budget refusal, naming the pod's budget."""
    if fault.code != 429:
        return fault
    budgets = disruption.budgets_for(cluster.store, pod)
    if budgets:
        assessed = disruption.assess(cluster.store, budgets[0])
        return disruption.Budget(
            assessed.name, assessed.expected, assessed.current, assessed.current
        ).refusal()
    return ApiError(429, disruption.EVICTION_REFUSED)

"""The control plane's loops, one function each: ReplicaSet, StatefulSet, DaemonSet and
mirror pods, the scheduler, garbage collection, node taints, and the status fields of
workloads and PodDisruptionBudgets.

Each runs under the cluster lock from the kubelet thread and writes an object only when
it changes, so resourceVersions move only on real changes.
"""

from __future__ import annotations

import copy
import hashlib
from typing import TYPE_CHECKING, Any

from bot.sim import disruption, manifests, pods, scheduling
from bot.sim.kinds import DAEMON_SET, JOB, NODE, PDB, POD, REPLICA_SET, STATEFUL_SET, Kind
from bot.sim.scenario import StaticPod

if TYPE_CHECKING:
    from bot.sim.cluster import Cluster

Obj = dict[str, Any]

OWNER_KINDS: dict[str, Kind] = {
    "ReplicaSet": REPLICA_SET,
    "StatefulSet": STATEFUL_SET,
    "DaemonSet": DAEMON_SET,
    "Job": JOB,
    "Node": NODE,
}


def owned(cluster: Cluster, owner: Obj) -> list[Obj]:
    uid = owner["metadata"]["uid"]
    namespace = owner["metadata"].get("namespace")
    return [
        p
        for p in cluster.store.items(POD, namespace)
        if (pods.controller_of(p) or {}).get("uid") == uid
    ]


def spawn(cluster: Cluster, pod: Obj, node: str | None, mono: float, *, instant: bool) -> Obj:
    """Create a pod: bound to `node` (Running at once if `instant`) or left for the scheduler."""
    now = cluster.now()
    if node is not None:
        pods.mark_scheduled(pod, node, cluster.host_ip(node), now)
        if instant:
            pods.mark_running(pod, cluster.pod_ip(), now)
    created = cluster.store.insert(POD, pod, now)
    if node is not None and not instant:
        cluster.books.ready_at[created["metadata"]["uid"]] = mono + cluster.scaled(
            cluster.scenario.startup_seconds
        )
    return created


def reconcile_replica_sets(cluster: Cluster, mono: float) -> None:
    for rs in cluster.store.items(REPLICA_SET):
        active = [
            p for p in owned(cluster, rs) if not pods.is_deleting(p) and not pods.is_terminal(p)
        ]
        for _ in range(int(rs["spec"].get("replicas", 1)) - len(active)):
            ns = rs["metadata"]["namespace"]
            name = cluster.store.generate_name(POD, ns, f"{rs['metadata']['name']}-")
            pod = pods.from_template(rs["spec"]["template"], name=name, namespace=ns, owner=rs)
            spawn(cluster, pod, None, mono, instant=False)


def reconcile_stateful_sets(cluster: Cluster, mono: float) -> None:
    for sts in cluster.store.items(STATEFUL_SET):
        ns, base = sts["metadata"]["namespace"], sts["metadata"]["name"]
        for index in range(int(sts["spec"].get("replicas", 1))):
            name = f"{base}-{index}"
            if cluster.store.find(POD, ns, name) is not None:
                continue
            extra = {
                "statefulset.kubernetes.io/pod-name": name,
                "apps.kubernetes.io/pod-index": str(index),
            }
            pod = pods.from_template(
                sts["spec"]["template"], name=name, namespace=ns, owner=sts, extra_labels=extra
            )
            spawn(cluster, pod, None, mono, instant=False)


def _ds_nodes(cluster: Cluster, ds: Obj) -> list[Obj]:
    selector = ds["spec"]["template"].get("spec", {}).get("nodeSelector") or {}
    return [
        n
        for n in cluster.store.items(NODE)
        if all((n["metadata"].get("labels") or {}).get(k) == v for k, v in selector.items())
    ]


def reconcile_daemon_sets(cluster: Cluster, mono: float = 0.0, *, instant: bool = False) -> None:
    for ds in cluster.store.items(DAEMON_SET):
        ns = ds["metadata"]["namespace"]
        covered = {p["spec"].get("nodeName") for p in owned(cluster, ds)}
        for node in _ds_nodes(cluster, ds):
            node_name = node["metadata"]["name"]
            if node_name in covered:
                continue
            name = cluster.store.generate_name(POD, ns, f"{ds['metadata']['name']}-")
            pod = pods.from_template(ds["spec"]["template"], name=name, namespace=ns, owner=ds)
            pod["spec"]["tolerations"] = copy.deepcopy(manifests.DAEMON_TOLERATIONS)
            spawn(cluster, pod, node_name, mono, instant=instant)


def mirror_pod(cluster: Cluster, static: StaticPod, node: Obj) -> Obj:
    """The API's view of a static pod: annotated as a mirror, owned by the Node."""
    node_name = node["metadata"]["name"]
    digest = hashlib.sha256(f"{static.namespace}/{static.name}/{static.image}".encode()).hexdigest()
    annotations = {
        "kubernetes.io/config.mirror": digest[:32],
        "kubernetes.io/config.hash": digest[:32],
        "kubernetes.io/config.source": "file",
    }
    spec: Obj = {
        "containers": [pods.container(static.name, static.image)],
        "terminationGracePeriodSeconds": cluster.scenario.termination_grace_seconds,
        "priorityClassName": "system-node-critical",
        "priority": 2000001000,
        "tolerations": [{"operator": "Exists", "effect": "NoExecute"}],
    }
    pod = pods.from_template(
        manifests.template({"component": static.name, "tier": "node"}, spec, annotations),
        name=f"{static.name}-{node_name}",
        namespace=static.namespace,
        owner=node,
    )
    pod["metadata"]["ownerReferences"][0]["blockOwnerDeletion"] = False
    return pod


def reconcile_mirror_pods(cluster: Cluster, mono: float = 0.0, *, instant: bool = False) -> None:
    for node in cluster.store.items(NODE):
        for static in cluster.static_pods:
            name = f"{static.name}-{node['metadata']['name']}"
            if cluster.store.find(POD, static.namespace, name) is None:
                pod = mirror_pod(cluster, static, node)
                spawn(cluster, pod, node["metadata"]["name"], mono, instant=instant)


def _avoid(cluster: Cluster, pod: Obj) -> set[str]:
    """Nodes the pod's predecessor is leaving: the scheduler tries elsewhere first."""
    meta = pod["metadata"]
    avoid = set()
    vacated = cluster.books.vacated.get((meta["namespace"], meta["name"]))
    if vacated:
        avoid.add(vacated)
    ref = pods.controller_of(pod)
    if ref is not None:
        for sibling in cluster.store.items(POD, meta["namespace"]):
            if (
                pods.is_deleting(sibling)
                and (pods.controller_of(sibling) or {}).get("uid") == ref["uid"]
            ):
                avoid.add(sibling["spec"].get("nodeName", ""))
    return avoid


def schedule_pending(cluster: Cluster, mono: float) -> None:
    for pod in cluster.store.items(POD):
        if pod["spec"].get("nodeName") or pods.is_deleting(pod):
            continue
        node, message = scheduling.pick(cluster.store, pod, _avoid(cluster, pod))
        if node is None:
            conditions = pod["status"].get("conditions") or [{}]
            if conditions[0].get("message") != message:
                pods.mark_unschedulable(pod, message, cluster.now())
                cluster.store.write(POD, pod)
            continue
        pods.mark_scheduled(pod, node, cluster.host_ip(node), cluster.now())
        cluster.books.ready_at[pod["metadata"]["uid"]] = mono + cluster.scaled(
            cluster.scenario.startup_seconds
        )
        cluster.store.write(POD, pod)


def collect_garbage(cluster: Cluster, mono: float) -> None:
    """Pods on deleted nodes vanish; pods whose controller is gone are deleted."""
    nodes = {n["metadata"]["name"] for n in cluster.store.items(NODE)}
    for pod in cluster.store.items(POD):
        meta = pod["metadata"]
        if pod["spec"].get("nodeName") and pod["spec"]["nodeName"] not in nodes:
            cluster.forget(cluster.store.remove(POD, meta["namespace"], meta["name"]))
            continue
        ref = pods.controller_of(pod)
        kind = OWNER_KINDS.get(ref.get("kind", "")) if ref else None
        if ref is None or kind is None or pods.is_deleting(pod):
            continue
        owner = cluster.store.find(kind, None if kind is NODE else meta["namespace"], ref["name"])
        if owner is None or owner["metadata"]["uid"] != ref["uid"]:
            grace = int(pod["spec"].get("terminationGracePeriodSeconds", 30))
            cluster.begin_delete(pod, grace, mono)


def sync_unschedulable_taints(cluster: Cluster) -> None:
    """The node lifecycle controller's taint for spec.unschedulable (TaintNodesByCondition)."""
    if not cluster.scenario.unschedulable_taint:
        return
    for node in cluster.store.items(NODE):
        taints = node["spec"].get("taints") or []
        has = any(t.get("key") == scheduling.UNSCHEDULABLE_TAINT for t in taints)
        wanted = bool(node["spec"].get("unschedulable"))
        if has == wanted:
            continue
        if wanted:
            taints = [*taints, {"key": scheduling.UNSCHEDULABLE_TAINT, "effect": "NoSchedule"}]
        else:
            taints = [t for t in taints if t.get("key") != scheduling.UNSCHEDULABLE_TAINT]
        if taints:
            node["spec"]["taints"] = taints
        else:
            node["spec"].pop("taints", None)
        cluster.store.write(NODE, node)


def _set_status(cluster: Cluster, kind: Kind, obj: Obj, status: Obj) -> None:
    if obj.get("status") != status:
        obj["status"] = status
        cluster.store.write(kind, obj)


def update_statuses(cluster: Cluster) -> None:
    for kind in (REPLICA_SET, STATEFUL_SET):
        for owner in cluster.store.items(kind):
            live = [p for p in owned(cluster, owner) if not pods.is_terminal(p)]
            ready = sum(1 for p in live if pods.is_ready(p))
            status: Obj = {
                "replicas": len(live),
                "readyReplicas": ready,
                "availableReplicas": ready,
                "observedGeneration": owner["metadata"].get("generation", 1),
            }
            if kind is REPLICA_SET:
                status["fullyLabeledReplicas"] = len(live)
            else:
                revision = f"{owner['metadata']['name']}-1"
                status.update(
                    currentReplicas=len(live),
                    updatedReplicas=len(live),
                    currentRevision=revision,
                    updateRevision=revision,
                )
            _set_status(cluster, kind, owner, status)
    for ds in cluster.store.items(DAEMON_SET):
        live = [p for p in owned(cluster, ds) if not pods.is_terminal(p)]
        ready = sum(1 for p in live if pods.is_ready(p))
        desired = len(_ds_nodes(cluster, ds))
        _set_status(
            cluster,
            DAEMON_SET,
            ds,
            {
                "currentNumberScheduled": len(live),
                "desiredNumberScheduled": desired,
                "numberMisscheduled": 0,
                "numberReady": ready,
                "numberAvailable": ready,
                "updatedNumberScheduled": len(live),
                "observedGeneration": ds["metadata"].get("generation", 1),
            },
        )
    for budget in cluster.store.items(PDB):
        assessed = disruption.assess(cluster.store, budget)
        _set_status(cluster, PDB, budget, disruption.status_of(budget, assessed, cluster.now()))

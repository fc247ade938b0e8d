"""Turn a `Scenario` into objects: the cluster as it stands when the simulator starts.

Seeded pods are already Running and Ready; controller-owned ones are placed by the
scheduler (or a workload's explicit `nodes`). Later pods come from the kubelet loop.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from bot.sim import controllers, manifests, pods, scheduling
from bot.sim.kinds import (
    DAEMON_SET,
    NAMESPACE,
    NODE,
    PDB,
    POD,
    PV,
    PVC,
    QUEUE,
    REPLICA_SET,
    STATEFUL_SET,
    STORAGE_CLASS,
)
from bot.sim.scenario import Scenario, Volume, Workload

if TYPE_CHECKING:
    from bot.sim.cluster import Cluster

Obj = dict[str, Any]


def populate(cluster: Cluster, scenario: Scenario) -> None:
    store, now = cluster.store, cluster.now()
    for name in scenario.all_namespaces():
        store.insert(NAMESPACE, manifests.namespace(name), now)
    index = 0
    for pool in scenario.nodes:
        for name in pool.names():
            index += 1
            node = manifests.node(
                name,
                index=index,
                gpus=pool.gpus,
                gpu_product=pool.gpu_product,
                cpu=pool.cpu,
                memory=pool.memory,
                max_pods=pool.max_pods,
                labels=dict(pool.labels),
                taints=[t.model_dump(exclude_none=True) for t in pool.taints],
                unschedulable=pool.unschedulable,
                ready=pool.ready,
                now=now,
            )
            store.insert(NODE, node, now)
    for sc in scenario.storage_classes:
        obj = manifests.storage_class(sc.name, sc.provisioner, sc.reclaim_policy, sc.default)
        store.insert(STORAGE_CLASS, obj, now)
    for c in scenario.claims:
        pv_name = f"pv-{c.namespace}-{c.name}"
        pvc = manifests.claim(c.name, c.namespace, c.size, c.storage_class, c.access_modes, pv_name)
        pvc = store.insert(PVC, pvc, now)
        store.insert(PV, manifests.nfs_volume(pv_name, pvc, c.server, c.path), now)
    for queue in scenario.queues:
        obj = manifests.queue(
            queue.name, queue.weight, queue.state, queue.reclaimable, dict(queue.capability)
        )
        store.insert(QUEUE, obj, now)
    for ds in scenario.daemon_sets:
        labels = {"app.kubernetes.io/name": ds.name}
        spec = _spec(scenario, [pods.container(ds.name, ds.image)], [])
        spec["nodeSelector"] = dict(ds.node_selector)
        spec["tolerations"] = list(manifests.DAEMON_TOLERATIONS)
        store.insert(
            DAEMON_SET,
            manifests.daemon_set(ds.name, ds.namespace, labels, manifests.template(labels, spec)),
            now,
        )
    for workload in scenario.workloads:
        _seed_workload(cluster, workload)
    for bare in scenario.bare_pods:
        containers = [
            pods.container("main", bare.image, gpus=bare.gpus, mounts=_mounts(bare.volumes))
        ]
        spec = _spec(scenario, containers, bare.volumes)
        pod = pods.from_template(
            manifests.template({"run": bare.name}, spec),
            name=bare.name,
            namespace=bare.namespace,
            owner=None,
        )
        _start(cluster, pod, bare.node)
    # DaemonSet and mirror pods: the kubelet loop's reconcilers, run once, instantly.
    controllers.reconcile_daemon_sets(cluster, instant=True)
    controllers.reconcile_mirror_pods(cluster, instant=True)


def _spec(scenario: Scenario, containers: list[Obj], volumes: list[Volume]) -> Obj:
    spec: Obj = {
        "containers": containers,
        "terminationGracePeriodSeconds": scenario.termination_grace_seconds,
    }
    if volumes:
        spec["volumes"] = [
            {"name": v.name, "emptyDir": {}}
            if v.empty_dir
            else {"name": v.name, "persistentVolumeClaim": {"claimName": v.claim}}
            for v in volumes
        ]
    return spec


def _mounts(volumes: list[Volume]) -> list[Obj]:
    return [{"name": v.name, "mountPath": v.mount_path} for v in volumes]


def _seed_workload(cluster: Cluster, workload: Workload) -> None:
    store, scenario = cluster.store, cluster.scenario
    labels = {"app.kubernetes.io/name": workload.name, **workload.labels}
    container = pods.container(
        workload.name,
        workload.image,
        gpus=workload.gpus,
        command=workload.command or None,
        mounts=_mounts(workload.volumes),
    )
    tmpl = manifests.template(labels, _spec(scenario, [container], workload.volumes))
    build = manifests.stateful_set if workload.kind == "StatefulSet" else manifests.replica_set
    kind = STATEFUL_SET if workload.kind == "StatefulSet" else REPLICA_SET
    owner = store.insert(
        kind,
        build(workload.name, workload.namespace, workload.replicas, labels, tmpl),
        cluster.now(),
    )
    if workload.budget:
        budget = workload.budget
        limit = (
            {"minAvailable": budget.min_available}
            if budget.min_available is not None
            else {"maxUnavailable": budget.max_unavailable}
        )
        name = budget.name or f"{workload.name}-pdb"
        store.insert(PDB, manifests.pdb(name, workload.namespace, labels, limit), cluster.now())
    for i in range(workload.replicas):
        if workload.kind == "StatefulSet":
            name = f"{workload.name}-{i}"
            extra = {
                "statefulset.kubernetes.io/pod-name": name,
                "apps.kubernetes.io/pod-index": str(i),
            }
        else:
            name = store.generate_name(POD, workload.namespace, f"{workload.name}-")
            extra = {}
        pod = pods.from_template(
            tmpl, name=name, namespace=workload.namespace, owner=owner, extra_labels=extra
        )
        target = workload.nodes[i % len(workload.nodes)] if workload.nodes else None
        if target is None:
            target, _ = scheduling.pick(store, pod)
        if target is None:
            store.insert(POD, pod, cluster.now())
        else:
            _start(cluster, pod, target)


def _start(cluster: Cluster, pod: Obj, node: str) -> None:
    now = cluster.now()
    pods.mark_scheduled(pod, node, cluster.host_ip(node), now)
    pods.mark_running(pod, cluster.pod_ip(), now)
    cluster.store.insert(POD, pod, now)

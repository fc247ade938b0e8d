"""The simulated cluster: the object store behind one lock, the kubelet's bookkeeping,
and the hooks tests use to arrange trouble and read the outcome.

The API (`api`, through `verbs`) and the kubelet thread (`kubelet`) both change state
only while holding `lock`. Hooks are plain methods; none of them goes over HTTP.
"""

from __future__ import annotations

import copy
import fnmatch
import threading
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from bot.clock import Clock, SystemClock
from bot.sim import hardware, kinds, manifests, pods, seeding
from bot.sim.kinds import NODE, POD, Kind
from bot.sim.scenario import Command, Scenario
from bot.sim.status import ApiError, reason_for
from bot.sim.store import HISTORY, Store

Obj = dict[str, Any]


@dataclass(frozen=True)
class RecordedRequest:
    method: str
    path: str
    query: dict[str, str]
    status: int


@dataclass
class RequestFault:
    pattern: str
    method: str | None
    status: int
    remaining: int
    retry_after: int | None

    def matches(self, method: str, path: str) -> bool:
        return (self.method is None or self.method == method) and fnmatch.fnmatchcase(
            path, self.pattern
        )


@dataclass
class RequestHold:
    """Requests matching `pattern` (and `method`) get no answer until `release`: an API
    server that is slow to answer, for tests of what waits on it and what does not."""

    pattern: str
    method: str | None
    arrived: threading.Event = field(default_factory=threading.Event)
    """Set when the first matching request came and is held."""
    released: threading.Event = field(default_factory=threading.Event)

    def matches(self, method: str, path: str) -> bool:
        return (self.method is None or self.method == method) and fnmatch.fnmatchcase(
            path, self.pattern
        )

    def release(self) -> None:
        """Answer the held requests (and let later ones through)."""
        self.released.set()


@dataclass(frozen=True)
class NodeState:
    unschedulable: bool
    ready: bool
    taints: list[Obj]
    labels: dict[str, str]
    annotations: dict[str, str]


@dataclass(frozen=True)
class Snapshot:
    nodes: dict[str, NodeState]
    pods: frozenset[tuple[str, str, str]]
    """(namespace, name, node) of every pod; node is "" while unscheduled."""
    terminating: frozenset[tuple[str, str]]
    resource_version: str

    def pods_on(self, node: str) -> set[tuple[str, str]]:
        return {(ns, name) for ns, name, where in self.pods if where == node}


@dataclass
class Bookkeeping:
    """What the kubelet knows that the API does not show: deadlines, logs, faults."""

    delete_at: dict[str, float] = field(default_factory=dict)
    ready_at: dict[str, float] = field(default_factory=dict)
    finish_at: dict[str, float] = field(default_factory=dict)
    logs: dict[str, str] = field(default_factory=dict)
    stuck: set[str] = field(default_factory=set)
    vacated: dict[tuple[str, str], str] = field(default_factory=dict)
    eviction_faults: dict[tuple[str, str], list[int]] = field(default_factory=dict)
    request_faults: list[RequestFault] = field(default_factory=list)
    request_holds: list[RequestHold] = field(default_factory=list)
    requests: list[RecordedRequest] = field(default_factory=list)


class Cluster:
    def __init__(
        self,
        scenario: Scenario,
        *,
        time_scale: float = 1.0,
        clock: Clock | None = None,
        history: int = HISTORY,
    ) -> None:
        if time_scale <= 0:
            raise ValueError("time_scale must be positive")
        self.scenario = scenario
        self.time_scale = time_scale
        self.clock: Clock = clock or SystemClock()
        self.lock = threading.RLock()
        self.stopping = threading.Event()  # set on shutdown: open watches end
        self.store = Store(history=history)  # how far back watches can resume
        self.books = Bookkeeping()
        self.commands: list[Command] = list(scenario.commands)
        self.static_pods = list(scenario.static_pods)
        self._ips = 0
        with self.lock:
            seeding.populate(self, scenario)
            sizes = {
                name: (pool.gpus, pool.gpu_product)
                for pool in scenario.nodes
                for name in pool.names()
            }
            self.machines = hardware.build(scenario, sizes, self.now())
            for machine in self.machines.values():
                if machine.power == "Off":
                    self.set_node_ready(machine.node, False)

    # -- shared by the API and the kubelet --------------------------------------------

    def now(self) -> datetime:
        return self.clock.now()

    def scaled(self, seconds: float) -> float:
        return seconds * self.time_scale

    def pod_ip(self) -> str:
        self._ips += 1
        return f"10.244.{self._ips // 250 % 250}.{self._ips % 250 + 2}"

    def host_ip(self, node_name: str) -> str:
        node = self.store.find(NODE, None, node_name)
        for address in (node or {}).get("status", {}).get("addresses") or []:
            if address.get("type") == "InternalIP":
                return str(address["address"])
        return "192.0.2.254"

    def begin_delete(self, pod: Obj, grace: int, monotonic_now: float) -> None:
        """Mark `pod` terminating; the kubelet removes it once the grace period passes."""
        meta = pod["metadata"]
        uid = meta["uid"]
        deadline = monotonic_now + self.scaled(grace)
        if uid in self.books.delete_at and self.books.delete_at[uid] <= deadline:
            return
        self.books.delete_at[uid] = deadline
        meta["deletionTimestamp"] = pods.stamp(self.now() + timedelta(seconds=self.scaled(grace)))
        meta["deletionGracePeriodSeconds"] = grace
        self.store.write(POD, pod)

    def forget(self, pod: Obj) -> None:
        uid = pod["metadata"]["uid"]
        for table in (self.books.delete_at, self.books.ready_at, self.books.finish_at):
            table.pop(uid, None)
        self.books.stuck.discard(uid)

    # -- test hooks: arrange ----------------------------------------------------------

    def make_stuck(self, namespace: str, name: str) -> None:
        """The pod never finishes terminating (a hung kubelet or a finalizer)."""
        with self.lock:
            self.books.stuck.add(self.store.get(POD, namespace, name)["metadata"]["uid"])

    def rebind(self, namespace: str, name: str, node: str) -> Obj:
        """Replace the pod with one of the same name on `node`: new UID, Running, Ready."""
        with self.lock:
            old = self.store.remove(POD, namespace, name)
            self.forget(old)
            pod = copy.deepcopy(old)
            pod["metadata"] = {
                k: v
                for k, v in pod["metadata"].items()
                if k not in ("uid", "deletionTimestamp", "deletionGracePeriodSeconds")
            }
            pods.mark_scheduled(pod, node, self.host_ip(node), self.now())
            pods.mark_running(pod, self.pod_ip(), self.now())
            return copy.deepcopy(self.store.insert(POD, pod, self.now()))

    def fail_evictions(self, namespace: str, name: str, status: int, times: int = 1) -> None:
        """The next `times` evictions of the pod answer `status` instead of working."""
        with self.lock:
            faults = self.books.eviction_faults.setdefault((namespace, name), [])
            faults.extend([status] * times)

    def fail_requests(
        self,
        path: str,
        status: int,
        times: int = 1,
        *,
        method: str | None = None,
        retry_after: int | None = None,
    ) -> None:
        """The next `times` requests whose path matches the glob `path` get `status`."""
        with self.lock:
            self.books.request_faults.append(RequestFault(path, method, status, times, retry_after))

    def add_node(self, name: str, *, gpus: int = 8, ready: bool = True) -> Obj:
        with self.lock:
            index = len(self.store.items(NODE)) + 1
            pool = self.scenario.nodes[0] if self.scenario.nodes else None
            node = manifests.node(
                name,
                index=index,
                gpus=gpus,
                gpu_product=pool.gpu_product if pool else "NVIDIA-H100-80GB-HBM3",
                cpu=pool.cpu if pool else "96",
                memory=pool.memory if pool else "1536Gi",
                max_pods=pool.max_pods if pool else 110,
                labels={},
                taints=[],
                unschedulable=False,
                ready=ready,
                now=self.now(),
            )
            product = pool.gpu_product if pool else "NVIDIA-H100-80GB-HBM3"
            self.machines.update(
                hardware.build(
                    self.scenario.model_copy(
                        update={
                            "hardware": self.scenario.hardware.model_copy(update={"faults": []})
                        }
                    ),
                    {name: (gpus, product)},
                    self.now(),
                )
            )
            return copy.deepcopy(self.store.insert(NODE, node, self.now()))

    def has_node(self, name: str) -> bool:
        with self.lock:
            return self.store.find(NODE, None, name) is not None

    # -- hardware hooks (the BMC and the node's devices) --------------------------------

    def machine(self, node: str) -> hardware.Machine:
        """A copy of the node's machine: power, SEL, GPUs, HCAs."""
        with self.lock:
            return copy.deepcopy(self.machines[node])

    def lose_gpu(self, node: str, index: int) -> None:
        """GPU `index` falls off the bus (XID 79): it vanishes from nvidia-smi."""
        with self.lock:
            machine = self.machines[node]
            machine.gpus[index].present = False
            machine.log(self.now(), f"GPU{index} Status", "PCIe link lost", "Critical")

    def heat_gpu(self, node: str, index: int, temperature: float) -> None:
        with self.lock:
            machine = self.machines[node]
            machine.gpus[index].temperature = temperature
            if temperature >= 85:
                machine.log(self.now(), f"GPU{index} Temp", "Upper critical going high", "Critical")

    def set_ib_port(self, node: str, hca: str, up: bool) -> None:
        with self.lock:
            for port in self.machines[node].ib_ports:
                if port.hca == hca:
                    port.up = up
                    return
            raise KeyError(f"{node} has no HCA {hca}")

    def power(self, node: str, action: str) -> None:
        """Press a power button as the BMC would (`On`, `ForceOff`, `PowerCycle`, ...)."""
        import time

        with self.lock:
            hardware.request_power(self, node, action, time.monotonic())

    def label_nodes(self, labels: dict[str, dict[str, str]]) -> None:
        """Set labels on nodes (node -> label -> value) at once: no watch event comes in
        between, as when a controller relabels a batch faster than a watcher reads."""
        with self.lock:
            for name, changed in labels.items():
                node = self.store.get(NODE, None, name)
                node["metadata"].setdefault("labels", {}).update(changed)
                self.store.write(NODE, node)

    def remove_node(self, name: str) -> None:
        """Delete the Node; pod garbage collection then removes the pods bound to it."""
        with self.lock:
            self.store.remove(NODE, None, name)

    def set_node_ready(self, name: str, ready: bool) -> None:
        with self.lock:
            node = self.store.get(NODE, None, name)
            for condition in node["status"]["conditions"]:
                if condition["type"] == "Ready" and (condition["status"] == "True") != ready:
                    condition.update(
                        manifests.node_condition(
                            "Ready",
                            ready,
                            "KubeletReady" if ready else "KubeletNotReady",
                            "kubelet is posting ready status" if ready else "PLEG is not healthy",
                            self.now(),
                        )
                    )
            self.store.write(NODE, node)

    def add_pod(
        self,
        namespace: str,
        name: str,
        node: str,
        *,
        gpus: int = 0,
        labels: dict[str, str] | None = None,
        owner: tuple[str, str] | None = None,
        annotations: dict[str, str] | None = None,
        volumes: list[Obj] | None = None,
    ) -> Obj:
        """A Running, Ready pod on `node`; `owner` is (kind, name) of its controller."""
        with self.lock:
            spec: Obj = {
                "containers": [pods.container("main", "busybox:1.36", gpus=gpus)],
                "terminationGracePeriodSeconds": self.scenario.termination_grace_seconds,
            }
            if volumes:
                spec["volumes"] = volumes
            tmpl = manifests.template(labels or {}, spec, annotations)
            controller = (
                self.store.get(kinds.by_kind(owner[0]), namespace, owner[1]) if owner else None
            )
            pod = pods.from_template(tmpl, name=name, namespace=namespace, owner=controller)
            pods.mark_scheduled(pod, node, self.host_ip(node), self.now())
            pods.mark_running(pod, self.pod_ip(), self.now())
            return copy.deepcopy(self.store.insert(POD, pod, self.now()))

    def remove_pod(self, namespace: str, name: str) -> None:
        """Gone at once, as after a force delete."""
        with self.lock:
            self.forget(self.store.remove(POD, namespace, name))

    # -- test hooks: observe ----------------------------------------------------------

    def get(self, kind: Kind | str, namespace: str | None, name: str) -> Obj | None:
        resolved = kinds.by_kind(kind) if isinstance(kind, str) else kind
        with self.lock:
            found = self.store.find(resolved, namespace, name)
            return copy.deepcopy(found) if found is not None else None

    def objects(self, kind: Kind | str, namespace: str | None = None) -> list[Obj]:
        resolved = kinds.by_kind(kind) if isinstance(kind, str) else kind
        with self.lock:
            return copy.deepcopy(self.store.items(resolved, namespace))

    def pod_log(self, namespace: str, name: str) -> str:
        with self.lock:
            uid = self.store.get(POD, namespace, name)["metadata"]["uid"]
            return self.books.logs.get(uid, "")

    def snapshot(self) -> Snapshot:
        with self.lock:
            nodes = {
                n["metadata"]["name"]: NodeState(
                    unschedulable=bool(n["spec"].get("unschedulable")),
                    ready=any(
                        c["type"] == "Ready" and c["status"] == "True"
                        for c in n["status"]["conditions"]
                    ),
                    taints=copy.deepcopy(n["spec"].get("taints") or []),
                    labels=dict(n["metadata"].get("labels") or {}),
                    annotations=dict(n["metadata"].get("annotations") or {}),
                )
                for n in self.store.items(NODE)
            }
            all_pods = self.store.items(POD)
            return Snapshot(
                nodes=nodes,
                pods=frozenset(
                    (
                        p["metadata"]["namespace"],
                        p["metadata"]["name"],
                        p["spec"].get("nodeName", ""),
                    )
                    for p in all_pods
                ),
                terminating=frozenset(
                    (p["metadata"]["namespace"], p["metadata"]["name"])
                    for p in all_pods
                    if pods.is_deleting(p)
                ),
                resource_version=self.store.resource_version,
            )

    def requests_made(
        self, method: str | None = None, path: str | None = None
    ) -> list[RecordedRequest]:
        """Requests the API received, oldest first; `path` is a glob."""
        with self.lock:
            return [
                r
                for r in self.books.requests
                if (method is None or r.method == method)
                and (path is None or fnmatch.fnmatchcase(r.path, path))
            ]

    # -- used by the API layer --------------------------------------------------------

    def record(self, request: RecordedRequest) -> None:
        with self.lock:
            self.books.requests.append(request)

    def hold_requests(self, path: str, *, method: str | None = None) -> RequestHold:
        """Hold the requests whose path matches the glob `path` until the hold's `release`."""
        hold = RequestHold(path, method)
        with self.lock:
            self.books.request_holds.append(hold)
        return hold

    def hold_for(self, method: str, path: str) -> RequestHold | None:
        """The unreleased hold a request must wait on, if any."""
        with self.lock:
            for hold in self.books.request_holds:
                if not hold.released.is_set() and hold.matches(method, path):
                    return hold
            return None

    def take_request_fault(self, method: str, path: str) -> ApiError | None:
        with self.lock:
            for fault in self.books.request_faults:
                if fault.remaining > 0 and fault.matches(method, path):
                    fault.remaining -= 1
                    headers = {"Retry-After": str(fault.retry_after)} if fault.retry_after else {}
                    return ApiError(
                        fault.status,
                        f"simulated {reason_for(fault.status)} for {method} {path}",
                        headers=headers,
                    )
            return None

    def take_eviction_fault(self, namespace: str, name: str) -> ApiError | None:
        faults = self.books.eviction_faults.get((namespace, name))
        if not faults:
            return None
        code = faults.pop(0)
        return ApiError(code, f"simulated {reason_for(code)} evicting pod {namespace}/{name}")

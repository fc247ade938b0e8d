"""A scenario: the cluster the simulator starts with, as a strict pydantic model of YAML.

`load(path)` reads one (see `scenarios/gpu-cluster.yaml`); `presets` builds them in code.
Unknown keys and wrong types are refused with `ScenarioInvalid`, naming where.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from bot.errors import BotError

Name = str
Effect = Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]


class ScenarioInvalid(BotError):
    """A scenario file is not valid YAML or not the scenario schema; says where."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class Taint(_Model):
    key: str
    value: str | None = None
    effect: Effect


class NodePool(_Model):
    """`count` nodes named prefix + zero-padded number: gpu-node-01, gpu-node-02, ..."""

    prefix: str = "gpu-node-"
    count: int = Field(default=4, ge=0, le=5000)
    first: int = Field(default=1, ge=0)
    digits: int = Field(default=2, ge=1, le=6)
    gpus: int = Field(default=8, ge=0)
    gpu_product: str = "NVIDIA-H100-80GB-HBM3"
    cpu: str = "96"
    memory: str = "1536Gi"
    max_pods: int = Field(default=110, ge=1)
    labels: dict[str, str] = {}
    taints: list[Taint] = []
    unschedulable: bool = False
    ready: bool = True

    def names(self) -> list[str]:
        return [
            f"{self.prefix}{i:0{self.digits}d}" for i in range(self.first, self.first + self.count)
        ]


class Volume(_Model):
    """A pod volume: an emptyDir, or a PersistentVolumeClaim in the pod's namespace."""

    name: str
    mount_path: str = "/data"
    empty_dir: bool = False
    claim: str | None = None

    @model_validator(mode="after")
    def _one_source(self) -> Volume:
        if self.empty_dir == (self.claim is not None):
            raise ValueError("a volume is either empty_dir: true or claim: NAME")
        return self


class Budget(_Model):
    """A PodDisruptionBudget over a workload's pods; exactly one of the two."""

    name: str | None = None
    min_available: int | str | None = None
    max_unavailable: int | str | None = None

    @model_validator(mode="after")
    def _one_limit(self) -> Budget:
        if (self.min_available is None) == (self.max_unavailable is None):
            raise ValueError("set exactly one of min_available and max_unavailable")
        return self


class Workload(_Model):
    """Controller-owned pods: a StatefulSet (stable names) or a ReplicaSet."""

    kind: Literal["StatefulSet", "ReplicaSet"]
    namespace: Name
    name: Name
    replicas: int = Field(ge=0)
    gpus: int = Field(default=0, ge=0)
    image: str = "nvcr.io/nvidia/pytorch:24.07-py3"
    command: list[str] = []
    labels: dict[str, str] = {}
    volumes: list[Volume] = []
    budget: Budget | None = None
    nodes: list[Name] = []
    """Explicit placement: replica i goes to nodes[i % len(nodes)]; empty = scheduler."""


class DaemonSet(_Model):
    namespace: Name
    name: Name
    image: str
    node_selector: dict[str, str] = {"nvidia.com/gpu.present": "true"}


class StaticPod(_Model):
    """A kubelet static pod on every node, seen through the API as a mirror pod."""

    namespace: Name = "kube-system"
    name: Name
    image: str


class BarePod(_Model):
    """A pod with no controller: kubectl drain refuses it without --force."""

    namespace: Name
    name: Name
    node: Name
    image: str = "busybox:1.36"
    gpus: int = Field(default=0, ge=0)
    volumes: list[Volume] = []


class StorageClass(_Model):
    name: Name
    provisioner: str = "nfs.csi.k8s.io"
    reclaim_policy: Literal["Retain", "Delete"] = "Retain"
    default: bool = False


class NfsClaim(_Model):
    """A PersistentVolumeClaim bound to an NFS PersistentVolume of a storage class."""

    namespace: Name
    name: Name
    storage_class: Name
    size: str = "10Ti"
    server: str = "nfs.storage.svc.cluster.local"
    path: str = "/exports/data"
    access_modes: list[str] = ["ReadWriteMany"]


class Queue(_Model):
    name: Name
    weight: int = Field(default=1, ge=1)
    state: Literal["Open", "Closed"] = "Open"
    reclaimable: bool = True
    capability: dict[str, str] = {}


class Command(_Model):
    """What a Job pod running `command` prints and exits with, on `node` or by default.

    A pod's container command+args matches an entry exactly, or else by first element;
    entries for the pod's node win over default ones (node: null).
    """

    command: list[str] = Field(min_length=1)
    node: Name | None = None
    exit_code: int = Field(default=0, ge=0, le=255)
    output: str = ""
    seconds: float = Field(default=1.0, ge=0)


class NodeFault(_Model):
    """Trouble on one node's hardware at start; tests and the demo add more through hooks."""

    node: Name
    missing_gpus: list[int] = []
    """GPUs that fell off the bus (XID 79): absent from nvidia-smi, failing dcgmi."""
    hot_gpus: dict[int, float] = {}
    """GPU index -> temperature in degrees C."""
    ecc_gpus: dict[int, int] = {}
    """GPU index -> uncorrected (double-bit) ECC errors."""
    ib_ports_down: list[str] = []
    """HCA names whose port 1 is Down, e.g. mlx5_1."""
    powered_off: bool = False


class Hardware(_Model):
    """The machines behind the nodes: BMCs, GPUs, InfiniBand."""

    ib_hcas: int = Field(default=4, ge=0, le=16)
    ib_rate: int = Field(default=200, ge=10)
    """Gb/s of an active port; the seed checks for `Rate: 200`."""
    power_off_seconds: float = Field(default=3.0, ge=0)
    """From a power-off request until the BMC reports Off."""
    power_on_seconds: float = Field(default=5.0, ge=0)
    """From a power-on request until the BMC reports On."""
    boot_seconds: float = Field(default=10.0, ge=0)
    """From power on until the Kubernetes node is Ready again."""
    bmc_firmware: str = "1.10.2"
    bmc_manufacturer: str = "Supermicro"
    bmc_model: str = "SYS-821GE-TNHR"
    faults: list[NodeFault] = []


class Scenario(_Model):
    name: str
    description: str = ""
    termination_grace_seconds: int = Field(default=30, ge=0)
    """Every seeded pod's terminationGracePeriodSeconds."""
    startup_seconds: float = Field(default=2.0, ge=0)
    """How long a newly bound pod takes to become Running and Ready."""
    unschedulable_taint: bool = True
    """Mirror spec.unschedulable as the node.kubernetes.io/unschedulable taint."""
    nodes: list[NodePool] = [NodePool()]
    namespaces: list[Name] = []
    storage_classes: list[StorageClass] = []
    claims: list[NfsClaim] = []
    daemon_sets: list[DaemonSet] = []
    static_pods: list[StaticPod] = []
    workloads: list[Workload] = []
    bare_pods: list[BarePod] = []
    queues: list[Queue] = []
    commands: list[Command] = []
    hardware: Hardware = Hardware()

    def node_names(self) -> list[str]:
        return [name for pool in self.nodes for name in pool.names()]

    @model_validator(mode="after")
    def _references(self) -> Scenario:
        nodes = self.node_names()
        if len(set(nodes)) != len(nodes):
            raise ValueError("node names repeat across node pools")
        known = set(nodes)
        claims = {(c.namespace, c.name) for c in self.claims}
        classes = {c.name for c in self.storage_classes}
        for claim in self.claims:
            if claim.storage_class not in classes:
                raise ValueError(f"claim {claim.name}: no storage class {claim.storage_class}")
        users: list[Workload | BarePod] = [*self.workloads, *self.bare_pods]
        for item in users:
            for volume in item.volumes:
                if volume.claim and (item.namespace, volume.claim) not in claims:
                    raise ValueError(f"{item.name}: no claim {item.namespace}/{volume.claim}")
        placed = [n for w in self.workloads for n in w.nodes]
        placed += [p.node for p in self.bare_pods] + [c.node for c in self.commands if c.node]
        placed += [f.node for f in self.hardware.faults]
        for name in placed:
            if name not in known:
                raise ValueError(f"no node named {name}")
        return self

    def all_namespaces(self) -> list[str]:
        names = ["default", "kube-system", "kube-public", "kube-node-lease", *self.namespaces]
        names += [w.namespace for w in self.workloads] + [d.namespace for d in self.daemon_sets]
        names += [s.namespace for s in self.static_pods] + [b.namespace for b in self.bare_pods]
        names += [c.namespace for c in self.claims]
        return list(dict.fromkeys(names))


def load(path: str | Path) -> Scenario:
    """Read and validate a scenario file."""
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ScenarioInvalid(f"cannot read scenario {path}: {exc.strerror}") from exc
    except yaml.YAMLError as exc:
        raise ScenarioInvalid(f"scenario {path} is not valid YAML: {exc}") from exc
    return parse(data, source=str(path))


def parse(data: object, *, source: str = "scenario") -> Scenario:
    try:
        return Scenario.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or '(top)'}: {err['msg']}"
            for err in exc.errors()
        )
        raise ScenarioInvalid(f"{source} is not a valid scenario: {problems}") from exc

"""The resource types the simulated API serves: group, version, plural, kind, scope.

One `Kind` per REST resource. Discovery documents, URL routing, list kinds and error
messages (`pods "x" not found`, `jobs.batch "x" not found`) are all derived from here.
"""

from __future__ import annotations

from dataclasses import dataclass

ALL_VERBS = ("create", "delete", "get", "list", "patch", "update")
READ_VERBS = ("get", "list")


@dataclass(frozen=True)
class Kind:
    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool
    short_names: tuple[str, ...] = ()
    has_status: bool = True
    verbs: tuple[str, ...] = ALL_VERBS

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def group_version(self) -> tuple[str, str]:
        return (self.group, self.version)

    @property
    def resource(self) -> str:
        """The name used in API error messages: `pods`, `jobs.batch`."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @property
    def singular(self) -> str:
        return self.kind.lower()

    @property
    def list_kind(self) -> str:
        return f"{self.kind}List"


NODE = Kind("", "v1", "nodes", "Node", False, ("no",))
POD = Kind("", "v1", "pods", "Pod", True, ("po",))
NAMESPACE = Kind("", "v1", "namespaces", "Namespace", False, ("ns",))
EVENT = Kind("", "v1", "events", "Event", True, ("ev",), has_status=False)
PVC = Kind("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim", True, ("pvc",))
PV = Kind("", "v1", "persistentvolumes", "PersistentVolume", False, ("pv",))
DAEMON_SET = Kind("apps", "v1", "daemonsets", "DaemonSet", True, ("ds",))
REPLICA_SET = Kind("apps", "v1", "replicasets", "ReplicaSet", True, ("rs",))
STATEFUL_SET = Kind("apps", "v1", "statefulsets", "StatefulSet", True, ("sts",))
JOB = Kind("batch", "v1", "jobs", "Job", True)
PDB = Kind("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", True, ("pdb",))
LEASE = Kind("coordination.k8s.io", "v1", "leases", "Lease", True, has_status=False)
STORAGE_CLASS = Kind(
    "storage.k8s.io", "v1", "storageclasses", "StorageClass", False, ("sc",), has_status=False
)
QUEUE = Kind("scheduling.volcano.sh", "v1beta1", "queues", "Queue", False, ("q", "queue-v1beta1"))

KINDS: tuple[Kind, ...] = (
    NODE,
    POD,
    NAMESPACE,
    EVENT,
    PVC,
    PV,
    DAEMON_SET,
    REPLICA_SET,
    STATEFUL_SET,
    JOB,
    PDB,
    LEASE,
    STORAGE_CLASS,
    QUEUE,
)

_BY_PATH = {(k.group, k.version, k.plural): k for k in KINDS}
_BY_KIND = {k.kind: k for k in KINDS}


def by_path(group: str, version: str, plural: str) -> Kind | None:
    return _BY_PATH.get((group, version, plural))


def by_kind(kind: str) -> Kind:
    return _BY_KIND[kind]


def group_versions() -> list[tuple[str, str]]:
    """Every (group, version) served under /apis, in a stable order."""
    seen: list[tuple[str, str]] = []
    for kind in KINDS:
        if kind.group and kind.group_version not in seen:
            seen.append(kind.group_version)
    return seen


def in_group_version(group: str, version: str) -> list[Kind]:
    return [k for k in KINDS if k.group_version == (group, version)]

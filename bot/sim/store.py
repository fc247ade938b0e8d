"""The object store: every object by kind, namespace and name, one resourceVersion counter.

Not thread-safe by itself: `Cluster` holds the one lock around every use. Objects are
plain JSON-shaped dicts; `insert` and `write` stamp uid, creationTimestamp and the next
resourceVersion, and readers get deep copies from the API layer, never these dicts.
Every change is also kept, as a watch event, in a bounded history that watches replay.
"""

from __future__ import annotations

import copy
import random
import uuid
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from bot.sim import status
from bot.sim.kinds import NAMESPACE, Kind
from bot.sim.pods import stamp

Obj = dict[str, Any]

_NAME_CHARS = "bcdfghjklmnpqrstvwxz2456789"
HISTORY = 4096


@dataclass(frozen=True)
class Change:
    """One watch event: ADDED, MODIFIED or DELETED, with the object as it then was."""

    version: int
    type: str
    kind: Kind
    obj: Obj


class Store:
    def __init__(self, *, seed: int = 0, history: int = HISTORY) -> None:
        self._objects: dict[Kind, dict[tuple[str, str], Obj]] = {}
        self._version = 0
        self.random = random.Random(seed)
        self._history: deque[Change] = deque(maxlen=history)

    @property
    def resource_version(self) -> str:
        return str(self._version)

    def new_uid(self) -> str:
        return str(uuid.UUID(int=self.random.getrandbits(128), version=4))

    def suffix(self, length: int = 5) -> str:
        """The random tail of generated names (k8s.io/apiserver's SimpleNameGenerator)."""
        return "".join(self.random.choice(_NAME_CHARS) for _ in range(length))

    def find(self, kind: Kind, namespace: str | None, name: str) -> Obj | None:
        return self._objects.get(kind, {}).get((namespace or "", name))

    def get(self, kind: Kind, namespace: str | None, name: str) -> Obj:
        found = self.find(kind, namespace, name)
        if found is None:
            raise status.not_found(kind, name)
        return found

    def items(self, kind: Kind, namespace: str | None = None) -> list[Obj]:
        """Objects of `kind`, in `namespace` or all, sorted by namespace and name."""
        table = self._objects.get(kind, {})
        return [table[key] for key in sorted(table) if namespace is None or key[0] == namespace]

    def __iter__(self) -> Iterator[tuple[Kind, Obj]]:
        for kind, table in self._objects.items():
            for obj in table.values():
                yield kind, obj

    def generate_name(self, kind: Kind, namespace: str | None, prefix: str) -> str:
        for _ in range(100):
            name = f"{prefix}{self.suffix()}"
            if self.find(kind, namespace, name) is None:
                return name
        raise status.ApiError(500, f"could not generate a unique name from {prefix!r}")

    def insert(self, kind: Kind, obj: Obj, now: datetime) -> Obj:
        """Add a new object: name from generateName if needed, uid, timestamps, version."""
        meta = obj.setdefault("metadata", {})
        namespace = meta.get("namespace") if kind.namespaced else None
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = self.generate_name(kind, namespace, meta["generateName"])
        if not meta.get("name"):
            raise status.invalid(
                kind, "", "metadata.name", "Required value: name or generateName is required"
            )
        if kind.namespaced and not namespace:
            raise status.bad_request("the namespace of the object is required")
        if kind.namespaced and self.find(NAMESPACE, None, namespace or "") is None:
            raise status.not_found(NAMESPACE, namespace or "")
        if self.find(kind, namespace, meta["name"]) is not None:
            raise status.already_exists(kind, meta["name"])
        obj["apiVersion"], obj["kind"] = kind.api_version, kind.kind
        meta.setdefault("uid", self.new_uid())
        meta["creationTimestamp"] = stamp(now)
        if "spec" in obj:
            meta["generation"] = 1
        return self.write(kind, obj)

    def write(self, kind: Kind, obj: Obj) -> Obj:
        """Store `obj` (new or changed) under the next resourceVersion."""
        self._version += 1
        meta = obj["metadata"]
        meta["resourceVersion"] = str(self._version)
        key = (meta.get("namespace", "") if kind.namespaced else "", meta["name"])
        table = self._objects.setdefault(kind, {})
        event = "MODIFIED" if key in table else "ADDED"
        table[key] = obj
        self._history.append(Change(self._version, event, kind, copy.deepcopy(obj)))
        return obj

    def remove(self, kind: Kind, namespace: str | None, name: str) -> Obj:
        obj = self.get(kind, namespace, name)
        del self._objects[kind][(namespace or "" if kind.namespaced else "", name)]
        self._version += 1
        gone = copy.deepcopy(obj)
        gone["metadata"]["resourceVersion"] = str(self._version)
        self._history.append(Change(self._version, "DELETED", kind, gone))
        return obj

    def changes_since(self, version: int) -> list[Change] | None:
        """Changes after `version`, oldest first; None if the history no longer reaches back."""
        if self._history and version < self._history[0].version - 1:
            return None
        if not self._history and version < self._version:
            return None
        return [change for change in self._history if change.version > version]

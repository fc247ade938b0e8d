"""PodDisruptionBudget accounting, as the disruption controller and the eviction REST do it.

A budget's pods are the pods in its namespace matching its selector. Healthy pods are
Ready and not deleting. The status (`currentHealthy`, `desiredHealthy`,
`disruptionsAllowed`) is rewritten on every kubelet tick as pods go, come and become Ready
(controllers.update_statuses), and at once by an eviction (`refresh`), so a watch on
budgets sees each change. `desiredHealthy` comes from minAvailable (an integer counts
against the pods that exist; a percentage against the controllers' scale) or from
maxUnavailable (against the controllers' scale); `disruptionsAllowed` is what is left.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from bot.sim import pods
from bot.sim.kinds import PDB, POD, REPLICA_SET, STATEFUL_SET
from bot.sim.selectors import labels_of, match_selector
from bot.sim.status import ApiError
from bot.sim.store import Store

Obj = dict[str, Any]

EVICTION_REFUSED = "Cannot evict pod as it would violate the pod's disruption budget."


@dataclass(frozen=True)
class Budget:
    name: str
    expected: int
    desired: int
    current: int

    @property
    def allowed(self) -> int:
        spare = self.current - self.desired
        return spare if self.expected > 0 and spare > 0 else 0

    def refusal(self) -> ApiError:
        """The 429 the eviction subresource answers when this budget has no room."""
        cause = {
            "reason": "DisruptionBudget",
            "message": f"The disruption budget {self.name} needs {self.desired} healthy pods "
            f"and has {self.current} currently",
        }
        return ApiError(429, EVICTION_REFUSED, details={"causes": [cause]})


def budgets_for(store: Store, pod: Obj) -> list[Obj]:
    namespace = pod["metadata"].get("namespace")
    labels = labels_of(pod)
    return [
        budget
        for budget in store.items(PDB, namespace)
        if budget.get("spec", {}).get("selector") is not None
        and match_selector(budget["spec"]["selector"], labels)
    ]


def pods_of(store: Store, budget: Obj) -> list[Obj]:
    selector = budget.get("spec", {}).get("selector")
    if selector is None:
        return []
    return [
        pod
        for pod in store.items(POD, budget["metadata"]["namespace"])
        if match_selector(selector, labels_of(pod))
    ]


def _scale(store: Store, members: list[Obj]) -> int:
    """Sum the replicas of the controllers behind `members`; others count one each."""
    total, seen = 0, set()
    controllers = {"ReplicaSet": REPLICA_SET, "StatefulSet": STATEFUL_SET}
    for pod in members:
        ref = pods.controller_of(pod)
        kind = controllers.get(ref.get("kind", "")) if ref else None
        if ref is None or kind is None:
            total += 1
            continue
        if ref["uid"] in seen:
            continue
        seen.add(ref["uid"])
        owner = store.find(kind, pod["metadata"]["namespace"], ref["name"])
        total += int(owner["spec"].get("replicas", 1)) if owner else 1
    return total


def _amount(value: int | str, total: int) -> int:
    if isinstance(value, int):
        return value
    text = str(value).strip()
    if text.endswith("%"):
        return math.ceil(int(text[:-1]) * total / 100)
    return int(text)


def assess(store: Store, budget: Obj) -> Budget:
    spec = budget.get("spec", {})
    members = pods_of(store, budget)
    healthy = sum(1 for p in members if pods.is_ready(p) and not pods.is_deleting(p))
    name = budget["metadata"]["name"]
    min_available = spec.get("minAvailable")
    if isinstance(min_available, int):
        return Budget(name, len(members), min_available, healthy)
    expected = _scale(store, members)
    if min_available is not None:
        return Budget(name, expected, _amount(min_available, expected), healthy)
    unavailable = _amount(spec.get("maxUnavailable", 0), expected)
    return Budget(name, expected, max(0, expected - unavailable), healthy)


def status_of(budget: Obj, assessed: Budget, now: datetime) -> Obj:
    """The PDB status the disruption controller would write."""
    generation = budget["metadata"].get("generation", 1)
    old = budget.get("status") or {}
    allowed = assessed.allowed > 0
    condition = {
        "type": "DisruptionAllowed",
        "status": "True" if allowed else "False",
        "reason": "SufficientPods" if allowed else "InsufficientPods",
        "message": "",
        "observedGeneration": generation,
        "lastTransitionTime": pods.stamp(now),
    }
    for previous in old.get("conditions") or []:
        if (
            previous.get("type") == "DisruptionAllowed"
            and previous["status"] == condition["status"]
        ):
            condition["lastTransitionTime"] = previous["lastTransitionTime"]
    return {
        "observedGeneration": generation,
        "currentHealthy": assessed.current,
        "desiredHealthy": assessed.desired,
        "disruptionsAllowed": assessed.allowed,
        "expectedPods": assessed.expected,
        "conditions": [condition],
    }


def refresh(store: Store, pod: Obj, now: datetime) -> None:
    """Bring the status of the budgets over `pod` up to date (after it was evicted)."""
    for budget in budgets_for(store, pod):
        status = status_of(budget, assess(store, budget), now)
        if budget.get("status") != status:
            budget["status"] = status
            store.write(PDB, budget)


def check_eviction(store: Store, pod: Obj) -> None:
    """Raise the API's error if evicting `pod` now would break its budget.

    Terminal, pending and already-deleting pods skip the check (the eviction REST's
    canIgnorePDB), and so does a not-ready pod while its budget is satisfied.
    """
    phase = pod.get("status", {}).get("phase")
    if phase in ("Succeeded", "Failed", "Pending") or pods.is_deleting(pod):
        return
    budgets = budgets_for(store, pod)
    if not budgets:
        return
    if len(budgets) > 1:
        raise ApiError(
            500,
            "This pod has more than one PodDisruptionBudget, which the eviction subresource "
            "does not support.",
        )
    assessed = assess(store, budgets[0])
    if not pods.is_ready(pod) and assessed.current >= assessed.desired > 0:
        return
    if assessed.allowed <= 0:
        raise assessed.refusal()

"""Label and field selectors: the query-string forms and the `LabelSelector` object.

Query strings follow k8s.io/apimachinery/pkg/labels: `a=b`, `a==b`, `a!=b`, `a`, `!a`,
`a in (x,y)`, `a notin (x,y)`, joined by commas. Field selectors support `=`, `==`, `!=`
on the fields each kind registers; anything else is the API's 400.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from bot.sim.status import ApiError, bad_request

Obj = dict[str, Any]

_SET_TERM = re.compile(r"^\s*(\S+)\s+(in|notin)\s+\((.*)\)\s*$")


@dataclass(frozen=True)
class Requirement:
    key: str
    op: str  # "=", "!=", "in", "notin", "exists", "!"
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        value = labels.get(self.key)
        if self.op == "exists":
            return present
        if self.op == "!":
            return not present
        if self.op in ("=", "in"):
            return present and value in self.values
        return not present or value not in self.values  # "!=" and "notin"


def _split_terms(text: str) -> list[str]:
    terms, depth, current = [], 0, ""
    for char in text:
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        if char == "," and depth == 0:
            terms.append(current)
            current = ""
        else:
            current += char
    terms.append(current)
    return [t.strip() for t in terms if t.strip()]


def parse_labels(text: str | None) -> list[Requirement]:
    """Parse a `labelSelector` query value; raise the API's 400 when it is malformed."""
    if not text:
        return []
    requirements = []
    for term in _split_terms(text):
        found = _SET_TERM.match(term)
        if found:
            values = tuple(v.strip() for v in found.group(3).split(",") if v.strip())
            requirements.append(Requirement(found.group(1), found.group(2), values))
        elif "!=" in term:
            key, value = term.split("!=", 1)
            requirements.append(Requirement(key.strip(), "!=", (value.strip(),)))
        elif "=" in term:
            key, value = term.replace("==", "=", 1).split("=", 1)
            requirements.append(Requirement(key.strip(), "=", (value.strip(),)))
        elif term.startswith("!"):
            requirements.append(Requirement(term[1:].strip(), "!"))
        elif re.fullmatch(r"[A-Za-z0-9./_-]+", term):
            requirements.append(Requirement(term, "exists"))
        else:
            raise bad_request(f"unable to parse requirement: invalid label selector {term!r}")
    return requirements


def labels_of(obj: Obj) -> dict[str, str]:
    labels: dict[str, str] = obj.get("metadata", {}).get("labels") or {}
    return labels


def match_labels(requirements: list[Requirement], obj: Obj) -> bool:
    labels = labels_of(obj)
    return all(r.matches(labels) for r in requirements)


def match_selector(selector: Obj | None, labels: Mapping[str, str]) -> bool:
    """Match a `LabelSelector` object (matchLabels and matchExpressions).

    An empty selector matches everything, as for PodDisruptionBudgets in policy/v1.
    """
    if not selector:
        return True
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    ops = {"In": "in", "NotIn": "notin", "Exists": "exists", "DoesNotExist": "!"}
    for expr in selector.get("matchExpressions") or []:
        op = ops.get(expr.get("operator", ""))
        if op is None:
            return False
        requirement = Requirement(expr["key"], op, tuple(expr.get("values") or ()))
        if not requirement.matches(labels):
            return False
    return True


def _path(*keys: str) -> Callable[[Obj], str]:
    def get(obj: Obj) -> str:
        value: Any = obj
        for key in keys:
            value = value.get(key) if isinstance(value, dict) else None
        if isinstance(value, bool):
            return "true" if value else "false"
        return "" if value is None else str(value)

    return get


_COMMON = {
    "metadata.name": _path("metadata", "name"),
    "metadata.namespace": _path("metadata", "namespace"),
}
FIELDS: dict[str, dict[str, Callable[[Obj], str]]] = {
    "Pod": {
        "spec.nodeName": _path("spec", "nodeName"),
        "spec.restartPolicy": _path("spec", "restartPolicy"),
        "spec.schedulerName": _path("spec", "schedulerName"),
        "spec.serviceAccountName": _path("spec", "serviceAccountName"),
        "status.phase": _path("status", "phase"),
        "status.podIP": _path("status", "podIP"),
        "status.nominatedNodeName": _path("status", "nominatedNodeName"),
    },
    "Node": {"spec.unschedulable": _path("spec", "unschedulable")},
    "Event": {
        "involvedObject.kind": _path("involvedObject", "kind"),
        "involvedObject.name": _path("involvedObject", "name"),
        "involvedObject.namespace": _path("involvedObject", "namespace"),
        "involvedObject.uid": _path("involvedObject", "uid"),
        "reason": _path("reason"),
        "type": _path("type"),
        "source": _path("source", "component"),
    },
    "Job": {"status.successful": _path("status", "succeeded")},
    "Namespace": {"status.phase": _path("status", "phase")},
}


FieldTest = Callable[[Obj], bool]


def parse_fields(text: str | None, kind: str) -> list[FieldTest]:
    """Parse a `fieldSelector` for objects of `kind`; unknown fields are the API's 400."""
    if not text:
        return []
    known = {**_COMMON, **FIELDS.get(kind, {})}
    tests: list[FieldTest] = []
    for term in _split_terms(text):
        negate = "!=" in term
        key, value = term.split("!=" if negate else "=", 1) if "=" in term else (term, None)
        key = key.strip()
        if value is None:
            raise bad_request(f"invalid selector: '{text}'; can't understand '{term}'")
        value = value.lstrip("=").strip()
        getter = known.get(key)
        if getter is None:
            raise ApiError(400, f"field label not supported: {key}")
        tests.append(_field_test(getter, value, negate))
    return tests


def _field_test(getter: Callable[[Obj], str], value: str, negate: bool) -> FieldTest:
    return lambda obj: (getter(obj) == value) != negate


def match_fields(tests: list[FieldTest], obj: Obj) -> bool:
    return all(test(obj) for test in tests)

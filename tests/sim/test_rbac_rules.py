"""The simulator's RBAC decides as the real authorizer does: wildcards, `*/subresource`,
resourceNames, RoleBindings to a ClusterRole limited to their namespace, and a binding to a
role nobody defined is an error at load time."""

from __future__ import annotations

from typing import Any

import pytest

from bot.sim import Rbac
from bot.sim.rbac import Attributes, verb


def _rbac(*documents: dict[str, Any]) -> Rbac:
    return Rbac.from_manifests(documents, namespace="ops", name="bot", token="t")


def _binding(kind: str, role_kind: str, role: str, namespace: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": f"bind-{role}"}
    if namespace:
        meta["namespace"] = namespace
    return {
        "kind": kind,
        "metadata": meta,
        "roleRef": {"kind": role_kind, "name": role},
        "subjects": [{"kind": "ServiceAccount", "name": "bot", "namespace": "ops"}],
    }


def _ask(
    verb: str, resource: str, *, group: str = "", sub: str | None = None,
    namespace: str | None = None, name: str | None = None,
) -> Attributes:  # fmt: skip
    return Attributes(verb, group, resource, sub, namespace, name)


WIDE = {
    "kind": "ClusterRole",
    "metadata": {"name": "wide"},
    "rules": [
        {"apiGroups": ["*"], "resources": ["*/status"], "verbs": ["patch"]},
        {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["*"], "resourceNames": ["a"]},
    ],
}


def test_wildcards_subresources_and_resource_names_match_as_in_kubernetes() -> None:
    rbac = _rbac(WIDE, _binding("ClusterRoleBinding", "ClusterRole", "wide"))

    assert rbac.allows(_ask("patch", "nodes", sub="status", name="n"))
    assert rbac.allows(_ask("patch", "queues", group="scheduling.volcano.sh", sub="status"))
    assert not rbac.allows(_ask("patch", "nodes", name="n"))  # the main resource is not
    assert rbac.allows(_ask("delete", "configmaps", namespace="x", name="a"))
    assert not rbac.allows(_ask("delete", "configmaps", namespace="x", name="b"))
    assert not rbac.allows(_ask("list", "configmaps", namespace="x"))  # no name to match


def test_a_role_binding_to_a_cluster_role_grants_only_in_its_namespace() -> None:
    rbac = _rbac(WIDE, _binding("RoleBinding", "ClusterRole", "wide", "jobs"))

    assert rbac.allows(_ask("get", "configmaps", namespace="jobs", name="a"))
    assert not rbac.allows(_ask("get", "configmaps", namespace="other", name="a"))
    assert not rbac.allows(_ask("get", "configmaps", name="a"))  # cluster scope


def test_bindings_for_other_accounts_grant_nothing() -> None:
    other = _binding("ClusterRoleBinding", "ClusterRole", "wide")
    other["subjects"] = [{"kind": "ServiceAccount", "name": "bot", "namespace": "elsewhere"}]

    assert _rbac(WIDE, other).grants == ()


def test_a_binding_to_an_undefined_role_is_an_error() -> None:
    with pytest.raises(ValueError, match="refers to Role missing, which the manifests"):
        _rbac(_binding("RoleBinding", "Role", "missing", "ops"))


@pytest.mark.parametrize(
    ("method", "named", "watch", "expected"),
    [
        ("GET", True, False, "get"),
        ("GET", False, False, "list"),
        ("GET", False, True, "watch"),
        ("POST", False, False, "create"),
        ("PUT", True, False, "update"),
        ("PATCH", True, False, "patch"),
        ("DELETE", True, False, "delete"),
        ("DELETE", False, False, "deletecollection"),
    ],
)
def test_http_methods_map_to_the_apiservers_verbs(
    method: str, named: bool, watch: bool, expected: str
) -> None:
    assert verb(method, named=named, watch=watch) == expected

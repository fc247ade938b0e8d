"""RBAC for one service account: what the bot's ClusterRole and Role let its token do.

`Rbac.from_manifests` reads RBAC objects as shipped (the Helm chart's rendering,
deploy/rbac.yaml): the ClusterRoles and Roles bound to the service account by
ClusterRoleBindings (everywhere) and RoleBindings (in their namespace). A request is
allowed when one rule matches its verb, API group, resource (`pods/eviction` for a
subresource) and name, as the real RBAC authorizer decides
(k8s.io/kubernetes/plugin/pkg/auth/authorizer/rbac); otherwise it is answered 403 with the
apiserver's Status and message. The admin's token (`server.DUMMY_TOKEN`) may do
anything; any other token, or none, is answered 401 (`api.Authorizing`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from bot.sim.status import ApiError

ANY = "*"


@dataclass(frozen=True)
class Rule:
    """One PolicyRule of a (Cluster)Role."""

    api_groups: tuple[str, ...]
    resources: tuple[str, ...]
    verbs: tuple[str, ...]
    resource_names: tuple[str, ...] = ()

    @classmethod
    def parse(cls, raw: dict[str, Any], where: str) -> Rule:
        if raw.get("nonResourceURLs"):
            raise ValueError(f"{where}: nonResourceURLs are not supported by the simulator")
        return cls(
            api_groups=tuple(raw.get("apiGroups") or ()),
            resources=tuple(raw.get("resources") or ()),
            verbs=tuple(raw.get("verbs") or ()),
            resource_names=tuple(raw.get("resourceNames") or ()),
        )

    def allows(self, request: Attributes) -> bool:
        return (
            (ANY in self.verbs or request.verb in self.verbs)
            and (ANY in self.api_groups or request.group in self.api_groups)
            and self._resource_matches(request)
            and (not self.resource_names or request.name in self.resource_names)
        )

    def _resource_matches(self, request: Attributes) -> bool:
        for resource in self.resources:
            if resource in (ANY, request.resource_path):
                return True
            if request.subresource and resource == f"*/{request.subresource}":
                return True
        return False


@dataclass(frozen=True)
class Attributes:
    """What a request asks to do, as the apiserver's authorizer sees it."""

    verb: str
    group: str
    resource: str
    subresource: str | None
    namespace: str | None
    name: str | None

    @property
    def resource_path(self) -> str:
        return f"{self.resource}/{self.subresource}" if self.subresource else self.resource


@dataclass(frozen=True)
class Grant:
    """Rules bound to the account, everywhere (`namespace` None) or in one namespace."""

    rules: tuple[Rule, ...]
    namespace: str | None

    def allows(self, request: Attributes) -> bool:
        if self.namespace is not None and request.namespace != self.namespace:
            return False
        return any(rule.allows(request) for rule in self.rules)


@dataclass(frozen=True)
class Rbac:
    """The grants of one service account and the bearer token that authenticates it."""

    namespace: str
    name: str
    token: str
    grants: tuple[Grant, ...]

    @property
    def user(self) -> str:
        return f"system:serviceaccount:{self.namespace}:{self.name}"

    @classmethod
    def from_manifests(
        cls, documents: Iterable[Any], *, namespace: str, name: str, token: str
    ) -> Rbac:
        """The grants `documents` (parsed YAML; other kinds are ignored) give the service
        account `namespace/name`. A binding to a role the documents do not define is an
        error: a shipped chart must define what it binds."""
        docs = [d for d in documents if isinstance(d, dict)]
        cluster_roles: dict[str, tuple[Rule, ...]] = {}
        roles: dict[tuple[str, str], tuple[Rule, ...]] = {}
        for doc in docs:
            kind, meta = doc.get("kind"), doc.get("metadata") or {}
            where = f"{kind} {meta.get('name')}"
            rules = tuple(Rule.parse(r, where) for r in doc.get("rules") or ())
            if kind == "ClusterRole":
                cluster_roles[meta["name"]] = rules
            elif kind == "Role":
                roles[(meta.get("namespace") or "default", meta["name"])] = rules
        account = cls(namespace, name, token, ())
        grants: list[Grant] = []
        for doc in docs:
            kind, meta = doc.get("kind"), doc.get("metadata") or {}
            if kind not in ("ClusterRoleBinding", "RoleBinding"):
                continue
            scope = None if kind == "ClusterRoleBinding" else meta.get("namespace") or "default"
            if not any(account._is(s, scope) for s in doc.get("subjects") or ()):
                continue
            ref = doc.get("roleRef") or {}
            if ref.get("kind") == "ClusterRole":
                found = cluster_roles.get(ref.get("name", ""))
            else:
                found = roles.get((scope or "", ref.get("name", "")))
            if found is None:
                raise ValueError(
                    f"{kind} {meta.get('name')} refers to {ref.get('kind')} {ref.get('name')}, "
                    "which the manifests do not define"
                )
            grants.append(Grant(found, scope))
        return cls(namespace, name, token, tuple(grants))

    def _is(self, subject: dict[str, Any], scope: str | None) -> bool:
        kind, who = subject.get("kind"), subject.get("name")
        if kind == "ServiceAccount":
            return who == self.name and (subject.get("namespace") or scope) == self.namespace
        if kind == "User":
            return who == self.user
        if kind == "Group":
            return who in (
                "system:authenticated",
                "system:serviceaccounts",
                f"system:serviceaccounts:{self.namespace}",
            )
        return False

    def allows(self, request: Attributes) -> bool:
        return any(grant.allows(request) for grant in self.grants)

    def forbidden(self, request: Attributes, qualified: str) -> ApiError:
        """The apiserver's 403 (responsewriters.forbiddenMessage, errors.NewForbidden);
        `qualified` is the resource as errors name it: `pods`, `jobs.batch`."""
        scope = (
            f"in the namespace {_quote(request.namespace)}"
            if request.namespace
            else "at the cluster scope"
        )
        why = (
            f"User {_quote(self.user)} cannot {request.verb} resource "
            f"{_quote(request.resource_path)} in API group {_quote(request.group)} {scope}"
        )
        subject = f"{qualified} {_quote(request.name)}" if request.name else qualified
        details: dict[str, Any] = {}
        if request.name:
            details["name"] = request.name
        if request.group:
            details["group"] = request.group
        details["kind"] = request.resource
        return ApiError(403, f"{subject} is forbidden: {why}", details=details)


def _quote(text: str | None) -> str:
    return '"' + (text or "").replace("\\", "\\\\").replace('"', '\\"') + '"'


def unauthorized() -> ApiError:
    return ApiError(401, "Unauthorized", reason="Unauthorized")


def verb(method: str, *, named: bool, watch: bool) -> str:
    """The RBAC verb of an HTTP request (k8s.io/apiserver/pkg/endpoints/request)."""
    if method == "GET":
        if watch:
            return "watch"
        return "get" if named else "list"
    if method == "DELETE" and not named:
        return "deletecollection"
    return {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}.get(
        method, method.lower()
    )

"""Discovery documents: /version, /api, /apis and each group version's resource list.

kubectl asks for aggregated discovery and Tables first; served as plain
application/json these legacy documents make it fall back, as it does for old servers.
`pods/eviction` is listed with group policy, version v1 and kind Eviction, which is how
`kubectl drain` decides to evict rather than delete.
"""

from __future__ import annotations

from typing import Any

from bot.sim.kinds import KINDS, READ_VERBS, Kind, group_versions, in_group_version

Obj = dict[str, Any]

SERVER_VERSION = {
    "major": "1",
    "minor": "32",
    "gitVersion": "v1.32.4",
    "gitCommit": "59526cd4867447956156ae3a602fcbac10a2c335",
    "gitTreeState": "clean",
    "buildDate": "2025-04-22T16:02:27Z",
    "goVersion": "go1.23.6",
    "compiler": "gc",
    "platform": "linux/amd64",
}

_SUBRESOURCES: dict[str, list[Obj]] = {
    "pods": [
        {
            "name": "pods/eviction",
            "group": "policy",
            "version": "v1",
            "kind": "Eviction",
            "verbs": ["create"],
        },
        {"name": "pods/log", "kind": "Pod", "verbs": ["get"]},
    ],
}


def version() -> Obj:
    return dict(SERVER_VERSION)


def api_versions(server_address: str) -> Obj:
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [
            {"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}
        ],
    }


def _group(group: str) -> Obj:
    versions = [
        {"groupVersion": f"{group}/{version}", "version": version}
        for g, version in group_versions()
        if g == group
    ]
    return {"name": group, "versions": versions, "preferredVersion": versions[0]}


def api_group_list() -> Obj:
    groups = list(dict.fromkeys(g for g, _ in group_versions()))
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": [_group(g) for g in groups]}


def api_group(group: str) -> Obj | None:
    if group not in {g for g, _ in group_versions()}:
        return None
    return {"kind": "APIGroup", "apiVersion": "v1", **_group(group)}


def _entry(kind: Kind) -> Obj:
    entry: Obj = {
        "name": kind.plural,
        "singularName": kind.singular,
        "namespaced": kind.namespaced,
        "kind": kind.kind,
        "verbs": list(kind.verbs),
    }
    if kind.short_names:
        entry["shortNames"] = list(kind.short_names)
    if kind.kind in ("Pod", "DaemonSet", "ReplicaSet", "StatefulSet", "Job"):
        entry["categories"] = ["all"]
    return entry


def resource_list(group: str, version: str) -> Obj | None:
    members = [k for k in KINDS if k.group == group and k.version == version]
    if not group:
        members = [k for k in KINDS if not k.group and k.version == version]
    elif not in_group_version(group, version):
        return None
    if not members:
        return None
    resources: list[Obj] = []
    for kind in members:
        resources.append(_entry(kind))
        for sub in _SUBRESOURCES.get(kind.plural, []):
            resources.append({"singularName": "", "namespaced": kind.namespaced, **sub})
        if kind.has_status:
            resources.append(
                {
                    "name": f"{kind.plural}/status",
                    "singularName": "",
                    "namespaced": kind.namespaced,
                    "kind": kind.kind,
                    "verbs": ["get", "patch", "update"] if kind.verbs != READ_VERBS else ["get"],
                }
            )
    group_version = f"{group}/{version}" if group else version
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": group_version,
        "resources": resources,
    }

"""The three PATCH formats: JSON patch (RFC 6902), merge patch (RFC 7386), strategic merge.

Strategic merge is the subset clients send to the objects the bot touches: maps merge,
`null` deletes, lists replace unless their field has a merge key below (then entries
merge by that key and `{"$patch": "delete"}` removes one), and the `$setElementOrder/`
and `$retainKeys` directives kubectl adds are accepted. `spec.taints` has no merge key in
Kubernetes, so a taints patch replaces the list, as on a real cluster.
"""

from __future__ import annotations

import copy
from typing import Any

from bot.sim.status import ApiError, bad_request

Obj = dict[str, Any]

MERGE_KEYS = {
    "conditions": "type",
    "containers": "name",
    "initContainers": "name",
    "volumes": "name",
    "volumeMounts": "mountPath",
    "env": "name",
    "ownerReferences": "uid",
    "addresses": "type",
}


def apply(content_type: str, target: Obj, patch: Any) -> Obj:
    """Return a patched copy of `target`; raise the API's 4xx for a malformed patch."""
    media = content_type.split(";")[0].strip().lower()
    if media == "application/json-patch+json":
        if not isinstance(patch, list):
            raise bad_request("json patch must be a list of operations")
        result = json_patch(target, patch)
    elif media == "application/merge-patch+json":
        result = merge_patch(target, _object(patch))
    else:
        result = strategic_merge(target, _object(patch))
    if not isinstance(result, dict):
        raise ApiError(422, "the patched object is not a JSON object")
    return result


def _object(patch: Any) -> Obj:
    if not isinstance(patch, dict):
        raise bad_request("the patch must be a JSON object for this patch type")
    return patch


def merge_patch(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def strategic_merge(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    if patch.get("$patch") == "replace":
        return {k: copy.deepcopy(v) for k, v in patch.items() if k != "$patch"}
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if key.startswith("$setElementOrder/") or key in ("$retainKeys", "$patch"):
            continue
        if key.startswith("$deleteFromPrimitiveList/"):
            name = key.split("/", 1)[1]
            result[name] = [v for v in result.get(name) or [] if v not in (value or [])]
        elif value is None:
            result.pop(key, None)
        elif isinstance(value, list) and key in MERGE_KEYS:
            result[key] = _merge_list(result.get(key) or [], value, MERGE_KEYS[key])
        else:
            result[key] = strategic_merge(result.get(key), value)
    return result


def _merge_list(current: list[Any], patch: list[Any], merge_key: str) -> list[Any]:
    result = copy.deepcopy(current)
    for item in patch:
        if not isinstance(item, dict) or merge_key not in item:
            raise bad_request(f"the list items must be objects with the merge key {merge_key!r}")
        index = next(
            (i for i, old in enumerate(result) if old.get(merge_key) == item[merge_key]), None
        )
        if item.get("$patch") == "delete":
            if index is not None:
                result.pop(index)
        elif index is None:
            result.append(strategic_merge({}, item))
        else:
            result[index] = strategic_merge(result[index], item)
    return result


def json_patch(target: Obj, operations: list[Any]) -> Any:
    doc: Any = copy.deepcopy(target)
    for op in operations:
        if not isinstance(op, dict) or "op" not in op or "path" not in op:
            raise bad_request("json patch operations need 'op' and 'path'")
        kind, path = op["op"], op["path"]
        if kind == "add":
            doc = _add(doc, path, copy.deepcopy(_value(op)))
        elif kind == "remove":
            doc = _remove(doc, path)[0]
        elif kind == "replace":
            doc, _ = _remove(doc, path)
            doc = _add(doc, path, copy.deepcopy(_value(op)))
        elif kind in ("move", "copy"):
            value = copy.deepcopy(_get(doc, _from(op)))
            if kind == "move":
                doc = _remove(doc, _from(op))[0]
            doc = _add(doc, path, value)
        elif kind == "test":
            if _get(doc, path) != _value(op):
                raise ApiError(
                    422,
                    f"the server rejected our request due to an error in our "
                    f"request: testing value {path} failed",
                )
        else:
            raise bad_request(f"unexpected json patch operation {kind!r}")
    return doc


def _value(op: Obj) -> Any:
    if "value" not in op:
        raise bad_request(f"json patch {op['op']} operation does not have a value")
    return op["value"]


def _from(op: Obj) -> str:
    source = op.get("from")
    if not isinstance(source, str):
        raise bad_request(f"json patch {op['op']} operation does not have a 'from'")
    return source


def _tokens(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise bad_request(f"json patch path {path!r} must start with '/'")
    return [t.replace("~1", "/").replace("~0", "~") for t in path[1:].split("/")]


def _missing(path: str) -> ApiError:
    return ApiError(
        422,
        f"the server rejected our request due to an error in our request: "
        f"doc is missing path: {path!r}",
    )


def _parent(doc: Any, path: str) -> tuple[Any, str]:
    tokens = _tokens(path)
    if not tokens:
        raise bad_request("json patch cannot target the whole document")
    node = doc
    for token in tokens[:-1]:
        node = _child(node, token, path)
    return node, tokens[-1]


def _child(node: Any, token: str, path: str) -> Any:
    if isinstance(node, dict) and token in node:
        return node[token]
    if isinstance(node, list) and token.isdigit() and int(token) < len(node):
        return node[int(token)]
    raise _missing(path)


def _get(doc: Any, path: str) -> Any:
    node = doc
    for token in _tokens(path):
        node = _child(node, token, path)
    return node


def _add(doc: Any, path: str, value: Any) -> Any:
    if path == "":
        return value
    parent, last = _parent(doc, path)
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        if last == "-":
            parent.append(value)
        elif last.isdigit() and int(last) <= len(parent):
            parent.insert(int(last), value)
        else:
            raise _missing(path)
    else:
        raise _missing(path)
    return doc


def _remove(doc: Any, path: str) -> tuple[Any, Any]:
    parent, last = _parent(doc, path)
    if isinstance(parent, dict) and last in parent:
        return doc, parent.pop(last)
    if isinstance(parent, list) and last.isdigit() and int(last) < len(parent):
        return doc, parent.pop(int(last))
    raise _missing(path)

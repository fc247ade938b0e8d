"""A strict check of rendered manifests against the Kubernetes OpenAPI models of the
`kubernetes` client (pydantic models, `extra="forbid"`, strict types).

`problems(obj)` finds the model for the object's apiVersion and kind and returns every
missing required field, wrong type and unknown field, by JSON path. The models also
accept snake_case names (`image_pull_policy`), which the API server rejects, so keys are
first checked against the wire (camelCase) names.
"""

from __future__ import annotations

import types
import typing
from typing import Any

from kubernetes import client
from pydantic import BaseModel, ValidationError

# Custom resources have no model in the client: their fields we use, checked by hand.
CUSTOM = {
    ("monitoring.coreos.com/v1", "ServiceMonitor"): {
        "spec": {"selector", "namespaceSelector", "endpoints"},
    },
}


def model_for(api_version: str, kind: str) -> type[BaseModel] | None:
    version = api_version.rsplit("/", 1)[-1]
    found = getattr(client, f"{version[:1].upper()}{version[1:]}{kind}", None)
    return found if isinstance(found, type) and issubclass(found, BaseModel) else None


def problems(obj: dict[str, Any]) -> list[str]:
    api_version, kind = obj.get("apiVersion", ""), obj.get("kind", "")
    custom = CUSTOM.get((api_version, kind))
    if custom is not None:
        return _custom(obj, custom)
    model = model_for(api_version, kind)
    if model is None:
        return [f"no Kubernetes model for {api_version} {kind}"]
    found = _wire_names(model, obj, kind)
    try:
        model.model_validate(obj)
    except ValidationError as exc:
        found += [f"{kind}.{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()]
    return found


def _custom(obj: dict[str, Any], fields: dict[str, set[str]]) -> list[str]:
    kind = obj["kind"]
    found = [
        f"{kind}: unknown field {key}"
        for key in obj
        if key not in {*fields, "apiVersion", "kind", "metadata"}
    ]
    found += _wire_names(client.V1ObjectMeta, obj.get("metadata"), f"{kind}.metadata")
    for key, allowed in fields.items():
        value = obj.get(key)
        if not isinstance(value, dict):
            found.append(f"{kind}.{key}: required object")
            continue
        found += [f"{kind}.{key}: unknown field {k}" for k in value if k not in allowed]
    return found


def _wire_names(model: type[BaseModel], value: Any, path: str) -> list[str]:
    """Keys that are not the model's wire names, at every depth."""
    if not isinstance(value, dict):
        return []
    fields = {(f.serialization_alias or name): f for name, f in model.model_fields.items()}
    found = []
    for key, item in value.items():
        field = fields.get(key)
        if field is None:
            found.append(f"{path}: unknown field {key}")
            continue
        found += _nested(field.annotation, item, f"{path}.{key}")
    return found


def _nested(annotation: Any, value: Any, path: str) -> list[str]:
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        for arg in args:
            if _is_model(arg) or typing.get_origin(arg) in (list, dict):
                return _nested(arg, value, path)
        return []
    if origin is typing.Annotated:
        return _nested(args[0], value, path)
    if origin is list and isinstance(value, list):
        return [p for i, item in enumerate(value) for p in _nested(args[0], item, f"{path}[{i}]")]
    if origin is dict and isinstance(value, dict):
        return [p for k, item in value.items() for p in _nested(args[1], item, f"{path}.{k}")]
    if _is_model(annotation):
        return _wire_names(annotation, value, path)
    return []


def _is_model(annotation: Any) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)

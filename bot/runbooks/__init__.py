"""Runbooks: the YAML plans that turn an incident into proposed, approved, logged steps.

`schema` holds the format (strict pydantic models); the loader, the validator, the
template sandbox and, later, the engine build on it.
"""

__all__: list[str] = []

"""Runbooks: the YAML plans that turn an incident into proposed, approved, logged steps.

`schema` holds the format (strict pydantic models); the loader, the validator and the
template sandbox build on it. At run time: `catalog` holds the runbooks in force and
matches an opening incident's alert; `engine.attach` freezes the match onto the incident
(`models.IncidentRunbook`) and `engine.advance` proposes its steps in order as `StepRun`s
(states in `steps`), reading a step again while its read contradicts the alert
(`expecting`); people decide through `approvals` (approve, skip, done), callers with a
database through `service`; `bot.worker` runs what was approved.
"""

__all__: list[str] = []

"""Runbooks: the YAML plans that turn an incident into proposed, approved, logged steps.

`schema` holds the format (strict pydantic models); the loader, the validator and the
template sandbox build on it. At run time: `catalog` holds the runbooks in force and
matches an opening incident's alert; `engine.attach` freezes the match onto the incident
(`models.IncidentRunbook`) and `engine.advance` proposes its steps in order as `StepRun`s
(states in `steps`), reading a step again while its read contradicts the alert
(`expecting`); people decide through `approvals` (approve, skip, done), callers with a
database through `service`. `bot.worker` claims what was approved (`claims`: claiming,
reaping lost leases, expiring unapproved runs) and runs it (`running`: one claimed run's
action on its own thread, its lease, its timeout and its recorded result). A step over
many nodes (`for_each`) is proposed, approved by its count and counted by `foreach`, and
run node by node by `foreach_running`.
"""

__all__: list[str] = []

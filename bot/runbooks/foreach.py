"""Steps over many nodes (`for_each: nodes`): what their proposal holds, what approving
one must name, and how far a run of one has got.

A `for_each` step's run carries one set of parameters per node of the incident:
`{"for_each": "nodes", "nodes": [n1, ...], "with": [{...for n1}, ...], "domain": "row/a"}`
(`domain` None for an incident of no domain). `params_hash` covers all of it, so one
approval binds to the exact node list; a list that changes while the run awaits its
approvals supersedes the proposal (`changed`). Approving a change or a disruptive action
over more than one node names the count (`needs_count`, `count_refusal`): "cordon 32
nodes of row/a" is then what the person said yes to, and the run's actions get an
`Allowance` for those nodes. While it runs, `StepRun.progress` holds each node's state
(`left`, `running`, `succeeded`, `failed`); its result, the same per node with the counts
(`Tally`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bot.actions import registry
from bot.actions.registry import Risk
from bot.errors import ActionUnknown, ParamsInvalid
from bot.runbooks import templates
from bot.runbooks.schema import Step

__all__ = [
    "FOR_EACH",
    "NODE_STATES",
    "Plan",
    "Tally",
    "changed",
    "count_refusal",
    "domain_of",
    "is_for_each",
    "names",
    "needs_count",
    "nodes_of",
    "params",
    "plan_of",
    "set_of",
    "shown",
    "tally",
    "timed_out",
]

FOR_EACH = "nodes"
NODE_STATES = ("left", "running", "succeeded", "failed")
SHOWN_NAMES = 2
"""Names shown of a set in one line: the first and the last ("a-01 ... a-32")."""


def params(step: Step, context: Mapping[str, Any], action: registry.Action) -> dict[str, Any]:
    """The run's parameters: `with` rendered once per node of `incident.nodes`, with
    `node` set, each checked against the action's model. Raises `TemplateError` or
    `ParamsInvalid` naming the node whose parameters failed (`ActionUnknown` comes from
    whoever got `action`)."""
    incident = context["incident"]
    nodes = [str(node) for node in incident.get("nodes") or []]
    withs = []
    for node in nodes:
        try:
            raw = templates.render_params(step.with_, {**context, "node": node})
            action.parse(raw)
        except templates.TemplateError as exc:
            raise templates.TemplateError(f"node {node}: {exc}") from exc
        except ParamsInvalid as exc:
            raise ParamsInvalid(f"node {node}: {exc}") from exc
        withs.append(raw)
    domain = incident.get("domain")
    name = domain.get("name") if isinstance(domain, Mapping) else None
    return {"for_each": FOR_EACH, "nodes": nodes, "with": withs, "domain": name}


def is_for_each(given: Mapping[str, Any] | None) -> bool:
    return given is not None and given.get("for_each") == FOR_EACH


def nodes_of(given: Mapping[str, Any]) -> list[str]:
    return [str(node) for node in given.get("nodes") or []]


def domain_of(given: Mapping[str, Any]) -> str | None:
    domain = given.get("domain")
    return str(domain) if domain else None


def changed(given: Mapping[str, Any], nodes: Sequence[str]) -> bool:
    """Whether a `for_each` run's node list is no longer the incident's."""
    return is_for_each(given) and nodes_of(given) != list(nodes)


def set_of(given: Mapping[str, Any]) -> str:
    """ "32 nodes of row/a", "1 node", "no nodes": the set, in a few words."""
    count = len(nodes_of(given))
    word = "node" if count == 1 else "nodes"
    domain = domain_of(given)
    what = f"{count} {word}" if count else "no nodes"
    return f"{what} of {domain}" if domain else what


def names(nodes: Sequence[str]) -> str:
    """ "a-01 ... a-32": a set's names short enough for one line."""
    if len(nodes) <= SHOWN_NAMES:
        return ", ".join(nodes)
    return f"{nodes[0]} ... {nodes[-1]}"


def shown(given: Mapping[str, Any]) -> str:
    """ "on 32 nodes of row/a (a-01 ... a-32)": what follows the action's name."""
    nodes = nodes_of(given)
    return f"on {set_of(given)} ({names(nodes)})" if nodes else f"on {set_of(given)}"


def _risk(action: str | None) -> Risk | None:
    try:
        return registry.get(action).risk if action else None
    except ActionUnknown:  # a frozen runbook may name an action this build lacks
        return Risk.DISRUPTIVE


def needs_count(given: Mapping[str, Any], action: str | None) -> bool:
    """Whether approving the run must name its node count: a change or a disruptive
    action over more than one node."""
    return (
        is_for_each(given)
        and len(nodes_of(given)) > 1
        and _risk(action) in (Risk.CHANGE, Risk.DISRUPTIVE)
    )


def count_refusal(
    given: Mapping[str, Any], action: str | None, step: str, count: int | None
) -> str | None:
    """Why approving with `count` is refused (None: it is not)."""
    nodes = nodes_of(given)
    send = f'--count {len(nodes)} (API: {{"count": {len(nodes)}}})'
    if count is None:
        if not needs_count(given, action):
            return None
        return (
            f"step {step} runs {action} {shown(given)}: approving it names the count; "
            f"send {send} if that is what you mean"
        )
    if not is_for_each(given):
        return f"step {step} runs {action} once, on no list of nodes: approve it without a count"
    if count != len(nodes):
        return (
            f"you named {count} nodes but step {step} runs {action} {shown(given)}; "
            f"review the list (`runbook-bot steps INC-N -o json`) and send {send}"
        )
    return None


@dataclass(frozen=True)
class Tally:
    """A `for_each` run's nodes, counted by state."""

    total: int
    succeeded: int
    running: int
    failed: int
    left: int
    failed_nodes: list[str]
    left_nodes: list[str]

    @property
    def done(self) -> int:
        return self.succeeded


def tally(progress: Mapping[str, Any] | None, given: Mapping[str, Any]) -> Tally:
    """Count a run's nodes from its progress (or result); nodes it has not reached yet
    are `left`."""
    states = dict((progress or {}).get("nodes") or {})
    nodes = nodes_of(given)
    by: dict[str, list[str]] = {state: [] for state in NODE_STATES}
    for node in nodes:
        state = str((states.get(node) or {}).get("state", "left"))
        by.setdefault(state, []).append(node)
    return Tally(
        total=len(nodes),
        succeeded=len(by["succeeded"]),
        running=len(by["running"]),
        failed=len(by["failed"]),
        left=len(by["left"]),
        failed_nodes=by["failed"],
        left_nodes=by["left"],
    )


@dataclass(frozen=True)
class Plan:
    """How a claimed `for_each` run goes over its nodes (the step's fields, and the count
    its approvals named)."""

    max_parallel: int = 1
    batch: int | None = None
    """Nodes per batch; None: all in one."""
    pause: float = 0.0
    """Seconds (on the clock) between two batches."""
    stop_on: str = "first_failure"
    count: int | None = None
    """The count the approvals named: the actions get an `Allowance` for the nodes."""
    override: int | None = None
    """How many nodes past the breaker's global cap an admin's approval let the run go."""


def plan_of(
    step: Step, approved_count: int | None, override_count: int | None = None
) -> Plan | None:
    """The plan of a `for_each` step's run; None for a step of one action."""
    if step.for_each is None:
        return None
    pause = step.pause.total_seconds() if step.pause is not None else 0.0
    return Plan(step.max_parallel, step.batch, pause, step.stop_on, approved_count, override_count)


def timed_out(progress: Mapping[str, Any], given: Mapping[str, Any]) -> dict[str, Any]:
    """The result of a run whose step timed out: its nodes where they were, counted as a
    finished run's are (`running` ones were cancelled at their next call)."""
    counted = tally(progress, given)
    return {
        "nodes": dict(progress.get("nodes") or {}),
        "succeeded": counted.succeeded,
        "failed": counted.failed,
        "running": counted.running,
        "left": counted.left,
        "stopped": False,
    }

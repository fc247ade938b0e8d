"""The action registry and its executors: what runbooks, chat and the CLI can make happen.

An action is declared once (`registry.action`) with typed parameters, a result model and
a risk level (read / change / disruptive). `executing.execute` validates raw parameters,
records the run before and after through the context's callbacks, runs the executor, and
turns every failure into a result a human can act on. Executors live in `kubernetes/`
(and later `bmc/`, `gpu/`, `notify`); they reach the cluster through `cluster.call`.
"""

from bot.actions import executing, registry
from bot.actions.context import ActionContext, Allowance, Reading
from bot.actions.executing import Outcome, execute
from bot.actions.registry import Action, Risk
from bot.actions.types import Params, Result

__all__ = [
    "Action",
    "ActionContext",
    "Allowance",
    "Outcome",
    "Params",
    "Reading",
    "Result",
    "Risk",
    "execute",
    "executing",
    "registry",
]

"""Imports every executor module so each registers its actions with the registry."""

from bot.actions.bmc import power, reads  # noqa: F401
from bot.actions.gpu import diag, health, history, reset, xid  # noqa: F401
from bot.actions.infiniband import ports  # noqa: F401
from bot.actions.kubernetes import (  # noqa: F401
    drain,  # noqa: F401
    mounts,
    node_job,
    nodes,  # noqa: F401
    pods,
    priority,
    taints,
    volcano,
    waits,
)

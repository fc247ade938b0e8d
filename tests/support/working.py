"""Driving the worker pass by pass in tests, as the old synchronous worker ran.

The worker never waits for an action (it runs them on threads of their own); `passed`
makes one pass and then waits for the actions that pass started, so a test that loops
"until there is no work" sees each action's result before it looks."""

from __future__ import annotations

from bot.worker import Worker


def passed(worker: Worker) -> bool:
    """One `run_once`, then `settle`; True if either did work."""
    worked = worker.run_once()
    settled = worker.settle()
    return worked or settled

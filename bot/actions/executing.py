"""Running one action: validate, record before, execute, record after, never raise.

`execute` is what the CLI, and later the runbook engine, call. It turns every failure
into a result a human can act on, and keeps the retry decision in `Outcome.retry_after`
(set only by `TemporaryActionError`). A failure's result is a `Failure`, whose `error`
is the exception class's `kind` (`credentials`, `unavailable`, `refused`), so a runbook
branches on what failed without reading the message. Unexpected exceptions are logged
with an error id and reported by that id (kind `internal`), so a bug never leaks a
traceback into chat or the incident log.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from typing import Any

from pydantic import Field

from bot.actions import registry
from bot.actions.context import ActionContext
from bot.actions.types import Result
from bot.errors import ActionError, PermanentActionError, TemporaryActionError

logger = logging.getLogger(__name__)


class Failure(Result):
    """The result of an action that failed: `ok` is false, `summary` the reason."""

    error: str = Field(
        description="what kind of failure, from the exception's class: credentials, "
        "unavailable, refused, internal or other"
    )


@dataclass(frozen=True)
class Outcome:
    action: str
    params: dict[str, Any]
    result: Result
    retry_after: float | None = None


def execute(action: registry.Action, raw: dict[str, Any], ctx: ActionContext) -> Outcome:
    """Run `action` with raw parameters. Raises only `ParamsInvalid` (before anything runs)."""
    params = action.parse(raw)
    shown = params.model_dump(mode="json")
    if ctx.dry_run and not action.dry_run:
        # Nothing it could ask a server to check: say what it would have done, with what.
        result = Result(
            ok=True,
            summary=f"rendered only: {action.name} has no dry run; it would run with "
            f"({_brief(shown)})",
            dry_run=True,
        )
        ctx.record(
            "action.rendered",
            f"{action.name} rendered only (dry run): {_brief(shown)}",
            {"action": action.name, "params": shown, "risk": action.risk.value, "dry_run": True},
        )
        return Outcome(action.name, shown, result)
    verb = "dry-run" if ctx.dry_run else "run"
    ctx.record(
        "action.started",
        f"{ctx.actor} started {action.name} ({_brief(shown)})"
        + (" [dry run]" if ctx.dry_run else ""),
        {"action": action.name, "params": shown, "risk": action.risk.value, "dry_run": ctx.dry_run},
    )
    retry_after: float | None = None
    try:
        result = action.run(ctx, params)
    except TemporaryActionError as exc:
        result, retry_after = _failure(exc, ctx), exc.delay
    except (PermanentActionError, ActionError) as exc:
        result = _failure(exc, ctx)
    except Exception:
        error_id = uuid.uuid4().hex[:8]
        logger.exception("action %s failed unexpectedly (error id %s)", action.name, error_id)
        result = Failure(
            ok=False,
            summary=f"{action.name} failed with an internal error (id {error_id}); "
            "the bot's log has the details",
            dry_run=ctx.dry_run,
            error="internal",
        )
    ctx.record(
        "action.finished" if result.ok else "action.failed",
        f"{action.name} {verb}: {result.summary}",
        {
            "action": action.name,
            "params": shown,
            "ok": result.ok,
            "result": result.model_dump(mode="json"),
            "retry_after": retry_after,
        },
    )
    return Outcome(action.name, shown, result, retry_after)


def _failure(exc: ActionError, ctx: ActionContext) -> Failure:
    return Failure(ok=False, summary=str(exc), dry_run=ctx.dry_run, error=exc.kind)


def _brief(params: dict[str, Any]) -> str:
    text = ", ".join(f"{k}={v}" for k, v in params.items() if v not in (None, [], {}, False))
    return text[:200]

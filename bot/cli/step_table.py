"""`runbook-bot steps INC-N`: the steps of an incident's runbook as a table, one row a
step: its state (coloured on a terminal), its action, the approvals given of those needed
and by whom ("2/2 (alice, bob)"), and what happened (a step over many nodes: its counts);
a step waiting for a decision says which later steps skipping it would skip too."""

from __future__ import annotations

from typing import Any

from rich.text import Text

from bot.cli import terminal
from bot.runbooks.service import StepRow

HEADER = ["STEP", "STATE", "ACTION", "APPROVALS", "SUMMARY"]
WAITING = ("proposed", "awaiting_approval")
"""States in which a person may still skip the step."""


def show(incident: str, runbook: str, rows: list[StepRow]) -> int:
    table: list[list[str | Text]] = [list(HEADER), *(cells(row) for row in rows)]
    return terminal.show(table, title=f"{incident} follows {runbook}")


def cells(row: StepRow) -> list[str | Text]:
    state = _state(row) + (f" (#{row.attempt})" if row.attempt > 1 else "")
    summary = row.summary if row.state != "not_reached" else row.title
    if row.progress is not None and row.state == "running":
        summary = counted(row.progress)
    if row.state in WAITING and row.dependents:
        summary += f" · skipping it also skips {', '.join(row.dependents)}"
    return [
        row.step,
        terminal.styled(state, terminal.STATE_STYLES.get(row.state)),
        row.action or "manual",
        approvals(row),
        summary,
    ]


def _state(row: StepRow) -> str:
    """The state in words; a manual step waits for someone to do it, not for approval."""
    if row.kind == "manual" and row.state == "awaiting_approval":
        return "to do"
    return row.state.replace("_", " ")


def approvals(row: StepRow) -> str:
    """ "2/2 (alice, bob)"; "0/1"; "-" for a manual step. The names follow the count in
    brackets, so the count stays the fourth word of the row for scripts."""
    if row.kind != "action":
        return "-"
    given = f"{row.approvals}/{row.approvals_required}"
    return f"{given} ({', '.join(row.approvers)})" if row.approvers else given


def counted(progress: dict[str, Any]) -> str:
    """ "32 nodes of row/a: done 12 · running 4 · failed 1 · left 15 (failed: a-07)"."""
    counts = " · ".join(
        f"{word} {progress[key]}"
        for word, key in (("done", "succeeded"), ("running", "running"), ("failed", "failed"))
    )
    failed = f" (failed: {', '.join(progress['failed_nodes'][:5])})" if progress["failed"] else ""
    return f"{progress['set']}: {counts} · left {progress['left']}{failed}"

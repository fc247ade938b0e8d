"""What every chat surface says in words, whatever its markup: elapsed times, clock
times, the card's status and escalation lines, each step's state, the folded line, the
two-person wait and a domain step's grid. Slack's blocks and the console both use these,
so a card reads the same on both.

Everything returned is plain text: a surface escapes it for its markup. People are named
by `who` (a person id -> what to show: a display name, or the id itself for a surface
that turns ids into mentions afterwards).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta

from bot.chat.views import CardView, EachView, EscalationView, SecondLineView, StepView

Who = Callable[[str], str]
"""A person id -> the words for them."""

GRID_WIDTH = 16
"""Cells per row of a domain step's grid: 32 nodes are two rows on a phone."""
GRID_CELLS = 256
"""Past this many nodes a cell stands for several (the grid stays a few rows)."""
GRID_MARK = {"done": "■", "running": "▶", "failed": "✖", "left": "□"}
"""One mark per cell: done / running / failed / left."""
_GRID_OF = {
    "succeeded": "done",
    "done": "done",
    "skipped": "done",
    "running": "running",
    "failed": "failed",
    "timed_out": "failed",
    "stopped": "left",
    "left": "left",
}
_BRANCH = re.compile(r"==\s*[\"']([^\"']{1,40})[\"']|in\s*\[([^\]]{1,120})\]")


def _self(person: str) -> str:
    return person


def elapsed(delta: timedelta) -> str:
    """`45s`, `42m`, `3h 05m`, `2d 04h`: two units at most, to read at a glance."""
    seconds = max(0, int(delta.total_seconds()))
    minutes, secs = divmod(seconds, 60)
    hours, mins = divmod(minutes, 60)
    days, hrs = divmod(hours, 24)
    if days:
        return f"{days}d {hrs:02d}h"
    if hours:
        return f"{hours}h {mins:02d}m"
    if minutes:
        return f"{minutes}m"
    return f"{secs}s"


def utc(at: datetime) -> datetime:
    return at.replace(tzinfo=UTC) if at.tzinfo is None else at.astimezone(UTC)


def scope_line(view: CardView) -> str | None:
    """`row/a · 32 nodes · 3 ib-partition alerts attached as symptoms`, or `merged into
    INC-4`: the card's scope, short enough for a phone; None for a node incident."""
    if view.merged_into is not None:
        return f"merged into {view.merged_into}"
    parts: list[str] = []
    if view.domain is not None:
        count = len(view.nodes)
        parts.append(f"{view.domain} · {count} node{'s' if count != 1 else ''}")
    for runbook, alerts in view.symptoms:
        parts.append(f"{alerts} {runbook} alert{'s' if alerts != 1 else ''} attached as symptoms")
    return " · ".join(parts) or None


def escalation_line(view: CardView) -> str | None:
    """`Escalation: level 2 of 3 paged 03:15 UTC · next: level 3 at 03:45 UTC`, short
    enough for a phone; None when the incident does not escalate or is over."""
    esc = view.escalation
    if esc is None or not view.active:
        return None
    return f"Escalation: {escalation_state(esc, view)}"


def escalation_state(esc: EscalationView, view: CardView) -> str:
    now = view.now
    if esc.next_kind == "resume" or (esc.silenced_until and utc(esc.silenced_until) > utc(now)):
        until = esc.silenced_until or esc.next_at
        return f"silenced until {clock(until, now)}" if until else "silenced"
    if view.status == "acknowledged":
        if esc.next_kind == "ack" and esc.next_at is not None:
            return f"acknowledged · re-page at {clock(esc.next_at, now)} unless resolved"
        return "acknowledged"
    again = f" (round {esc.round})" if esc.round > 1 else ""
    if esc.level == 0:
        text = "not paged yet"
    else:
        text = f"level {esc.level} of {esc.levels}{again} paged"
        if esc.paged_at is not None:
            text += f" {clock(esc.paged_at, now)}"
    if esc.next_kind == "level" and esc.next_at is not None:
        hours = " (working hours)" if esc.working_hours_only else ""
        rung = f"level {esc.next_level}" if esc.next_level else "next level"
        sep = " · " if esc.level == 0 else " · next: "
        return f"{text}{sep}{rung} at {clock(esc.next_at, now)}{hours}"
    if esc.next_kind is None and esc.level >= esc.levels:
        return "ladder exhausted: nobody acknowledged"
    return text


def clock(at: datetime, now: datetime, *, seconds: bool = False) -> str:
    """`03:45 UTC` (`03:45:07 UTC` with `seconds`), or `Mon 09:00 UTC` when it is not
    today (UTC)."""
    at, now = utc(at), utc(now)
    time = "%H:%M:%S" if seconds else "%H:%M"
    return at.strftime(f"{time} UTC" if at.date() == now.date() else f"%a {time} UTC")


# --- what the card leads with -------------------------------------------------------------


def status_line(view: CardView, who: Who = _self, *, title: bool = True) -> str:
    """What happened, to which node or domain, since when, who owns it:
    `GPU 5 XID 79 on gpu-node-02 · since 03:00:12 UTC (42m) · owner alice`; a domain
    incident names its domain and counts its nodes (`row/a · 32 nodes`). A node the
    title already names is not named again (nor, in the same line, a domain it names);
    `title=False` leaves the title out (a surface whose header shows it)."""
    what = " ".join(view.title.split()) or "(no title)"
    parts = [what] if title else []
    where = _where(view)
    if where and not _named(view, what, title):
        parts.append(where)
    since = f"since {clock(view.opened_at, view.now, seconds=True)}"
    if view.active:
        since += f" ({elapsed(view.now - view.opened_at)})"
    parts.append(since)
    if not view.active:
        parts.append(view.status)
    parts.append(f"owner {who(view.owner)}" if view.owner else "no owner")
    return " · ".join(parts)


def _named(view: CardView, title: str, shown: bool) -> bool:
    """The title already says where: every node, or, in the same line (`shown`), the
    domain (`... 2 nodes of row/a`). A surface that shows the title apart keeps the
    domain's count here: its header may be cut on a phone."""
    if view.domain is not None:
        return shown and view.domain in title
    return all(node in title for node in view.nodes)


def _where(view: CardView) -> str | None:
    if view.domain is not None:
        count = len(view.nodes)
        return f"{view.domain} · {count} node{'s' if count != 1 else ''}"
    if not view.nodes:
        return None
    if len(view.nodes) <= 3:
        return "on " + ", ".join(view.nodes)
    return f"on {', '.join(view.nodes[:2])} and {len(view.nodes) - 2} more nodes"


def step_state(step: StepView, now: datetime | None = None, who: Who = _self) -> str:
    """Where a step stands, in words a tired person cannot misread. A running step says
    it runs (never what it waited for); a manual step waits for someone to do it; a
    summary that repeats the state's word is not shown twice."""
    state = step.state
    if state == "awaiting_approval":
        return _awaiting(step, now, who)
    if state == "proposed":
        return "being prepared"
    if state == "approved":
        by = _people(step.approvers, who)
        text = f"approved by {by}, starting" if by else "starting"
        return _with(text, _fresh(step.summary, "approved", state))
    if state == "running":
        text = f"running: {step.each.counted}" if step.each is not None else "running"
        return _with(text, _fresh(step.summary, "running", state))
    if state == "not_reached":
        return "not reached yet"
    word = {
        "succeeded": "done",
        "failed": "failed",
        "timed_out": "timed out",
        "expired": "expired",
        "skipped": "skipped",
        "cancelled": "cancelled",
        "interrupted": "interrupted",
    }.get(state, state.replace("_", " "))
    detail = _detail(step.summary, word, state)
    if state == "expired" and not detail:
        detail = "nobody approved it in time"
    return f"{word}: {detail}" if detail else word


def _awaiting(step: StepView, now: datetime | None, who: Who) -> str:
    if step.kind == "manual":
        return "waiting for someone to do it and mark it done"
    needed = max(step.approvals_required, 1)
    missing = max(needed - step.approvals, 0)
    if step.approvals and missing:
        text = f"approved by {_people(step.approvers, who)}, waiting for {_count(missing)} more"
    elif needed == 1:
        text = "waiting for one person to approve"
    else:
        text = f"waiting for {_count(needed)} different people to approve"
    if step.each is not None and step.each.count is not None:
        text += f" {step.each.count} nodes"
    if step.expires_at is not None and now is not None:
        left = step.expires_at - now
        if left > timedelta(0):
            text += f" (expires in {elapsed(left)}, {clock(step.expires_at, now)})"
        else:
            text += " (expired)"
    return text


STALE = re.compile(
    r"\bneeds .{1,80} before \d{1,2}:\d{2}(:\d{2})? UTC|\bruns automatically\b"
    r"|\bapproved (by|automatically)\b"
)
"""What a proposal or an approval said, and a step under way no longer needs to say
(`needs one person before 19:26 UTC`; `approved by alice`, said already): never shown
once it runs."""


def _fresh(summary: str, word: str, state: str) -> str:
    detail = _detail(summary, word, state)
    return "" if STALE.search(detail) else detail


def _with(text: str, detail: str) -> str:
    return f"{text} — {detail}" if detail else text


def _count(n: int) -> str:
    return {1: "one", 2: "two", 3: "three"}.get(n, str(n))


def _people(people: Sequence[str], who: Who) -> str:
    shown = [who(p) for p in people]
    if len(shown) <= 1:
        return "".join(shown)
    return f"{', '.join(shown[:-1])} and {shown[-1]}"


def _detail(summary: str, word: str, state: str) -> str:
    """The run's summary without a leading repeat of the state (`skipped: skipped: ...`,
    `failed (failed)`), on one line."""
    text = " ".join(summary.split())
    for lead in {word, state, state.replace("_", " ")}:
        for sep in (": ", " — ", " - ", " "):
            if text.lower().startswith(lead + sep):
                text = text[len(lead) + len(sep) :]
        if text.lower() in (lead, f"({lead})"):
            text = ""
    return text.strip()


def folded_line(steps: Sequence[StepView]) -> str | None:
    """`4 steps skipped: application/informational branches · 3 not reached yet`: the
    skipped and not-reached steps in one line; None when there are none. The branches
    are the values the skipped steps' conditions compared against."""
    skipped = [step for step in steps if step.state == "skipped"]
    later = sum(step.state == "not_reached" for step in steps)
    parts = []
    if skipped:
        text = f"{len(skipped)} step{'s' if len(skipped) != 1 else ''} skipped"
        branches = _branches(skipped)
        if branches:
            noun = "branch" if len(branches) == 1 else "branches"
            text += f": {'/'.join(branches)} {noun}"
        else:
            text += ": " + ", ".join(step.title or step.step for step in skipped[:3])
            if len(skipped) > 3:
                text += f" and {len(skipped) - 3} more"
        parts.append(text)
    if later:
        parts.append(f"{later} not reached yet")
    return " · ".join(parts) or None


def _branches(skipped: Sequence[StepView]) -> list[str]:
    found: dict[str, None] = {}
    for step in skipped:
        if "`when:" not in step.summary:
            continue
        for equal, listed in _BRANCH.findall(step.summary):
            values = [equal] if equal else re.findall(r"[\"']([^\"']{1,40})[\"']", listed)
            for value in values:
                found.setdefault(value, None)
    return list(found)


def waiting_for_second(
    step: StepView,
    second_line: SecondLineView | None,
    viewer_id: str | None,
    who: Who = _self,
) -> str:
    """`approved by you, waiting for one more (second line: Bob, paged 03:14:07 UTC)`
    for the first approver (`viewer_id`); anyone else reads who approved. A shared card
    (Slack) passes `viewer_id=None`."""
    mine = viewer_id is not None and viewer_id in step.approvers
    others = [p for p in step.approvers if p != viewer_id] if mine else list(step.approvers)
    named = ["you", *(who(p) for p in others)] if mine else [who(p) for p in others]
    by = "".join(named) if len(named) <= 1 else f"{', '.join(named[:-1])} and {named[-1]}"
    missing = max(max(step.approvals_required, 1) - step.approvals, 1)
    text = f"approved by {by or 'nobody yet'}, waiting for {_count(missing)} more"
    if second_line is None:
        return text
    line = f"second line: {_people(second_line.names, _self) or 'nobody on that level'}"
    if second_line.paged_at is not None:
        line += f", paged {utc(second_line.paged_at).strftime('%H:%M:%S UTC')}"
    else:
        line += ", not paged yet"
    return f"{text} ({line})"


def grid(each: EachView, width: int = GRID_WIDTH) -> str:
    """A domain step's nodes as a compact grid, one mark a node (■ done, ▶ running,
    ✖ failed, □ left), `width` to a row, in the set's order; past `GRID_CELLS` nodes a
    cell stands for several (the worst of them). The counts line goes with it
    (`EachView.counted`); the node names stay in the thread and the console's details."""
    marks = _marks(each)
    if len(marks) > GRID_CELLS:
        per = -(-len(marks) // GRID_CELLS)
        marks = [_worst(marks[i : i + per]) for i in range(0, len(marks), per)]
    rows = ["".join(marks[i : i + width]) for i in range(0, len(marks), width)]
    return "\n".join(rows)


def _marks(each: EachView) -> list[str]:
    if len(each.states) == each.total and each.total:
        return [GRID_MARK[_GRID_OF.get(state, "left")] for state in each.states]
    counts = (
        ("done", each.succeeded),
        ("running", each.running),
        ("failed", each.failed),
        ("left", max(each.total - each.succeeded - each.running - each.failed, 0)),
    )
    return [GRID_MARK[kind] for kind, n in counts for _ in range(n)]


def _worst(cells: Sequence[str]) -> str:
    for kind in ("failed", "running", "left"):
        if GRID_MARK[kind] in cells:
            return GRID_MARK[kind]
    return GRID_MARK["done"]

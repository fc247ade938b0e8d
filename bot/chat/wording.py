"""What every chat surface says in words, whatever its markup: elapsed times, clock
times, and the card's escalation line. Slack's blocks and the console both use these, so
a card reads the same on both."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from bot.chat.views import CardView, EscalationView


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


def clock(at: datetime, now: datetime) -> str:
    """`03:45 UTC`, or `Mon 09:00 UTC` when it is not today (UTC)."""
    at, now = utc(at), utc(now)
    return at.strftime("%H:%M UTC" if at.date() == now.date() else "%a %H:%M UTC")

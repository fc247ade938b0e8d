"""Follow-ups: the improvements a postmortem commits to, each with one owner and a deadline
(the seed: 改进措施（每条有 owner 和 deadline）).

Plain functions taking the caller's session, like `bot.incidents.service`: every change
locks the incident row and writes its incident-log entry (`followup.added`,
`followup.updated`, `followup.done`) in the same transaction, so the change and its record
commit together. `from_runs` adds the RMA follow-up a runbook's `gpu.fault_history` step
called for, once.
"""

from __future__ import annotations

import re
from datetime import date, datetime
from typing import Any
from urllib.parse import urlparse

from sqlalchemy import select
from sqlalchemy.orm import Session

from bot.errors import PayloadInvalid
from bot.incidents import log
from bot.incidents import service as incidents
from bot.postmortem.models import STATUSES, TYPES, Followup
from bot.runbooks.models import StepRun
from bot.runbooks.steps import StepState

TITLE_MAX = 500
PERSON = re.compile(r"^(?:slack:[UW][A-Z0-9]{2,20}|[^\W_][\w.@+-]{0,199})$")
"""A Slack user, or a name (`alice`, `张三`): names are recorded, but only Slack users can be
reminded."""
"""A person id: a Slack user (`slack:U0123ABC`) or the name a CLI user acts as (`alice`)."""
RUNBOOK = log.Actor("bot", "runbook-bot", "runbook-bot")
UNSET: Any = object()
"""`update`'s default: leave the field as it is (None clears owner, deadline and link)."""


def add(
    session: Session,
    number: int,
    title: str,
    *,
    type: str,
    owner: str | None,
    deadline: date | None,
    link: str | None,
    actor: log.Actor,
    now: datetime,
    source: str = "person",
) -> Followup:
    """Add a follow-up to INC-`number`; the incident log records who added what, for whom
    and by when."""
    title = _title(title)
    kind = _type(type)
    owner, deadline, link = _owner(owner), _deadline(deadline), _link(link)
    incident = incidents.get(session, number, lock=True)
    item = Followup(
        incident_number=number,
        title=title,
        type=kind,
        owner=owner,
        deadline=deadline,
        status="open",
        link=link,
        source=source,
        created_by=actor.id,
        created_at=now,
        updated_at=now,
    )
    session.add(item)
    session.flush()
    who = owner or "no owner yet"
    by = deadline.isoformat() if deadline else "no deadline yet"
    log.append(
        session,
        incident,
        at=now,
        actor=actor,
        type="followup.added",
        summary=f"{actor.name} added follow-up #{item.id} ({kind}): {title} "
        f"(owner: {who}, deadline: {by})",
        data={
            "id": item.id,
            "title": title,
            "type": kind,
            "owner": owner,
            "deadline": deadline,
            "link": link,
            "source": source,
        },
    )
    return item


def update(
    session: Session,
    followup_id: int,
    *,
    actor: log.Actor,
    now: datetime,
    owner: str | None = UNSET,
    deadline: date | None = UNSET,
    status: str = UNSET,
    link: str | None = UNSET,
) -> Followup:
    """Change a follow-up's owner, deadline, status or link (only the ones given). Done or
    cancelled closes it, open reopens it; the log gets `followup.done` when it is done,
    `followup.updated` otherwise. A change to what it already is is a no-op."""
    item = get(session, followup_id)
    incident = incidents.get(session, item.incident_number, lock=True)
    session.refresh(item)
    wanted: dict[str, Any] = {}
    if owner is not UNSET:
        wanted["owner"] = _owner(owner)
    if deadline is not UNSET:
        wanted["deadline"] = _deadline(deadline)
    if link is not UNSET:
        wanted["link"] = _link(link)
    if status is not UNSET:
        wanted["status"] = _status(status)
    if not wanted:
        raise PayloadInvalid(
            f"nothing to change on follow-up #{item.id}: give an owner, a deadline, a status "
            "(open, done, cancelled) or a link"
        )
    changes = {
        name: (getattr(item, name), value)
        for name, value in wanted.items()
        if getattr(item, name) != value
    }
    if not changes:
        return item
    for name, (_, value) in changes.items():
        setattr(item, name, value)
    item.updated_at = now
    if "status" in changes:
        item.closed_at = None if item.status == "open" else now
    done = changes.get("status", (None, None))[1] == "done"
    said = ", ".join(f"{name} {_shown(value)}" for name, (_, value) in changes.items())
    log.append(
        session,
        incident,
        at=now,
        actor=actor,
        type="followup.done" if done else "followup.updated",
        summary=f"{actor.name} marked follow-up #{item.id} done: {item.title}"
        if done
        else f"{actor.name} changed follow-up #{item.id} ({item.title}): {said}",
        data={
            "id": item.id,
            "changes": {
                name: {"before": old, "after": new} for name, (old, new) in changes.items()
            },
        },
    )
    return item


def get(session: Session, followup_id: int) -> Followup:
    item = session.get(Followup, followup_id)
    if item is None:
        raise PayloadInvalid(
            f"follow-up #{followup_id} does not exist; `runbook-bot followup list` shows them",
            field="id",
        )
    return item


def of_incident(session: Session, number: int) -> list[Followup]:
    """INC-`number`'s follow-ups, oldest first (IncidentNotFound when it does not exist)."""
    incidents.get(session, number)
    stmt = select(Followup).where(Followup.incident_number == number).order_by(Followup.id)
    return list(session.scalars(stmt))


def open_items(session: Session) -> list[Followup]:
    """Every open follow-up, the earliest deadline first (none last), then the oldest."""
    stmt = (
        select(Followup)
        .where(Followup.status == "open")
        .order_by(Followup.deadline.is_(None), Followup.deadline, Followup.id)
    )
    return list(session.scalars(stmt))


def from_runs(session: Session, number: int, now: datetime) -> list[Followup]:
    """Add the RMA follow-up for each card a succeeded `gpu.fault_history` run of INC-
    `number` says to replace (the seed: 反复掉卡（一周 ≥2 次）→ 走 RMA 换卡). Never twice for
    one card of one incident, whatever became of the first (done, cancelled); returns the
    ones added now. They have no owner or deadline yet: finalizing the postmortem asks
    for both."""
    incidents.get(session, number, lock=True)
    stmt = (
        select(StepRun)
        .where(
            StepRun.incident_number == number,
            StepRun.action == "gpu.fault_history",
            StepRun.state == StepState.SUCCEEDED,
        )
        .order_by(StepRun.id)
    )
    existing = {
        item.title.split(" (", 1)[0]
        for item in session.scalars(
            select(Followup).where(Followup.incident_number == number, Followup.source == "runbook")
        )
    }
    added: list[Followup] = []
    for run in session.scalars(stmt):
        result = run.result or {}
        if result.get("rma") is not True:
            continue
        title = rma_title(result)
        key = title.split(" (", 1)[0]
        if key in existing:
            continue
        existing.add(key)
        added.append(
            add(
                session,
                number,
                title,
                type="mitigate",
                owner=None,
                deadline=None,
                link=None,
                actor=RUNBOOK,
                now=now,
                source="runbook",
            )
        )
    return added


def rma_title(result: dict[str, Any]) -> str:
    """`RMA: replace gpu-node-02/GPU 5 (dropped twice this week)` from a fault history."""
    node = str(result.get("node") or "")
    card = str(result.get("card") or "") or f"a GPU on {node or 'the node'}"
    if node and not card.startswith(node) and " on " not in card:
        card = f"{card} on {node}"
    drops = result.get("drops")
    count = drops if isinstance(drops, int) else 0
    times = {1: "once", 2: "twice"}.get(count, f"{count} times")
    why = f"dropped {times} this week" if count >= 1 else "the repeat rule holds"
    return f"RMA: replace {card} ({why})"


# --- validation ---------------------------------------------------------------------------


def _title(title: str) -> str:
    text = " ".join(str(title).split())
    if not text:
        raise PayloadInvalid("a follow-up needs a title: what will be improved", field="title")
    if len(text) > TITLE_MAX:
        raise PayloadInvalid(
            f"the title has {len(text)} characters, at most {TITLE_MAX}: say it shorter and "
            "put the details behind a link",
            field="title",
        )
    return text


def _type(kind: str) -> str:
    if kind not in TYPES:
        raise PayloadInvalid(
            f"{kind!r} is not a follow-up type: write one of {', '.join(TYPES)}", field="type"
        )
    return kind


def _status(status: str) -> str:
    if status not in STATUSES:
        raise PayloadInvalid(
            f"{status!r} is not a follow-up status: write one of {', '.join(STATUSES)}",
            field="status",
        )
    return status


def _owner(owner: str | None) -> str | None:
    if owner is None:
        return None
    text = str(owner).strip()
    if not PERSON.match(text):
        raise PayloadInvalid(
            f"{owner!r} is not a person id: write a Slack user as slack:U0123ABC (or the "
            "name someone acts as with --as)",
            field="owner",
        )
    return text


def _deadline(deadline: date | None) -> date | None:
    if deadline is None:
        return None
    if isinstance(deadline, datetime) or not isinstance(deadline, date):
        raise PayloadInvalid(
            f"{deadline!r} is not a date: write the deadline like 2026-12-31", field="deadline"
        )
    return deadline


def _link(link: str | None) -> str | None:
    if link is None:
        return None
    text = str(link).strip()
    parsed = urlparse(text)
    if parsed.scheme not in ("http", "https") or not parsed.netloc or " " in text:
        raise PayloadInvalid(
            f"{link!r} is not a web link: write the tracker URL, like "
            "https://jira.example.com/browse/OPS-12",
            field="link",
        )
    return text


def parse_date(text: str) -> date:
    """`2026-12-31` -> a date; anything else raises PayloadInvalid naming the form."""
    try:
        return date.fromisoformat(text.strip())
    except ValueError:
        raise PayloadInvalid(
            f"{text!r} is not a date: write the deadline like 2026-12-31", field="deadline"
        ) from None


def _shown(value: object) -> str:
    if value is None:
        return "cleared"
    if isinstance(value, date):
        return f"-> {value.isoformat()}"
    return f"-> {value}"

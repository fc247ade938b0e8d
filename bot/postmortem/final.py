"""The stored postmortem: versions of the Markdown its author edited, and the rules a final
one must meet.

The seed's principle (34.4): 对事不对人，每个"为什么"最终都要落到流程/系统/机制的改进上，而
不是"某某操作失误" (blameless: each why ends in a process, system or mechanism, not "someone
made a mistake"), and 改进措施（每条有 owner 和 deadline）(each improvement has an owner and a
deadline). `finalize` refuses a postmortem that breaks them, listing every problem with
how to fix it; a why that names a person is accepted only when its author confirms it,
and the confirmation is stored with the version (`note`).
"""

from __future__ import annotations

import re
from datetime import datetime

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from bot.clock import as_utc
from bot.errors import PayloadInvalid, TransitionRefused
from bot.incidents import log
from bot.incidents import service as incidents
from bot.incidents.models import Incident
from bot.postmortem import followups, improvements
from bot.postmortem.models import Postmortem

LANGS = ("zh", "en")
STATES = ("draft", "final")
HEADING = re.compile(
    r"^(?P<level>#{1,6})\s*(?:5\s*-?\s*whys?\b|5\s*why|five\s+whys?\b|5\s*个\s*为什么)",
    re.IGNORECASE,
)
ANY_HEADING = re.compile(r"^(#{1,6})\s")
WHY = re.compile(r"^\s*\d{1,2}[.)、]\s*(?P<text>.+)$")
ARROW = re.compile(r"\s*(?:->|→|⇒|=>)\s*")
PLACEHOLDER = re.compile(
    r"^(?:[\s._…?？\-—*`()（）]*|.*\b(?:TODO|TBD|fill in)\b.*|.*(?:待填写|待补充|待填).*)$",
    re.IGNORECASE,
)
"""An answer that is not one yet: empty, dots or dashes, `TODO`, `TBD`, `(fill in)`, 待填写."""

_BLAME: list[tuple[re.Pattern[str], str]] = [
    (re.compile(p, re.IGNORECASE), why)
    for p, why in (
        (r"\bhuman[- ]error\b", "blames human error"),
        (r"\boperator[- ]error\b", "blames operator error"),
        (r"\buser[- ]error\b", "blames user error"),
        (r"\b(?:someone|somebody|some one)\b", "stops at someone"),
        (r"\b(?:forgot|forget|forgotten|forgetting)\b", "says a person forgot"),
        (r"\bmistakes?\b", "stops at a person's mistake"),
        (r"\bcareless(?:ly|ness)?\b", "calls a person careless"),
        (r"\bnegligen(?:t|ce)\b", "calls a person negligent"),
        (
            r"\b(?:didn'?t|did not|failed to|does not|doesn'?t) follow\b",
            "says a person did not follow",
        ),
        (r"\b(?:his|her|their) fault\b", "says it is a person's fault"),
        (r"<@[UW][A-Z0-9]+(?:\|[^>]*)?>", "names a person (a Slack mention)"),
        (r"\bslack:[UW][A-Z0-9]+\b", "names a person (slack:U…)"),
        (r"操作失误|误操作", "说是操作失误 (blames an operator's mistake)"),
        (r"人为", "说是人为原因 (blames a person)"),
        (r"某某", "指向某某 (stops at someone)"),
        (r"疏忽", "说是疏忽 (blames negligence)"),
        (r"粗心|大意", "说是粗心 (calls a person careless)"),
        (r"忘记|忘了", "说是忘记 (says a person forgot)"),
        (r"没注意|未注意|没有注意", "说是没注意 (says a person did not notice)"),
        (r"失职", "说是失职 (blames dereliction)"),
    )
]


def _adopt(
    session: Session, incident: Incident, body: str, author: str, now: datetime
) -> list[str]:
    """Add the improvements the document lists that are not follow-ups yet (with their
    owner, deadline and type); the problems of those that cannot be added as written."""
    known = {
        " ".join(item.title.split()).casefold()
        for item in followups.of_incident(session, incident.number)
    }
    problems = []
    for item in improvements.proposed(body, as_utc(incident.opened_at).date()):
        if item.title.casefold() in known:
            continue
        missing = [name for name in ("owner", "deadline") if getattr(item, name) is None]
        if item.problem or missing:
            why = item.problem or f"it has no {' and no '.join(missing)}"
            problems.append(
                f'the improvement "{item.title}" cannot become a follow-up: {why}; write it '
                "like `1. what will change (owner: slack:U0123ABC, deadline: 2026-12-31)`"
            )
            continue
        try:
            followups.add(
                session, incident.number, item.title, type=item.type, owner=item.owner,
                deadline=item.deadline, link=None, actor=log.Actor.human(author), now=now,
                source="postmortem",
            )  # fmt: skip
        except PayloadInvalid as exc:
            problems.append(f'the improvement "{item.title}" cannot become a follow-up: {exc}')
            continue
        known.add(item.title.casefold())
    return problems


def parse_whys(markdown: str) -> list[tuple[str, str]]:
    """The 5-Why section's levels as (question, answer), in order. The section starts at
    a heading like `## 5-Why analysis` or `## 5Why 分析` and ends at the next heading of
    its level or above. A level is a numbered line `1. question -> answer` (or `→`); one
    without an arrow has an empty answer."""
    whys: list[tuple[str, str]] = []
    level: int | None = None
    for line in markdown.splitlines():
        heading = ANY_HEADING.match(line)
        if level is None:
            found = HEADING.match(line)
            if found:
                level = len(found.group("level"))
            continue
        if heading and len(heading.group(1)) <= level:
            break
        item = WHY.match(line)
        if item is None or heading:
            continue
        parts = ARROW.split(item.group("text").strip(), maxsplit=1)
        question = parts[0].strip()
        answer = parts[1].strip() if len(parts) > 1 else ""
        whys.append((question, answer))
    return whys


def has_section(markdown: str) -> bool:
    return any(HEADING.match(line) for line in markdown.splitlines())


def answered(answer: str) -> bool:
    return not PLACEHOLDER.match(answer.strip())


def person_blamed(answer: str) -> str | None:
    """Why `answer` stops at a person rather than a mechanism (`says a person forgot`),
    or None when it does not seem to."""
    for pattern, why in _BLAME:
        if pattern.search(answer):
            return why
    return None


def finalize(
    session: Session,
    number: int,
    body: str,
    *,
    lang: str,
    author: str,
    now: datetime,
    confirm: bool = False,
) -> Postmortem:
    """Store `body` as INC-`number`'s final postmortem (the next version), after checking
    that every open follow-up has an owner and a deadline, that there is at least one,
    that the 5-Why section answers at least one why, and that no answer stops at a person
    (unless `confirm`: then the note on the version records what was confirmed).
    TransitionRefused lists every problem with what to do."""
    lang = _lang(lang)
    incident = incidents.get(session, number, lock=True)
    problems: list[str] = []
    if not body.strip():
        problems.append(
            "the postmortem is empty: write it (or start from `runbook-bot "
            f"postmortem {incident.ref}`) and pass it with --file"
        )
    problems += _adopt(session, incident, body, author, now)
    items = [item for item in followups.of_incident(session, number) if item.status != "cancelled"]
    if not items:
        problems.append(
            f"{incident.ref} has no follow-ups: each improvement is a follow-up with an owner "
            f'and a deadline; add one with `runbook-bot followup add {incident.ref} "what will '
            'change" --owner slack:U0123ABC --deadline 2026-12-31` (or `/incident followup`)'
        )
    for item in items:
        if item.status != "open":
            continue
        if item.owner is None:
            problems.append(
                f"follow-up #{item.id} ({item.title}) has no owner: "
                f"`runbook-bot followup set {item.id} --owner slack:U0123ABC`"
            )
        if item.deadline is None:
            problems.append(
                f"follow-up #{item.id} ({item.title}) has no deadline: "
                f"`runbook-bot followup set {item.id} --deadline 2026-12-31`"
            )
    whys = parse_whys(body)
    if body.strip() and not has_section(body):
        problems.append(
            "there is no 5-Why section: add `## 5-Why analysis` (or `## 5Why 分析`) with "
            "numbered lines `1. why …? → because …`"
        )
    elif body.strip() and not any(answered(answer) for _, answer in whys):
        problems.append(
            "the 5-Why section answers no why: write at least one numbered line "
            "`1. why …? → because …`, the last one ending in a process, system or mechanism"
        )
    unanswered = [str(i) for i, (_, answer) in enumerate(whys, start=1) if not answered(answer)]
    if unanswered and any(answered(answer) for _, answer in whys):
        problems.append(
            f"why {', '.join(unanswered)} {'is' if len(unanswered) == 1 else 'are'} not "
            "answered yet (TODO / 待填写): answer each, or delete the line if the chain ends "
            "earlier"
        )
    blamed = [
        (index, answer, why)
        for index, (_, answer) in enumerate(whys, start=1)
        if answered(answer) and (why := person_blamed(answer))
    ]
    if blamed and not confirm:
        for index, answer, why in blamed:
            problems.append(
                f'why {index} answers "{answer}": it {why}. Blameless: rewrite it as the '
                "process, system or mechanism that let it happen, or pass --confirm "
                "(recorded with the postmortem) if it must stay"
            )
    if problems:
        raise TransitionRefused(
            f"{incident.ref}'s postmortem cannot be final yet:\n"
            + "\n".join(f"- {problem}" for problem in problems)
        )
    note = ""
    if blamed:
        note = f"confirmed by {author}: " + "; ".join(
            f'why {index} ({why}): "{answer}"' for index, answer, why in blamed
        )
    row = _store(session, number, body, state="final", lang=lang, author=author, now=now, note=note)
    log.append(
        session,
        incident,
        at=now,
        actor=log.Actor.human(author),
        type="postmortem.finalized",
        summary=f"{author} finalized the postmortem of {incident.ref} (version {row.version})"
        + (f"; {note}" if note else ""),
        data={
            "version": row.version,
            "lang": lang,
            "followups": [item.id for item in items],
            "whys": len(whys),
            "confirmed": [answer for _, answer, _ in blamed],
            "note": note,
        },
    )
    return row


def save_draft(
    session: Session, number: int, body: str, *, lang: str, author: str, now: datetime
) -> Postmortem:
    """Store `body` as INC-`number`'s next version, a draft (no rules: it is a draft)."""
    lang = _lang(lang)
    incident = incidents.get(session, number, lock=True)
    if not body.strip():
        raise PayloadInvalid("the draft is empty: nothing to store", field="body")
    row = _store(session, number, body, state="draft", lang=lang, author=author, now=now, note="")
    log.append(
        session,
        incident,
        at=now,
        actor=log.Actor.human(author),
        type="postmortem.drafted",
        summary=f"{author} saved a draft of the postmortem of {incident.ref} "
        f"(version {row.version})",
        data={"version": row.version, "lang": lang},
    )
    return row


def latest(session: Session, number: int, state: str | None = None) -> Postmortem | None:
    """INC-`number`'s newest version (of `state` when given), or None."""
    incidents.get(session, number)
    stmt = select(Postmortem).where(Postmortem.incident_number == number)
    if state is not None:
        stmt = stmt.where(Postmortem.state == _state(state))
    return session.scalars(stmt.order_by(Postmortem.version.desc()).limit(1)).one_or_none()


def versions(session: Session, number: int) -> list[Postmortem]:
    """INC-`number`'s stored versions, the first first."""
    incidents.get(session, number)
    stmt = (
        select(Postmortem).where(Postmortem.incident_number == number).order_by(Postmortem.version)
    )
    return list(session.scalars(stmt))


def version(session: Session, number: int, wanted: int) -> Postmortem:
    """One stored version; PayloadInvalid says which exist when it does not."""
    incidents.get(session, number)
    row = session.scalars(
        select(Postmortem).where(Postmortem.incident_number == number, Postmortem.version == wanted)
    ).one_or_none()
    if row is None:
        raise PayloadInvalid(
            f"INC-{number} has no postmortem version {wanted}; "
            f"`runbook-bot postmortem versions INC-{number}` lists them",
            field="version",
        )
    return row


def _store(
    session: Session,
    number: int,
    body: str,
    *,
    state: str,
    lang: str,
    author: str,
    now: datetime,
    note: str,
) -> Postmortem:
    last = session.scalar(
        select(func.max(Postmortem.version)).where(Postmortem.incident_number == number)
    )
    row = Postmortem(
        incident_number=number,
        version=(last or 0) + 1,
        state=state,
        lang=lang,
        body=body,
        author=author,
        created_at=now,
        note=note,
    )
    session.add(row)
    session.flush()
    return row


def _lang(lang: str) -> str:
    if lang not in LANGS:
        raise PayloadInvalid(f"{lang!r} is not a language: write zh or en", field="lang")
    return lang


def _state(state: str) -> str:
    if state not in STATES:
        raise PayloadInvalid(f"{state!r} is not a state: write draft or final", field="state")
    return state

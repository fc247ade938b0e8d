"""Improvements written in the postmortem itself become follow-ups when it is finalized.

The handbook's template lists them as `1. what will change（owner: 张三，7/31）`; the
English draft as `1. what will change (owner: bob, deadline: 2026-12-31)`. `proposed`
reads the section (`## 改进措施…` or `## Improvements…`) into titles with the owner,
deadline and type found in each line's closing parenthesis; `finalize` adds those that are
not follow-ups yet, so an improvement typed into the document is tracked and reminded like
one added from chat.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date

from bot.postmortem.models import TYPES

HEADING = re.compile(r"^(?P<level>#{1,6})\s*(?:improvements?|action items?|改进措施|改进项)", re.I)
ANY_HEADING = re.compile(r"^(#{1,6})\s")
ITEM = re.compile(r"^\s*\d{1,2}[.)、]\s*(?P<text>.+?)\s*$")
TAIL = re.compile(r"\s*[（(](?P<inside>[^（）()]*)[）)]\s*$")
OWNER = re.compile(r"owner\s*[:：]\s*(?P<who>[^,，;；]+)", re.I)
DEADLINE = re.compile(r"(?:deadline|due|截止)\s*[:：]\s*(?P<when>[^,，;；]+)", re.I)
KIND = re.compile(r"(?:type|类型)\s*[:：]\s*(?P<kind>\w+)", re.I)
ISO = re.compile(r"^\s*(\d{4})-(\d{1,2})-(\d{1,2})\s*$")
SHORT = re.compile(r"^\s*(\d{1,2})/(\d{1,2})\s*$")
PLACEHOLDER = re.compile(r"TODO|TBD|待填写|待指定|待定|待补充", re.I)


@dataclass(frozen=True)
class Proposed:
    title: str
    owner: str | None
    deadline: date | None
    type: str
    problem: str | None = None
    """Why it cannot become a follow-up as written (a date that is not one)."""


def proposed(markdown: str, since: date) -> list[Proposed]:
    """The improvements the document lists; `since` (the incident's day) gives a short
    date like `7/31` its year: the first such day on or after it."""
    found: list[Proposed] = []
    level: int | None = None
    for line in markdown.splitlines():
        heading = ANY_HEADING.match(line)
        if level is None:
            if (match := HEADING.match(line)) is not None:
                level = len(match.group("level"))
            continue
        if heading and len(heading.group(1)) <= level:
            break
        item = ITEM.match(line)
        if item is None:
            continue
        text = item.group("text")
        inside = ""
        if (tail := TAIL.search(text)) is not None:
            inside, text = tail.group("inside"), text[: tail.start()]
        title = " ".join(text.replace("&lt;", "<").replace("&gt;", ">").split())
        if not title or PLACEHOLDER.search(title):
            continue
        found.append(_details(title, inside, since))
    return found


def _details(title: str, inside: str, since: date) -> Proposed:
    owner = (m.group("who").strip() if (m := OWNER.search(inside)) else None) or None
    if owner is not None and PLACEHOLDER.search(owner):
        owner = None
    kind = m.group("kind").lower() if (m := KIND.search(inside)) else "prevent"
    when = m.group("when").strip() if (m := DEADLINE.search(inside)) else None
    if when is None:  # the handbook's form: `owner: 张三，7/31` (or a full date there)
        parts = re.split(r"[,，;；]", inside)
        when = next((part for part in parts if SHORT.match(part) or ISO.match(part)), None)
    deadline, problem = None, None
    if when is not None and not PLACEHOLDER.search(when):
        deadline = _date(when, since)
        if deadline is None:
            problem = f"its deadline {when!r} is not a date: write it like 2026-12-31"
    if kind not in TYPES:
        problem = f"its type {kind!r} is none of {', '.join(TYPES)}"
    return Proposed(title, owner, deadline, kind if kind in TYPES else "prevent", problem)


def _date(text: str, since: date) -> date | None:
    try:
        if (iso := ISO.match(text)) is not None:
            return date(int(iso.group(1)), int(iso.group(2)), int(iso.group(3)))
        if (short := SHORT.match(text)) is not None:
            month, day = int(short.group(1)), int(short.group(2))
            guess = date(since.year, month, day)
            return guess if guess >= since else date(since.year + 1, month, day)
    except ValueError:
        return None
    return None

"""ORM classes of the postmortem room: follow-ups (improvement items), stored postmortem
versions, and the weekly digests already posted.

A follow-up is one improvement with one owner and a deadline (the seed: every improvement
has an owner and a deadline); its reminder columns record which reminders went out, so
each is sent once whichever worker sends it.
"""

from __future__ import annotations

from datetime import date, datetime

from sqlalchemy import BigInteger, Date, ForeignKey, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from bot.db import Base

_ID = BigInteger().with_variant(Integer, "sqlite")
TYPES = ("mitigate", "prevent", "process")
STATUSES = ("open", "done", "cancelled")


class Followup(Base):
    __tablename__ = "followups"

    id: Mapped[int] = mapped_column(_ID, primary_key=True, autoincrement=True)
    incident_number: Mapped[int] = mapped_column(ForeignKey("incidents.number"), index=True)
    title: Mapped[str] = mapped_column(String(500))
    type: Mapped[str] = mapped_column(String(16), default="prevent")
    """`mitigate`, `prevent` or `process` (Google SRE's action item types)."""
    owner: Mapped[str | None] = mapped_column(String(200))
    deadline: Mapped[date | None] = mapped_column(Date)
    status: Mapped[str] = mapped_column(String(16), default="open")
    link: Mapped[str | None] = mapped_column(Text)
    """A tracker link (Jira, GitHub issue), optional."""
    source: Mapped[str] = mapped_column(String(32), default="person")
    """Who made it: `person` (chat, CLI), `postmortem` (an improvement written in the final
    postmortem) or `runbook` (e.g. the RMA item)."""
    created_by: Mapped[str] = mapped_column(String(200))
    created_at: Mapped[datetime]
    updated_at: Mapped[datetime]
    closed_at: Mapped[datetime | None]
    reminded_before: Mapped[date | None] = mapped_column(Date)
    """The deadline the day-before reminder was sent for (a moved deadline reminds again)."""
    reminded_due: Mapped[date | None] = mapped_column(Date)
    reminded_overdue: Mapped[date | None] = mapped_column(Date)


class Postmortem(Base):
    """One stored version of an incident's postmortem (Markdown); the last final one is
    the postmortem."""

    __tablename__ = "postmortems"
    __table_args__ = (UniqueConstraint("incident_number", "version", name="uq_postmortem_version"),)

    id: Mapped[int] = mapped_column(_ID, primary_key=True, autoincrement=True)
    incident_number: Mapped[int] = mapped_column(ForeignKey("incidents.number"), index=True)
    version: Mapped[int] = mapped_column(Integer)
    state: Mapped[str] = mapped_column(String(16))
    """`draft` or `final`."""
    lang: Mapped[str] = mapped_column(String(8))
    body: Mapped[str] = mapped_column(Text)
    author: Mapped[str] = mapped_column(String(200))
    created_at: Mapped[datetime]
    note: Mapped[str] = mapped_column(Text, default="")
    """What the author confirmed when finalizing (e.g. a why that names a person)."""


class Digest(Base):
    """A weekly digest that was posted (once per week, keyed by the week's Monday)."""

    __tablename__ = "postmortem_digests"

    week: Mapped[date] = mapped_column(Date, primary_key=True)
    posted_at: Mapped[datetime]
    posted_by: Mapped[str] = mapped_column(String(200))

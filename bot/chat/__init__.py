"""Chat: where people see incidents and decide on them.

The engine does not call chat: every change to an incident is an incident-log entry, and
chat follows the log (`outbox.project` queues the card's post or update and the thread
posts). What chat cannot learn from the log is asked for here, through `Chat`: paging a
person. Every surface implements `Chat` (Slack through the outbox now; the web console
later), and every call only queues rows in the caller's transaction, so a page is sent if
and only if what decided it commits.
"""

from __future__ import annotations

from datetime import datetime
from typing import Protocol

from sqlalchemy.orm import Session

__all__ = ["Chat"]


class Chat(Protocol):
    def page(self, session: Session, incident: int, person: str, text: str, now: datetime) -> None:
        """Call `person` (`slack:U0123ABC`, or a user-group id `slack:S0123`) to the
        incident: a mention in the card's thread and, for a person, a direct message."""
        ...

    def tell(self, session: Session, person: str, text: str, now: datetime) -> None:
        """A direct message to `person` (`slack:U0123ABC`) about no incident in
        particular: the on-call hand-over summary."""
        ...

    def post(self, session: Session, text: str, now: datetime) -> None:
        """A message to the incidents channel about no incident in particular: the weekly
        postmortem digest."""
        ...

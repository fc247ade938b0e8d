"""Runbook documents, stored once per content and shared by every incident that follows them.

An incident freezes its runbook (DESIGN invariant 7) by pointing at a `RunbookVersion`:
the whole document as it was, keyed by the SHA-256 of its canonical JSON. Identical
runbooks share one row however many incidents follow them, so opening an incident writes
a 64-character reference instead of the document (ingest stays cheap during an alert
storm), and a runbook edited without bumping `version` still gets a row of its own: the
digest, not the version number, says exactly which text an incident followed.

Rows are never updated or deleted, but a database can be dropped and restored under a
running bot: so which digests a database holds is never cached in the process (that cache
once made every new incident fail on the foreign key after a restore, until a restart).
`store` looks the digest up in the caller's transaction, the same one that then points an
incident at it, and inserts the document only when it is missing. The parsed `Runbook` of
a digest is cached: it stands for content, not for a row (the same digest is the same
document in every database), so no restore can make it wrong.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from datetime import datetime
from typing import cast

from sqlalchemy import Table, select
from sqlalchemy.orm import Session

from bot.db import insert_new
from bot.errors import StepNotFound
from bot.runbooks.loader import LoadedRunbook
from bot.runbooks.models import RunbookVersion
from bot.runbooks.schema import Runbook

PARSED_MAX = 128
"""Parsed runbooks kept per process; a catalog holds a handful, each a few versions."""

_lock = threading.Lock()
_parsed: OrderedDict[str, Runbook] = OrderedDict()


def store(session: Session, loaded: LoadedRunbook, now: datetime) -> str:
    """Make sure the runbook's document is stored, inside the caller's transaction; its
    digest. One primary-key lookup when it is there already (the document is sent only
    when it is not)."""
    key = loaded.digest
    held = select(RunbookVersion.digest).where(RunbookVersion.digest == key)
    if session.scalar(held) is not None:
        return key
    values = {
        "digest": key,
        "runbook_id": loaded.runbook.id,
        "version": loaded.runbook.version,
        "source": str(loaded.path)[:500],
        "document": loaded.document,
        "stored_at": now,
    }
    insert_new(session, cast(Table, RunbookVersion.__table__), values, index_elements=["digest"])
    return key


def runbook(session: Session, key: str) -> Runbook:
    """The runbook stored under `key`, parsed once per process."""
    with _lock:
        found = _parsed.get(key)
        if found is not None:
            _parsed.move_to_end(key)
            return found
    row = session.get(RunbookVersion, key)
    if row is None:
        raise StepNotFound(f"no runbook document is stored under digest {key[:12]}")
    parsed = Runbook.model_validate(row.document)
    with _lock:
        _parsed[key] = parsed
        while len(_parsed) > PARSED_MAX:
            _parsed.popitem(last=False)
    return parsed

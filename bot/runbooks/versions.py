"""Runbook documents, stored once per content and shared by every incident that follows them.

An incident freezes its runbook (DESIGN invariant 7) by pointing at a `RunbookVersion`:
the whole document as it was, keyed by the SHA-256 of its canonical JSON. Identical
runbooks share one row however many incidents follow them, so opening an incident writes
a 64-character reference instead of the document (ingest stays cheap during an alert
storm), and a runbook edited without bumping `version` still gets a row of its own: the
digest, not the version number, says exactly which text an incident followed.

Rows are never updated or deleted. That makes two caches safe: which digests a database
already holds (filled only after a committed insert), and the parsed `Runbook` of a digest
(the same content everywhere, so the cache is shared by every database in the process).
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from datetime import datetime
from typing import cast

from sqlalchemy import Engine, Table
from sqlalchemy.orm import Session

from bot.db import Database, insert_new
from bot.errors import StepNotFound
from bot.runbooks.loader import LoadedRunbook
from bot.runbooks.models import RunbookVersion
from bot.runbooks.schema import Runbook

PARSED_MAX = 128
"""Parsed runbooks kept per process; a catalog holds a handful, each a few versions."""

_lock = threading.Lock()
_stored: weakref.WeakKeyDictionary[Engine, set[str]] = weakref.WeakKeyDictionary()
_parsed: OrderedDict[str, Runbook] = OrderedDict()


def store(session: Session, loaded: LoadedRunbook, now: datetime) -> str:
    """Make sure the runbook's document is stored, inside the caller's transaction; its
    digest. Free once this database is known to hold it (see `ensure`)."""
    key, doc = loaded.digest, loaded.document
    bind = session.get_bind()
    if isinstance(bind, Engine) and _holds(bind, key):
        return key
    values = {
        "digest": key,
        "runbook_id": loaded.runbook.id,
        "version": loaded.runbook.version,
        "source": str(loaded.path)[:500],
        "document": doc,
        "stored_at": now,
    }
    insert_new(session, cast(Table, RunbookVersion.__table__), values, index_elements=["digest"])
    return key


def ensure(db: Database, loaded: LoadedRunbook, now: datetime) -> str:
    """Store the runbook's document in its own committed transaction (once per process and
    database), so that freezing it onto incidents later writes only its digest."""
    key = loaded.digest
    if _holds(db.engine, key):
        return key
    with db.transaction() as session:
        store(session, loaded, now)
    with _lock:
        _stored.setdefault(db.engine, set()).add(key)
    return key


def _holds(engine: Engine, key: str) -> bool:
    with _lock:
        return key in _stored.get(engine, ())


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

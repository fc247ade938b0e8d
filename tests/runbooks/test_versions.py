"""Runbook documents are stored once per content and referenced by digest; migration 0003
moves the copies earlier incidents held into that table, and back on downgrade."""

from __future__ import annotations

import hashlib
import json
import textwrap
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy import func, select

from bot import migrations
from bot.db import Database
from bot.runbooks import engine
from bot.runbooks.loader import parse
from bot.runbooks.models import IncidentRunbook, RunbookVersion
from tests.runbooks.rig import TWO_STEPS, Rig
from tests.support.databases import _admin, _pg_url, require_postgres


def _versions(db: Database) -> list[RunbookVersion]:
    with db.session() as session:
        return list(session.scalars(select(RunbookVersion).order_by(RunbookVersion.stored_at)))


def test_incidents_following_the_same_runbook_share_one_stored_document(rig: Rig) -> None:
    rig.write(TWO_STEPS)
    first, second = rig.fire(), rig.fire()

    stored = _versions(rig.db)
    assert [(v.runbook_id, v.version) for v in stored] == [("gpu-xid", 1)]
    one, two = rig.frozen(first), rig.frozen(second)
    assert one is not None and two is not None
    assert one.runbook_digest == two.runbook_digest == stored[0].digest
    assert [step["id"] for step in stored[0].document["steps"]] == ["status", "cordon"]
    assert stored[0].source.endswith("rb.yaml")
    matched = [e for e in rig.log(first) if e.type == "runbook.matched"]
    assert matched[0].data["digest"] == stored[0].digest


def test_a_runbook_edited_without_a_new_version_is_stored_apart_by_its_digest(rig: Rig) -> None:
    rig.write(TWO_STEPS)
    before = rig.fire()
    rig.write(TWO_STEPS.replace("title: Cordon the node", "title: Cordon it now"))
    after = rig.fire()

    stored = _versions(rig.db)
    assert [(v.runbook_id, v.version) for v in stored] == [("gpu-xid", 1), ("gpu-xid", 1)]
    assert stored[0].digest != stored[1].digest
    with rig.db.session() as session:
        _, old = engine.frozen_runbook(session, before)
        _, new = engine.frozen_runbook(session, after)
    assert (engine.text(old.steps[1].title), engine.text(new.steps[1].title)) == (
        "Cordon the node",
        "Cordon it now",
    )


def test_the_digest_is_the_content_not_the_file_or_the_key_order() -> None:
    text = textwrap.dedent(TWO_STEPS)
    loaded = parse(text, file="rb.yaml")
    moved = parse(text, file="elsewhere/gpu.yaml")
    reordered = parse(text.replace("version: 1\n", "") + "version: 1\n", file="rb.yaml")
    edited = parse(text.replace("Node status", "Node state"), file="rb.yaml")

    canonical = json.dumps(loaded.document, sort_keys=True, separators=(",", ":"))
    assert loaded.digest == hashlib.sha256(canonical.encode()).hexdigest()
    assert moved.digest == reordered.digest == loaded.digest
    assert edited.digest != loaded.digest


# --- migration 0003 -------------------------------------------------------------------

DOC = {"id": "gpu-xid", "version": 1, "title": "t", "steps": [{"id": "look", "manual": "do"}]}
OTHER = {**DOC, "version": 2}


@pytest.fixture(params=["sqlite", "postgresql"])
def empty_db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Database]:
    """A database with no schema at all, to migrate step by step."""
    if request.param == "sqlite":
        database = Database(f"sqlite:///{tmp_path / 'old.db'}")
        yield database
        database.dispose()
        return
    require_postgres()
    name = f"rbb_mig_{uuid.uuid4().hex[:8]}"
    _admin(f"CREATE DATABASE {name}")
    database = Database(_pg_url(name))
    try:
        yield database
    finally:
        database.dispose()
        _admin(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def _incident(number: int, at: datetime) -> dict[str, Any]:
    return {
        "number": number,
        "title": f"incident {number}",
        "severity": "critical",
        "status": "open",
        "group_key": f"g{number}",
        "group_hash": f"{number:064d}",
        "receiver": "bot",
        "group_labels": {},
        "common_labels": {},
        "external_url": "",
        "truncated_alerts": 0,
        "reopen_count": 0,
        "opened_at": at,
        "updated_at": at,
        "log_seq": 0,
        "log_head": "0" * 64,
    }


def _frozen_0002(number: int, document: dict[str, Any], at: datetime) -> dict[str, Any]:
    return {
        "incident_number": number,
        "runbook_id": document["id"],
        "runbook_version": document["version"],
        "source": f"/runbooks/v{document['version']}.yaml",
        "document": document,
        "facts": {"node": f"gpu-node-{number:02d}"},
        "labels": {},
        "annotations": {},
        "matched_at": at,
    }


def _run(number: int, at: datetime) -> dict[str, Any]:
    return {
        "incident_number": number,
        "step_id": "look",
        "attempt": 1,
        "state": "awaiting_approval",
        "kind": "manual",
        "params": {},
        "params_hash": "0" * 64,
        "approvals_required": 0,
        "proposed_at": at,
        "summary": "",
    }


def test_migration_0003_moves_each_frozen_document_into_one_stored_row(
    empty_db: Database,
) -> None:
    at = datetime(2026, 11, 29, 22, 0, tzinfo=UTC)
    migrations.upgrade(empty_db, "0002")
    meta = sa.MetaData()
    meta.reflect(empty_db.engine, only=["incidents", "incident_runbooks", "step_runs"])
    incidents, frozen = meta.tables["incidents"], meta.tables["incident_runbooks"]
    with empty_db.engine.begin() as conn:
        conn.execute(incidents.insert(), [_incident(n, at) for n in (1, 2, 3)])
        conn.execute(
            frozen.insert(),
            [_frozen_0002(1, DOC, at), _frozen_0002(2, DOC, at), _frozen_0002(3, OTHER, at)],
        )
        conn.execute(meta.tables["step_runs"].insert(), [_run(1, at), _run(3, at)])

    migrations.upgrade(empty_db)

    with empty_db.session() as session:
        stored = {v.version: v for v in session.scalars(select(RunbookVersion))}
        rows = {r.incident_number: r for r in session.scalars(select(IncidentRunbook))}
        assert set(stored) == {1, 2}
        assert stored[1].document == DOC and stored[2].document == OTHER
        assert stored[1].source == "/runbooks/v1.yaml"
        assert rows[1].runbook_digest == rows[2].runbook_digest == stored[1].digest
        assert rows[3].runbook_digest == stored[2].digest
        assert rows[3].facts == {"node": "gpu-node-03"}
        # Incident 2 had no step run yet: it stays in the worker's backlog.
        assert {n: r.proposed_at for n, r in rows.items()} == {1: at, 2: None, 3: at}
        canonical = json.dumps(DOC, sort_keys=True, separators=(",", ":")).encode()
        assert stored[1].digest == hashlib.sha256(canonical).hexdigest()

    migrations.downgrade(empty_db, "0002")  # and back: each incident holds its copy again
    meta = sa.MetaData()
    meta.reflect(empty_db.engine, only=["incident_runbooks"])
    frozen = meta.tables["incident_runbooks"]
    with empty_db.engine.connect() as conn:
        back = {row.incident_number: row for row in conn.execute(select(frozen))}
        tables = sa.inspect(conn).get_table_names()
    assert {n: (r.document, r.source) for n, r in back.items()} == {
        1: (DOC, "/runbooks/v1.yaml"),
        2: (DOC, "/runbooks/v1.yaml"),
        3: (OTHER, "/runbooks/v2.yaml"),
    }
    assert "runbook_versions" not in tables


def test_migration_0003_on_a_database_without_incidents(empty_db: Database) -> None:
    migrations.upgrade(empty_db)

    with empty_db.session() as session:
        assert session.scalar(select(func.count()).select_from(RunbookVersion)) == 0
    assert migrations.current(empty_db) == migrations.head()

"""`runbook-bot tokens`: a token is printed once, listed without its secret, stored only as
a hash, and once revoked decides nothing on the API."""

from __future__ import annotations

import hashlib
from collections.abc import Callable

import httpx
import pytest
from sqlalchemy import text

from bot.db import Database
from tests.support.cli import Run


def test_tokens_are_shown_once_stored_hashed_listed_and_revoked(
    run: Run,
    db: Database,
    db_url: str,
    monkeypatch: pytest.MonkeyPatch,
    serve: Callable[..., httpx.Client],
) -> None:
    monkeypatch.setenv("RUNBOOK_BOT_DATABASE_URL", db_url)
    monkeypatch.setenv("RUNBOOK_BOT_PEOPLE", '{"alice": {"roles": ["responder"]}}')

    unknown = run("tokens", "create", "--person", "mallory")
    code, secret, note = run("tokens", "create", "--person", "alice", "--name", "laptop")
    secret = secret.strip()
    listed = run("tokens", "list")
    client = serve(people={"alice": {"roles": ["responder"]}})
    auth = {"Authorization": f"Bearer {secret}"}
    before = client.post("/api/incidents/INC-1/steps/x/approve", json={}, headers=auth)
    revoked = run("tokens", "revoke", note.split("#")[1].split()[0])
    after = client.post("/api/incidents/INC-1/steps/x/approve", json={}, headers=auth)
    with db.session() as session:
        stored = session.execute(text("SELECT secret_hash, revoked_at FROM api_tokens")).all()

    assert unknown[0] == 2 and "no person 'mallory' in the settings; known: alice" in unknown[2]
    assert code == 0 and secret.startswith("rbt_") and len(secret) == 47
    assert "decides as alice; it is shown only now" in note
    assert listed[0] == 0 and "alice" in listed[1] and "laptop" in listed[1]
    assert secret not in listed[1] and secret[4:] not in listed[1]
    assert before.status_code == 404  # authenticated: the incident is what is missing
    assert revoked[0] == 0 and "revoked" in revoked[1]
    assert after.status_code == 401 and "unknown or revoked" in after.json()["error"]
    assert [row[0] for row in stored] == [hashlib.sha256(secret.encode()).hexdigest()]
    assert stored[0][1] is not None

"""The alert storm benchmark's small variant, end to end: the simulated fleet, the real
Alertmanager, `runbook-bot serve` on PostgreSQL. A row of 8, a leaf switch of 4 and an
NFS server of 20 fail and 5 XIDs land within 10 s: one incident per failure domain, one
per XID (its own or merged), one card and one page each. Counts only, never times."""

from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

from bench import results as results_file
from tests.support.alertmanager import require_binary
from tests.support.databases import PG_ADMIN, require_postgres

ROOT = Path(__file__).resolve().parents[1]


def figures(path: Path) -> dict[str, float]:
    data: dict[str, Any] = results_file.load(path)
    return {m["name"]: m["value"] for m in data["metrics"]}


def test_the_small_storm_is_one_incident_per_failure_with_one_card_and_one_page_each(
    tmp_path: Path,
) -> None:
    require_binary()
    require_postgres()
    database = f"runbook_bot_storm_{uuid.uuid4().hex[:8]}_bench"
    url = PG_ADMIN.rsplit("/", 1)[0].replace("postgresql://", "postgresql+psycopg://", 1)
    path = tmp_path / "storm.json"
    command = [sys.executable, "bench/storm.py", "--small", "--json", str(path)]
    command += ["--database-url", f"{url}/{database}"]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=180)

    assert done.returncode == 0, done.stdout + done.stderr
    found = figures(path)
    report = done.stdout
    assert found["row incidents standing"] == 1, report
    assert found["leaf incidents standing"] == 1, report
    assert found["nfs incidents standing"] == 1, report
    assert found["xid incidents"] == 5, report  # each its own incident or merged into one
    assert found["incidents off target"] == 0, report
    assert found["incidents without a card"] == 0, report
    assert found["most cards for one incident"] == 1, report
    assert found["incidents without a page"] == 0, report
    assert found["most pages for one incident"] == 1, report
    assert found["most cards for one failure domain"] == 1, report  # merged ones too
    assert found["most pages for one failure domain"] == 1, report
    assert found["cards"] == found["standing incidents"], report
    assert found["pages"] == found["standing incidents"], report

"""A test rig for the engine: runbooks written in a temporary directory, incidents opened
through the real ingest, and readers for step runs and the incident log."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

from bot.alerts import ingest
from bot.alerts.payload import WebhookPayload
from bot.alerts.results import IngestResult
from bot.clock import FrozenClock
from bot.config import Settings, load_settings
from bot.db import Database
from bot.incidents import log
from bot.incidents.models import LogEntry
from bot.people import Channel, Decider, Directory, Person
from bot.runbooks import catalog as catalogs
from bot.runbooks import engine, service
from bot.runbooks.catalog import Catalog
from bot.runbooks.models import IncidentRunbook, StepApproval, StepRun
from bot.worker import Worker
from tests.support.payloads import alert, notification

ROLES = {
    "alice": ["responder"],
    "bob": ["responder"],
    "carol": ["second_line", "admin"],
}
"""People who may decide; `mallory` has no role."""

TWO_STEPS = """\
    id: gpu-xid
    title: Single GPU fault
    version: 1
    match: {alerts: [GPUXIDError]}
    facts:
      node: "{{ labels.Hostname }}"
    steps:
      - id: status
        title: Node status
        action: k8s.node_status
        with: {node: "{{ facts.node }}"}
      - id: cordon
        title: Cordon the node
        action: k8s.cordon
        with: {node: "{{ facts.node }}", reason: "XID on {{ facts.node }}"}
"""


class Rig:
    def __init__(self, db: Database, clock: FrozenClock, tmp: Path, **overrides: Any) -> None:
        self.db = db
        self.clock = clock
        self.dir = tmp / "runbooks"
        self.dir.mkdir()
        options: dict[str, Any] = {"roles": ROLES, "runbooks_dir": self.dir}
        options.update(overrides)
        self.settings: Settings = load_settings(database_url=db.url, **options)
        self._catalog: Catalog | None = None
        self._fired = 0

    def write(self, text: str, name: str = "rb.yaml") -> Path:
        path = self.dir / name
        path.write_text(textwrap.dedent(text), encoding="utf-8")
        self._catalog = None
        return path

    def catalog(self) -> Catalog:
        if self._catalog is None:
            self._catalog = catalogs.load(self.settings)
        return self._catalog

    def ingest(self, body: dict[str, Any]) -> IngestResult:
        """Post one notification body through the real ingest, as the webhook does."""
        return ingest.ingest(
            self.db,
            WebhookPayload.model_validate(body),
            clock=self.clock,
            reopen_window=self.settings.reopen_window,
            catalog=self.catalog(),
        )

    def fire(self, **labels: Any) -> int:
        """Open an incident with one firing alert (payloads.alert keywords); its number."""
        self._fired += 1
        labels.setdefault("host", f"gpu-node-{self._fired:02d}")
        body = notification([alert(**labels)])
        result = ingest.ingest(
            self.db,
            WebhookPayload.model_validate(body),
            clock=self.clock,
            reopen_window=self.settings.reopen_window,
            catalog=self.catalog(),
        )
        assert result.opened
        # As in `serve`: the webhook wakes the worker, which proposes the first steps.
        Worker(self.db, self.settings, self.clock).propose()
        return result.incident

    def runs(self, number: int) -> dict[str, StepRun]:
        with self.db.session() as session:
            return engine.latest_runs(session, number)

    def all_runs(self, number: int, step: str) -> list[StepRun]:
        with self.db.session() as session:
            return [r for r in engine.runs_of(session, number) if r.step_id == step]

    def states(self, number: int) -> dict[str, str]:
        return {step: run.state for step, run in self.runs(number).items()}

    def frozen(self, number: int) -> IncidentRunbook | None:
        with self.db.session() as session:
            return session.get(IncidentRunbook, number)

    def log(self, number: int) -> list[LogEntry]:
        with self.db.session() as session:
            return log.entries(session, number)

    def types(self, number: int) -> list[str]:
        return [entry.type for entry in self.log(number)]

    def approvals(self, number: int, step: str) -> list[str]:
        run = self.runs(number)[step]
        with self.db.session() as session:
            rows = session.query(StepApproval).filter_by(step_run_id=run.id).all()
            return sorted(row.approver for row in rows)

    def who(self, person: str, channel: Channel = "cli") -> Decider:
        """`person` as the people directory knows them (no roles when it does not),
        deciding through `channel`."""
        found = Directory(self.settings).resolve("person", person) or Person(person, person)
        return Decider(found, channel, f"{channel}:{person}")

    def approve(self, number: int, step: str, person: str, **extra: Any) -> StepRun:
        return service.approve(
            self.db,
            number,
            step,
            who=self.who(person),
            clock=self.clock,
            settings=self.settings,
            **extra,
        )

    def skip(
        self, number: int, step: str, person: str, note: str | None = None, **extra: Any
    ) -> StepRun:
        return service.skip(
            self.db,
            number,
            step,
            who=self.who(person),
            clock=self.clock,
            settings=self.settings,
            note=note,
            **extra,
        )

    def done(self, number: int, step: str, person: str, note: str, **extra: Any) -> StepRun:
        return service.complete(
            self.db,
            number,
            step,
            who=self.who(person),
            clock=self.clock,
            settings=self.settings,
            note=note,
            **extra,
        )

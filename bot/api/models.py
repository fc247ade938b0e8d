"""The HTTP API's answers as pydantic models: what `bot.web` sends and what the OpenAPI
document (`bot.openapi`) describes, one definition for both.

Every model forbids extra keys, so a view that grows a field the model does not know
fails when the answer is built instead of drifting from the document.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

from bot.incidents.lifecycle import AlertStatus, Severity, Status
from bot.runbooks.steps import StepState

REF = Field(pattern=r"^INC-[0-9]+$", description="the incident, as INC-42")


class Answer(BaseModel):
    model_config = ConfigDict(extra="forbid")

    OMIT_NONE: ClassVar[bool] = False
    """Leave unset optional keys out of the answer (an error's `field`)."""

    def wire(self) -> dict[str, Any]:
        """The JSON-ready dict sent on the wire."""
        return self.model_dump(mode="json", exclude_none=self.OMIT_NONE)


class Error(Answer):
    """What every refusal answers: what was wrong and what to do."""

    OMIT_NONE = True

    error: str
    field: str | None = Field(None, description="the one field to blame, when there is one")


class AlertCounts(Answer):
    new: int
    repeat: int
    resolved: int
    refired: int


class IngestResult(Answer):
    """A webhook notification stored: the incident it went to and what it did there."""

    incident: str = REF
    opened: bool
    reopened: bool
    resolved: bool
    alerts: AlertCounts


class Incident(Answer):
    id: str = Field(pattern=r"^INC-[0-9]+$")
    number: int = Field(ge=1)
    title: str
    severity: Severity
    status: Status
    owner: str | None
    disposition: str | None
    group_key: str
    group_labels: dict[str, str]
    receiver: str
    truncated_alerts: int
    reopen_count: int
    opened_at: datetime
    acknowledged_at: datetime | None
    acknowledged_by: str | None
    resolved_at: datetime | None
    resolved_by: str | None
    closed_at: datetime | None
    reopened_at: datetime | None
    alerts_cleared_at: datetime | None
    updated_at: datetime
    drill: str | None
    scope: Literal["node", "domain"] = Field(
        description="`domain`: many nodes of one failure domain; `node`: one node (or none)"
    )
    domain: str | None = Field(description="a domain incident's domain, e.g. `row/a`")
    merged_into: str | None = Field(
        pattern=r"^INC-[0-9]+$", description="the incident this one was merged into"
    )


class IncidentList(Answer):
    incidents: list[Incident]


class Alert(Answer):
    fingerprint: str
    status: AlertStatus
    alertname: str
    severity: Severity
    labels: dict[str, str]
    annotations: dict[str, str]
    starts_at: datetime
    ends_at: datetime | None
    generator_url: str
    first_received_at: datetime
    last_received_at: datetime
    receive_count: int = Field(ge=1)
    symptom: str | None = Field(
        description="the runbook this alert matched, when it joined its cause's incident "
        "as a symptom"
    )


class Actor(Answer):
    kind: str
    id: str
    name: str


class LogEntry(Answer):
    seq: int = Field(ge=1)
    at: datetime
    actor: Actor
    type: str
    summary: str
    data: dict[str, Any]
    hash: str = Field(pattern=r"^[0-9a-f]{64}$")


class IncidentDetail(Incident):
    """One incident with its alerts and its log."""

    alerts: list[Alert]
    log: list[LogEntry]


class StepProgress(Answer):
    """A step over many nodes: the set ("32 nodes of row/a") and its nodes by state."""

    set: str
    total: int
    succeeded: int
    running: int
    failed: int
    left: int
    failed_nodes: list[str]
    nodes: dict[str, dict[str, Any]]
    """Each node's `state` (left, running, succeeded, failed) and `summary`."""
    stopped_by: str | None


class StepRow(Answer):
    """One step of the incident's runbook and where it stands (`not_reached`: never
    proposed yet)."""

    step: str
    title: str
    state: StepState | Literal["not_reached"]
    attempt: int
    kind: str
    action: str | None
    params: dict[str, Any]
    params_hash: str
    approvals: int
    approvals_required: int
    approvers: list[str]
    expires_at: str | None
    not_before: str | None
    actor: str | None
    summary: str
    run_id: int | None
    progress: StepProgress | None = None
    """A step over many nodes (`for_each`): its set and its nodes counted."""
    dependents: list[str] = Field(
        default_factory=list,
        description="later steps that read this one: skipping it skips them too",
    )


class Steps(Answer):
    incident: str = REF
    runbook: str = Field(description="the runbook's id and version frozen on the incident")
    steps: list[StepRow]


class StepAnswer(Answer):
    incident: str = REF
    step: str
    attempt: int
    state: StepState
    actor: str | None


class Approved(StepAnswer):
    """Where an approved step stands now."""

    approvals_required: int
    params_hash: str


class Decided(StepAnswer):
    """Where a skipped, done or cancelled step stands now."""

    summary: str


class SecondLinePaged(Answer):
    """Who the second level of the incident's escalation reaches, paged now."""

    incident: str = REF
    names: list[str] = Field(description="who it reaches, as people are shown")
    level: int = Field(description="the escalation level paged, 1-based (2)")
    paged_at: str = Field(description="when (ISO 8601, UTC)")


class Owned(Answer):
    incident: str = REF
    owner: str
    status: str = Field(description="the incident's status now (acknowledged, unless told not)")


class Alive(Answer):
    status: Literal["ok"]


class Ready(Answer):
    status: Literal["ready"]


class Unready(Answer):
    """Not ready, and why; `check` names the check that failed when it is not storage."""

    OMIT_NONE = True

    status: Literal["unavailable"]
    check: str | None = None
    reason: str

"""What a chat surface shows, as plain data: built from the database by `bot.chat.cards`,
rendered by each surface (Slack Block Kit in `bot.chat.slack.blocks`, the web console).

Nothing here knows Slack; nothing here reads the database. Buttons carry only ids: a step
button carries its step-run id, an incident button the incident number; whatever a click
acts on is read from the database again when the click arrives.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime


@dataclass(frozen=True)
class EachView:
    """A step over many nodes (`for_each`): its set and its nodes counted."""

    set: str
    """`32 nodes of row/a`."""
    total: int
    succeeded: int = 0
    running: int = 0
    failed: int = 0
    left: int = 0
    failed_nodes: tuple[str, ...] = ()
    nodes: tuple[str, ...] = ()
    """Every node of the set, in order: shown on demand, never in a header."""
    count: int | None = None
    """The count an approval names ("Cordon 32 nodes of row/a"); None when it needs none."""
    stopped_by: str | None = None
    states: tuple[str, ...] = ()
    """Each node's state, in the order of `nodes` (`succeeded`, `running`, `failed`,
    `left`, ...): what `wording.grid` draws; empty when not known."""

    @property
    def counted(self) -> str:
        """`done 12 · running 4 · failed 1 · left 15`."""
        return (
            f"done {self.succeeded} · running {self.running} · failed {self.failed} · "
            f"left {self.left}"
        )


@dataclass(frozen=True)
class StepView:
    """One step of the incident's runbook, as the card shows it."""

    step: str
    """The step id (`cordon`)."""
    title: str
    state: str
    """A `StepState` value, or `not_reached` for a step not proposed yet."""
    kind: str
    """`action` or `manual`."""
    run_id: int | None = None
    """The newest attempt's step-run id; what Approve/Skip/Done buttons carry."""
    attempt: int = 0
    action: str | None = None
    """The action name (`k8s.drain`), None for a manual step."""
    risk: str | None = None
    """`read`, `change` or `disruptive`; None for a manual step."""
    params: dict[str, object] = field(default_factory=dict)
    """The rendered parameters (shown, never put in a button)."""
    approvals: int = 0
    approvals_required: int = 0
    approvers: tuple[str, ...] = ()
    expires_at: datetime | None = None
    summary: str = ""
    """One line on where it stands (the run's summary: result, error, what it waits for)."""
    targets: tuple[str, ...] = ()
    """What a disruptive step acts on (node names, `gpu-node-02 GPU 5`), for the confirm
    dialog: a person confirms the exact targets, not a step id."""
    each: EachView | None = None
    """A step over many nodes: its set and progress; None for a step of one action."""
    dependents: tuple[str, ...] = ()
    """Step ids of later steps that read this one's result (`when`/`with`/`for_each`),
    transitively, in runbook order: what skipping this step also skips."""
    dependent_titles: tuple[str, ...] = ()
    """The titles of `dependents`, in the same order: what a person reads."""

    @property
    def awaiting(self) -> bool:
        """Waiting for a person's decision: the card shows its buttons."""
        return self.state == "awaiting_approval"

    @property
    def reproposable(self) -> bool:
        """Its newest run ended without doing its work (skipped, failed, timed out,
        expired, cancelled): a person with a role may propose it again."""
        return self.run_id is not None and self.state in REPROPOSABLE

    @property
    def running(self) -> bool:
        """Approved and under way (or about to start): it shows progress, not buttons."""
        return self.state in ("approved", "running")

    @property
    def folded(self) -> bool:
        """Skipped, or not reached yet: folded into one line under the decision."""
        return self.state in ("skipped", "not_reached")

    @property
    def two_person(self) -> bool:
        """Needs two (or more) different people."""
        return self.approvals_required > 1

    def approved_by(self, person: str | None) -> bool:
        """`person` has already approved this attempt (a second click would be refused)."""
        return person is not None and person in self.approvers

    @property
    def stoppable(self) -> bool:
        """A step over many nodes running with nobody having stopped it: the card shows
        its Stop the rest button."""
        return self.state == "running" and self.each is not None and self.each.stopped_by is None

    @property
    def approve_label(self) -> str:
        """`Approve`, or for a change to many nodes what it does: `Cordon 32 nodes of row/a`."""
        if self.each is None or self.each.count is None:
            return "Approve"
        verb = (self.action or self.step).rsplit(".", 1)[-1].replace("_", " ")
        return f"{verb[:1].upper()}{verb[1:]} {self.each.set}"


REPROPOSABLE = frozenset({"skipped", "failed", "timed_out", "expired", "cancelled"})
"""The states of a newest run a person may propose again."""


OPEN_STATES = frozenset({"proposed", "awaiting_approval", "approved", "running"})
"""A step in one of these is still to be decided or done."""


@dataclass(frozen=True)
class SecondLineView:
    """Who the incident's next level pages (level 2 of its policy), for "waiting for one
    more (second line: Bob, paged 03:14:07 UTC)" and the Page the second line now button."""

    names: tuple[str, ...]
    """Display names of the people (or group) that level pages."""
    level: int
    """The level, counted from 1 (2 for the second line)."""
    paged_at: datetime | None = None
    """When that level was last paged about this incident; None: not yet."""


@dataclass(frozen=True)
class EscalationView:
    """Where the incident's escalation stands, for one line of its card. Levels are
    numbered from 1 here, as people count them."""

    level: int
    """The level paged last (1 = the first); 0 when nobody has been paged yet."""
    levels: int
    round: int = 1
    """Which time round the ladder (1 = the first climb)."""
    paged_at: datetime | None = None
    next_kind: str | None = None
    """`level` (the next rung), `ack` (acknowledged: the re-page), `resume` (silenced: the
    ladder resumes) or None (no timer is pending)."""
    next_at: datetime | None = None
    next_level: int | None = None
    silenced_until: datetime | None = None
    working_hours_only: bool = False
    """The ladder pages only in working hours (the next page waits for them)."""


@dataclass(frozen=True)
class CardView:
    """One incident's card."""

    number: int
    ref: str
    """`INC-7`."""
    title: str
    severity: str
    """`critical`, `warning` or `info`."""
    status: str
    """`open`, `acknowledged`, `resolved` or `closed`."""
    opened_at: datetime
    now: datetime
    """When the card was rendered (elapsed time is `now - opened_at`)."""
    owner: str | None = None
    acknowledged_by: str | None = None
    resolved_at: datetime | None = None
    resolved_by: str | None = None
    facts: dict[str, str] = field(default_factory=dict)
    """Facts of the runbook (node, gpu, xid, ...), in the runbook's order."""
    runbook: str | None = None
    """`gpu-xid v3`, or None when no runbook matched."""
    steps: tuple[StepView, ...] = ()
    alerts_firing: int = 0
    alerts_total: int = 0
    alert_names: tuple[str, ...] = ()
    """Distinct alertnames of the incident, most frequent first."""
    nodes: tuple[str, ...] = ()
    """Distinct node names the incident's alerts name (a 64-GPU node gives one)."""
    disposition: str | None = None
    url: str | None = None
    """A link to the incident (the console page), when the bot knows its public URL."""
    escalation: EscalationView | None = None
    """None when the incident's severity never pages (or it predates escalation)."""
    domain: str | None = None
    """A domain incident's failure domain (`row/a`); None for a node incident."""
    merged_into: str | None = None
    """`INC-4` when this incident was merged into another."""
    symptoms: tuple[tuple[str, int], ...] = ()
    """(runbook, alerts) attached as symptoms of this incident's cause, most first."""
    second_line: SecondLineView | None = None
    """Who the next level pages; None when the policy has none or the incident never pages."""

    @property
    def active(self) -> bool:
        return self.status in ("open", "acknowledged")

    @property
    def decision(self) -> StepView | None:
        """The one step waiting for a person's decision (the first, in runbook order), or
        None: nothing waits, or the incident is over."""
        if not self.active:
            return None
        return next((step for step in self.steps if step.awaiting), None)

    @property
    def running_step(self) -> StepView | None:
        """The step under way (approved or running), or None."""
        return next((step for step in self.steps if step.running), None)

    @property
    def folded(self) -> tuple[StepView, ...]:
        """Skipped and not-reached steps: one line that opens on demand."""
        return tuple(step for step in self.steps if step.folded)

    @property
    def history(self) -> tuple[StepView, ...]:
        """Every other step (ended, or a further one waiting): the card's collapsed
        history, in runbook order."""
        shown = (self.decision, self.running_step)
        return tuple(
            step for step in self.steps if not step.folded and all(step is not s for s in shown)
        )

    @property
    def proposable_again(self) -> tuple[StepView, ...]:
        """The steps to offer Propose again on, in runbook order: reproposable, not skipped
        by the bot because their condition was false, and before any step still open (a
        later step is decided again in its turn once the earlier one is)."""
        found = []
        for step in self.steps:
            if step.state in OPEN_STATES:
                break
            if step.reproposable and "`when:" not in step.summary:
                found.append(step)
        return tuple(found)

    def waiting_for(self, person: str | None) -> str:
        """Whether a decision waits for `person`: `you` (a step waits and they have not
        approved it), `second` (they approved; it waits for someone else), `none`."""
        step = self.decision
        if step is None:
            return "none"
        return "second" if step.approved_by(person) else "you"


@dataclass(frozen=True)
class LogLine:
    """One incident-log entry, for the card's thread."""

    seq: int
    at: datetime
    actor: str
    """Who: a person's id (`slack:U0123ABC`, `alice`), `alertmanager`, `runbook-bot`."""
    type: str
    """`alert.fired`, `step.approved`, ..."""
    summary: str
    human: bool = True
    """A person did it (a mention may name them); False: Alertmanager, the bot, the
    system, whose names come from outside the people directory and never mention."""

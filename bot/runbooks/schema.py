"""The runbook format: strict pydantic models of the YAML a team writes and reviews.

A runbook says which alerts it answers (`match`), how incidents group (`group_by`), which
facts to pull out of the alert (`facts`: Jinja2 templates over labels and annotations),
and its `steps`, in order. A step either runs an action (`action` + `with`, parameters
rendered from facts and earlier results, then validated by the action's own model) or
asks a person to do something and mark it done (`manual`). `when` decides whether a step
applies; `approval` may raise the action's default (read=auto, change=one,
disruptive=two), never lower it. A read step may `expect` what the alert says and be
re-read, a bounded number of times, until its read agrees (`bot.runbooks.expecting`).

Example (abridged):

    id: gpu-xid
    title: {en: Single GPU fault (XID), zh: 单卡故障（XID 掉卡）}
    version: 1
    match:
      alerts: [GPUXIDError]
      labels: [{label: xid, regex: "[0-9]+"}, {label: Hostname, regex: ".+"}]
    group_by: [Hostname]
    facts:
      node: "{{ labels.Hostname }}"
      xid: "{{ labels.xid }}"
    steps:
      - id: classify
        title: Locate the fault class
        action: gpu.classify_xid
        with: {xid: "{{ facts.xid }}", node: "{{ facts.node }}"}
      - id: cordon
        title: Cordon the node
        action: k8s.cordon
        with: {node: "{{ facts.node }}", reason: "XID {{ facts.xid }}"}
        when: steps.classify.result.fault_class not in ["application", "informational"]

Templates see: `labels` and `annotations` (the triggering alert's, over the incident's
common labels), `facts` (rendered, in order: a fact may use earlier ones), `steps` (by
id: `status`, `ok`, `result`, the action's result as a dict, `error` with the failure's
`kind` and `message`, and `reads` and `as_expected` for a step that `expect`s) and
`incident` (`number`, `ref` like INC-7, `severity`, `nodes`: the nodes its alerts name). They
render in Jinja2's immutable sandbox.

Unknown keys are errors everywhere, so a typo (`aproval:`) is caught by `runbook-bot
validate`, not discovered at 3 a.m.
"""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    WithJsonSchema,
    field_validator,
    model_validator,
)

from bot.durations import Duration, format_duration

ID_PATTERN = r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$"
"""Runbook ids and policy names: like file names, `gpu-xid`."""
STEP_PATTERN = r"^[a-z][a-z0-9_]{0,62}$"
"""Step ids: `drain_gpu`, so templates can say `steps.drain_gpu.result`."""
FACT_PATTERN = r"^[a-z_][a-z0-9_]{0,62}$"
LABEL_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]*$"
LEVEL_NAME = r"^[a-z][a-z0-9_]{0,30}$"
"""A topology level's name, as `bot.topology_settings` takes it."""

Wait = Annotated[
    Duration,
    WithJsonSchema(
        {
            "type": "string",
            "pattern": r"^\s*(\d+(\.\d+)?(ms|s|m|h|d))+\s*$",
            "examples": ["30s", "15m", "1h30m"],
        }
    ),
]
"""A duration as runbooks write it (`90s`, `1h30m`); the JSON Schema says so, not ISO 8601."""

Approval = Literal["auto", "one", "two"]
APPROVALS: dict[str, int] = {"auto": 0, "one": 1, "two": 2}
"""Approval -> how many distinct people must approve."""
OnFailure = Literal["stop", "continue", "escalate"]
Severity = Literal["critical", "warning", "info"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class LocalizedText(_Strict):
    """Text in English and/or Chinese; chat and postmortems pick the reader's language."""

    en: str | None = Field(None, min_length=1, max_length=500)
    zh: str | None = Field(None, min_length=1, max_length=500)

    @model_validator(mode="after")
    def _some_text(self) -> LocalizedText:
        if self.en is None and self.zh is None:
            raise ValueError("give the text in en, zh or both")
        return self


Text = str | LocalizedText


class LabelMatcher(_Strict):
    """One condition on an alert label: exactly one of equals, not_equals, regex, in."""

    label: str = Field(pattern=LABEL_PATTERN, max_length=200)
    equals: str | None = None
    not_equals: str | None = None
    regex: str | None = Field(None, max_length=500, description="fully anchored, RE2-like")
    in_: list[str] | None = Field(None, alias="in", min_length=1)

    @model_validator(mode="after")
    def _one_test(self) -> LabelMatcher:
        given = [
            k for k in ("equals", "not_equals", "regex", "in_") if getattr(self, k) is not None
        ]
        if len(given) != 1:
            raise ValueError("a label matcher has exactly one of equals, not_equals, regex, in")
        return self


class Match(_Strict):
    """Which alerts this runbook answers. The first runbook that matches, by descending
    `priority`, wins; `fallback: true` marks the runbook for alerts nothing else matches."""

    alerts: list[str] = Field(default_factory=list, description="alertname is one of these")
    labels: list[LabelMatcher] = Field(default_factory=list, description="all must hold")
    priority: int = Field(0, ge=-1000, le=1000)
    fallback: bool = False

    @model_validator(mode="after")
    def _something_to_match(self) -> Match:
        if self.fallback and (self.alerts or self.labels):
            raise ValueError("a fallback runbook matches what nothing else does: no alerts/labels")
        if not self.fallback and not self.alerts and not self.labels:
            raise ValueError("name the alerts (alerts: [...]) or label matchers to match")
        return self


class Expect(_Strict):
    """What a read should show when the alert is right. A read that does not show it yet
    (taken a moment before the alert's condition was visible) is taken again, `every`
    apart, up to `reads` reads in all; then the step stands with its last read and
    `steps.ID.unexpected` true, and the log and the card say what the reads saw."""

    that: str = Field(
        min_length=1,
        max_length=2000,
        description="an expression like `when`'s, over `result` (this read's result) and "
        "what `when` sees: true when the read agrees with the alert",
    )
    reads: int = Field(3, ge=2, le=10, description="reads in all, the first included")
    every: Wait = Field(
        timedelta(seconds=30),
        description="the wait before each re-read, 1s to 1h",
        json_schema_extra={"default": "30s"},
    )
    meaning: Text | None = Field(
        None, description="`that` in words, for the log and the card: the node is NotReady"
    )

    @field_validator("every")
    @classmethod
    def _every(cls, value: timedelta) -> timedelta:
        if not timedelta(seconds=1) <= value <= timedelta(hours=1):
            raise ValueError(f"re-read every 1s to 1h, not {format_duration(value)}")
        return value


ForEach = Literal["nodes"]
StopOn = Literal["first_failure", "never"]
DOMAIN_PREFIX = "domain."
"""`group_by: [domain.row]` names a topology level (`topology.levels`), not a label."""


class Correlate(_Strict):
    """How a runbook's alerts grow into one incident for their failure domain: alerts of
    this runbook from `min_nodes` or more nodes of one domain (its `group_by`'s level)
    within `window` are one incident for the domain; a lone node stays a node incident
    and grows into the domain's when another node of the domain joins within the window.
    While a domain incident is open, every new alert of this runbook inside the domain
    joins it."""

    window: Wait = Field(
        timedelta(minutes=2),
        description="how close together the nodes' first alerts must be, 1s to 1h",
        json_schema_extra={"default": "2m"},
    )
    min_nodes: int = Field(2, ge=2, le=10000, description="nodes that make it the domain's")

    @field_validator("window")
    @classmethod
    def _window(cls, value: timedelta) -> timedelta:
        if not timedelta(seconds=1) <= value <= timedelta(hours=1):
            raise ValueError(f"a correlation window is 1s to 1h, not {format_duration(value)}")
        return value


class Step(_Strict):
    """One step of a runbook: an action to run, or a manual task for a person."""

    id: str = Field(pattern=STEP_PATTERN, description="unique in the runbook, e.g. drain_gpu")
    title: Text
    action: str | None = Field(None, pattern=r"^[a-z0-9_]+\.[a-z0-9_]+$")
    with_: dict[str, Any] = Field(default_factory=dict, alias="with")
    manual: Text | None = Field(None, description="what a person does, then marks done")
    when: str | None = Field(
        None, max_length=2000, description="Jinja2 expression over facts, labels and steps"
    )
    approval: Approval | None = Field(None, description="default: the action's risk")
    timeout: Wait | None = Field(None, description="how long the step may run, 1s to 24h")
    retries: int = Field(0, ge=0, le=5)
    expect: Expect | None = Field(
        None, description="read actions only: re-read until the read agrees with the alert"
    )
    on_failure: OnFailure = "stop"
    for_each: ForEach | None = Field(
        None,
        description="`nodes`: run the action once per node of the incident, `with` rendered "
        "with `node` set to each; one approval covers the whole list and binds to it",
    )
    max_parallel: int = Field(1, ge=1, le=64, description="for_each: nodes at once")
    batch: int | None = Field(
        None, ge=1, le=10000, description="for_each: nodes per batch; a batch ends before the next"
    )
    pause: Wait | None = Field(
        None, description="for_each: the wait between two batches (watch before going on)"
    )
    stop_on: StopOn = Field(
        "first_failure", description="for_each: stop starting nodes at the first failure, or never"
    )
    doc: str | None = Field(None, max_length=2000, description="a link, or the seed's line")

    @field_validator("timeout")
    @classmethod
    def _timeout(cls, value: timedelta | None) -> timedelta | None:
        if value is not None and not timedelta(seconds=1) <= value <= timedelta(hours=24):
            raise ValueError(f"a step's timeout is 1s to 24h, not {format_duration(value)}")
        return value

    @model_validator(mode="after")
    def _action_or_manual(self) -> Step:
        if (self.action is None) == (self.manual is None):
            raise ValueError("a step has exactly one of action and manual")
        if self.manual is not None and self.with_:
            raise ValueError("`with` gives an action its parameters; a manual step has none")
        if self.manual is not None and self.expect is not None:
            raise ValueError("`expect` re-reads an action's result; a manual step has none")
        if self.for_each is None:
            given = [k for k in ("batch", "pause") if getattr(self, k) is not None]
            if self.max_parallel != 1:
                given.insert(0, "max_parallel")
            if given:
                raise ValueError(
                    f"{', '.join(given)} shape a `for_each` step; add `for_each: nodes`"
                )
        elif self.manual is not None:
            raise ValueError("`for_each` runs an action per node; a manual step has none")
        elif self.expect is not None:
            raise ValueError("`expect` re-reads one read; a `for_each` step has many")
        if self.pause is not None and not timedelta(seconds=1) <= self.pause <= timedelta(hours=24):
            raise ValueError(f"a pause is 1s to 24h, not {format_duration(self.pause)}")
        return self


class Runbook(_Strict):
    """A whole runbook file."""

    id: str = Field(pattern=ID_PATTERN)
    title: Text
    version: int = Field(ge=1, description="raise it with every change; incidents keep theirs")
    description: Text | None = None
    match: Match
    severity: Severity | None = Field(None, description="the severity its incidents get")
    group_by: list[str] = Field(
        default_factory=list,
        description="labels, and at most one topology level as `domain.<level>` "
        "(`domain.row`): one incident for each distinct combination",
    )
    correlate: Correlate | None = Field(
        None,
        description="grow node incidents into one for their domain (`group_by`'s "
        "`domain.<level>`, or its storage label): `window`, `min_nodes`",
    )
    facts: dict[str, str] = Field(
        default_factory=dict, description="name: Jinja2 template over labels and annotations"
    )
    escalation: str | None = Field(None, pattern=ID_PATTERN, description="escalation policy")
    doc: str | None = Field(None, max_length=2000)
    steps: list[Step] = Field(min_length=1)

    @model_validator(mode="after")
    def _names(self) -> Runbook:
        seen: set[str] = set()
        for step in self.steps:
            if step.id in seen:
                raise ValueError(f"step id {step.id!r} is used twice")
            seen.add(step.id)
        for name in self.facts:
            if not re.fullmatch(FACT_PATTERN, name):
                raise ValueError(f"fact name {name!r}: use lowercase letters, digits and _")
        levels = [key for key in self.group_by if key.startswith(DOMAIN_PREFIX)]
        for key in self.group_by:
            name = key.removeprefix(DOMAIN_PREFIX)
            if not re.fullmatch(LEVEL_NAME if key in levels else LABEL_PATTERN, name):
                raise ValueError(
                    f"group_by {key!r}: a label name, or domain.<level> with a level of "
                    "`topology.levels`"
                )
        if len(levels) > 1:
            raise ValueError(f"group_by names one topology level at most, not {', '.join(levels)}")
        return self

    @property
    def domain_level(self) -> str | None:
        """The topology level `group_by` names (`row` for `domain.row`), else None."""
        for key in self.group_by:
            if key.startswith(DOMAIN_PREFIX):
                return key.removeprefix(DOMAIN_PREFIX)
        return None


def json_schema() -> dict[str, Any]:
    """The JSON Schema of a runbook file, for editors (yaml-language-server) and CI."""
    schema = Runbook.model_json_schema(by_alias=True)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "runbook-bot runbook"
    return schema

"""The step engine: freeze a runbook onto an opening incident, then walk its steps.

Every function here takes the caller's session and writes inside the caller's
transaction, so a state change and its incident-log entry commit together or not at all.
Callers lock in one order, step-run rows before the incident row (the incident row is the
head of the log's hash chain), so two transactions never wait on each other in a circle.

`advance` is the planner. Steps run in order: it walks the frozen steps, proposes the
first step that has no run yet (rendering `when` and `with` against what is known now),
and stops at the first run that has not ended. A run that ended badly decides by the
step's `on_failure`: `stop` halts the runbook, `continue` goes on, `escalate` records
`runbook.escalate` (the escalation room pages on it) and goes on; a cancelled run stops
it. Nothing is proposed once the incident is resolved or closed. A run that was
interrupted (its worker died) or expired (nobody approved in time) is proposed again as a
new attempt for people to decide; nothing is ever re-run on its own, except a read whose
step `expect`s what the alert says and has reads left (`expecting`): it is read again,
`every` later, until it agrees or the reads are used up.

What later steps see of an earlier one is `seen`: its status, `ok`, `result`, `error`
(the failure's `kind` and message), `reads` and `unexpected`.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from bot.actions import registry
from bot.config import Settings
from bot.errors import ActionUnknown, BotError, StepNotFound
from bot.incidents import log
from bot.incidents import service as incidents
from bot.incidents.lifecycle import Status
from bot.incidents.models import DOMAIN_SCOPE, NODE_SCOPE, Incident, LogEntry
from bot.runbooks import expecting, foreach, templates, versions
from bot.runbooks.catalog import Catalog
from bot.runbooks.loader import LoadedRunbook
from bot.runbooks.models import IncidentRunbook, StepRun
from bot.runbooks.nodes import incident_nodes
from bot.runbooks.schema import APPROVALS, Runbook, Step, Text
from bot.runbooks.steps import StepState, check

logger = logging.getLogger(__name__)

BOT = log.Actor("bot", "runbook-bot", "runbook-bot")
"""Who approves `auto` steps and moves runs the bot decides on."""
S = StepState


def params_hash(params: Mapping[str, Any]) -> str:
    """SHA-256 of the parameters' canonical JSON: what an approval binds to."""
    text = json.dumps(params, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


def text(value: Text | None) -> str:
    """English when given, else Chinese."""
    if value is None or isinstance(value, str):
        return value or ""
    return value.en or value.zh or ""


def actor_of(person: str | None) -> log.Actor:
    return BOT if person in (None, BOT.id) else log.Actor.human(str(person))


@dataclass(frozen=True)
class Freeze:
    """What freezing a runbook onto an incident writes: its row and its log entries."""

    row: dict[str, Any]
    """The `IncidentRunbook` columns."""
    entries: list[tuple[str, str, dict[str, Any]]]
    """(type, summary, data) of each log entry, in order."""


def freeze(
    incident: Incident,
    labels: Mapping[str, str],
    annotations: Mapping[str, str],
    loaded: LoadedRunbook,
    now: datetime,
) -> Freeze:
    """Render the runbook's facts for `incident`: no I/O, so ingest can run it, catching a
    runbook bug, before it writes anything. The document must be stored (`versions`)."""
    return freeze_stored(incident, labels, annotations, loaded.runbook, loaded.digest, now)


def freeze_stored(
    incident: Incident,
    labels: Mapping[str, str],
    annotations: Mapping[str, str],
    runbook: Runbook,
    digest: str,
    now: datetime,
) -> Freeze:
    """`freeze` for a runbook document already stored under `digest` (an incident split
    off another follows the other's runbook version)."""
    facts: dict[str, str] = {}
    failed: list[tuple[str, str]] = []
    for name, template in runbook.facts.items():
        context = {"labels": labels, "annotations": annotations, "facts": dict(facts)}
        try:
            facts[name] = templates.render(template, context).strip()
        except templates.TemplateError as exc:
            failed.append((name, str(exc)))
    row = {
        "incident_number": incident.number,
        "runbook_id": runbook.id,
        "runbook_version": runbook.version,
        "runbook_digest": digest,
        "facts": facts,
        "labels": dict(labels),
        "annotations": dict(annotations),
        "matched_at": now,
    }
    matched = (
        "runbook.matched",
        f"runbook {runbook.id} v{runbook.version} ({text(runbook.title)}) follows {incident.ref}",
        {
            "runbook": runbook.id,
            "version": runbook.version,
            "digest": digest,
            "facts": facts,
        },
    )
    entries = [matched] + [
        ("runbook.fact_failed", f"fact {name} left out: {reason}", {"fact": name, "error": reason})
        for name, reason in failed
    ]
    return Freeze(row, entries)


def attach(
    session: Session,
    incident: Incident,
    labels: Mapping[str, str],
    annotations: Mapping[str, str],
    catalog: Catalog,
    now: datetime,
    settings: Settings,
) -> IncidentRunbook | None:
    """Freeze the runbook matching `labels` onto a just-opened incident and propose its
    first steps, in the caller's transaction (ingest does the same in two halves: it
    freezes, the worker proposes). No runbook matches and no fallback exists -> None,
    nothing written."""
    loaded = catalog.match(labels)
    if loaded is None:
        return None
    versions.store(session, loaded, now)
    frozen = freeze(incident, labels, annotations, loaded, now)
    row = IncidentRunbook(**frozen.row, proposed_at=now)
    session.add(row)
    for kind, summary, data in frozen.entries:
        log.append(session, incident, at=now, actor=BOT, type=kind, summary=summary, data=data)
    session.flush()
    advance(session, incident.number, now, settings)
    return row


def frozen_runbook(session: Session, number: int) -> tuple[IncidentRunbook, Runbook]:
    frozen = session.get(IncidentRunbook, number)
    if frozen is None:
        raise StepNotFound(f"INC-{number} follows no runbook")
    return frozen, versions.runbook(session, frozen.runbook_digest)


def frozen_step(runbook: Runbook, step_id: str) -> Step:
    for step in runbook.steps:
        if step.id == step_id:
            return step
    known = ", ".join(s.id for s in runbook.steps)
    raise StepNotFound(f"runbook {runbook.id} has no step {step_id!r}; its steps: {known}")


def runs_of(session: Session, number: int) -> list[StepRun]:
    """Every run of the incident's steps, oldest attempt first."""
    stmt = (
        select(StepRun)
        .where(StepRun.incident_number == number)
        .order_by(StepRun.step_id, StepRun.attempt)
    )
    return list(session.scalars(stmt))


def latest_runs(session: Session, number: int) -> dict[str, StepRun]:
    """The newest attempt of each step that has one."""
    return {run.step_id: run for run in runs_of(session, number)}


def transition(
    session: Session,
    incident: Incident,
    run: StepRun,
    target: StepState,
    *,
    now: datetime,
    actor: log.Actor,
    summary: str,
    data: dict[str, Any] | None = None,
) -> None:
    """Move `run` to `target` (if legal) and record it: the one way a run changes state."""
    source = run.state
    check(run.step_id, source, target)
    run.state = target
    log.append(
        session,
        incident,
        at=now,
        actor=actor,
        type=f"step.{target.value}",
        summary=summary,
        data={
            "step": run.step_id,
            "attempt": run.attempt,
            "run": run.id,
            "from": source,
            "to": target.value,
            **(data or {}),
        },
    )


def running(incident: Incident) -> bool:
    """Whether the incident's runbook may still propose and retry steps: not once it is
    resolved or closed (resolving cancels its waiting steps)."""
    return Status(incident.status).active


def advance(session: Session, number: int, now: datetime, settings: Settings) -> None:
    """Propose what is due next; a no-op when the incident follows no runbook or is no
    longer active."""
    incident = incidents.get(session, number, lock=True)
    frozen = session.get(IncidentRunbook, number)
    if frozen is None or not running(incident):
        return
    runbook = versions.runbook(session, frozen.runbook_digest)
    history: dict[str, list[StepRun]] = {}
    for earlier in runs_of(session, number):
        history.setdefault(earlier.step_id, []).append(earlier)
    context = context_of(session, incident, frozen, settings)
    for step in runbook.steps:
        runs = history.get(step.id, [])
        run = runs[-1] if runs else None
        if run is None:
            run = _propose(session, incident, step, context, now, settings, attempt=1)
        elif run.state == S.AWAITING_APPROVAL and foreach.changed(
            run.params, context["incident"]["nodes"]
        ):
            _supersede(session, incident, run, context["incident"]["nodes"], now)
            run = _propose(session, incident, step, context, now, settings, run.attempt + 1)
        elif run.state in (S.INTERRUPTED, S.EXPIRED):
            again = run.state == S.INTERRUPTED
            run = _propose(session, incident, step, context, now, settings, run.attempt + 1, again)
        state = StepState(run.state)
        unexpected = False
        if step.expect is not None and state == S.SUCCEEDED:
            reads = expecting.judge(step.expect, runs, context)
            if not reads.agrees and not reads.exhausted(step.expect):
                run = expecting.reread(
                    session, incident, step, run, reads, now, actor=BOT, transition=transition
                )
                state = StepState(run.state)
            elif not reads.agrees:
                unexpected = True
                _unexpected(session, incident, step, run, reads, now)
        context["steps"][step.id] = seen(
            state,
            run.result,
            run.summary,
            reads=sum(r.state == S.SUCCEEDED for r in runs),
            unexpected=unexpected,
        )
        if not state.terminal:
            return
        if state == S.CANCELLED:
            _once(session, incident, run, now, "runbook.stopped", _stopped(step, run))
            return
        if state in (S.FAILED, S.TIMED_OUT):
            if step.on_failure == "stop":
                _once(session, incident, run, now, "runbook.stopped", _stopped(step, run))
                return
            if step.on_failure == "escalate":
                _once(session, incident, run, now, "runbook.escalate", _escalate(step, run))
    _once(session, incident, None, now, "runbook.finished", f"runbook {runbook.id} finished")


def context_of(
    session: Session, incident: Incident, frozen: IncidentRunbook, settings: Settings
) -> dict[str, Any]:
    """What `when` and `with` render against, before any step is seen: the frozen labels,
    annotations and facts, and the incident (its nodes, scope and domain)."""
    nodes = incident_nodes(session, incident.number, settings.topology)
    domain: dict[str, Any] | None = None
    if incident.scope == DOMAIN_SCOPE and incident.domain is not None:
        level, _, value = incident.domain.partition("/")
        size = incident.domain_size if incident.domain_size is not None else len(nodes)
        domain = {"level": level, "value": value, "name": incident.domain, "size": size}
    return {
        "labels": frozen.labels,
        "annotations": frozen.annotations,
        "facts": frozen.facts,
        "steps": {},
        "incident": {
            "number": incident.number,
            "ref": incident.ref,
            "severity": incident.severity,
            "nodes": nodes,
            "scope": incident.scope if domain is not None else NODE_SCOPE,
            "domain": domain,
        },
    }


def replan(session: Session, number: int, now: datetime, settings: Settings) -> int:
    """After the incident grew (into its domain's, or by more nodes of it): give steps
    the bot skipped by `when` a new attempt where `when` is now true, and supersede open
    proposals whose parameters now render differently (new attempt, approvals start
    again). Returns how many runs it changed. See `bot.runbooks.replan`."""
    from bot.runbooks import replan as replanning  # it builds on this module

    return replanning.replan(session, number, now, settings)


ERROR_KINDS = ("credentials", "unavailable", "refused", "timeout", "internal", "other")
"""What `steps.X.error.kind` can be for a step that failed or timed out ("" otherwise):
the action's failure by its exception's class (`bot.errors`), `timeout` when the step
outlived its `timeout`, `other` when it failed before its action ran."""


def seen(
    state: StepState,
    result: Mapping[str, Any] | None,
    summary: str = "",
    *,
    reads: int = 0,
    unexpected: bool = False,
) -> dict[str, Any]:
    """A step as the templates of later steps see it (`steps.ID`)."""
    kind = ""
    if state == S.TIMED_OUT:
        kind = "timeout"
    elif state == S.FAILED:
        given = (result or {}).get("error")
        kind = given if given in ERROR_KINDS else "other"
    return {
        "status": state.value,
        "ok": state == S.SUCCEEDED,
        "result": dict(result or {}),
        "error": {"kind": kind, "message": summary if kind else ""},
        "reads": reads,
        "unexpected": unexpected,
    }


def _unexpected(
    session: Session,
    incident: Incident,
    step: Step,
    run: StepRun,
    reads: expecting.Reads,
    now: datetime,
) -> None:
    """Say once, in the log and in the run's summary the card shows, that a step's reads
    never agreed with what it expected."""
    summary = f"step {step.id} ({text(step.title)}): {expecting.unexpected(step, run, reads)}"
    if _once(session, incident, run, now, "step.unexpected", summary):
        note = expecting.unexpected(step, run, reads, last=False)
        run.summary = f"{run.summary} — {note}"[:2000]


def _supersede(
    session: Session, incident: Incident, run: StepRun, nodes: list[str], now: datetime
) -> None:
    """A `for_each` proposal whose node list is no longer the incident's: its approvals
    bound the old list, so it expires and the step is proposed again over the new one."""
    before = foreach.nodes_of(run.params)
    added = sorted(set(nodes) - set(before))
    gone = sorted(set(before) - set(nodes))
    change = ", ".join(
        part
        for part in (
            f"+{len(added)} ({foreach.names(added)})" if added else "",
            f"-{len(gone)} ({foreach.names(gone)})" if gone else "",
        )
        if part
    )
    why = f"the incident's nodes changed ({len(before)} -> {len(nodes)}: {change})"
    run.finished_at = now
    run.summary = f"superseded: {why}; approvals start again on the new list"
    log.append(
        session,
        incident,
        at=now,
        actor=BOT,
        type="step.superseded",
        summary=f"step {run.step_id}: {why}; the proposal is made again over {len(nodes)} "
        "nodes and its approvals start again",
        data={
            "step": run.step_id,
            "attempt": run.attempt,
            "run": run.id,
            "before": before,
            "nodes": list(nodes),
            "added": added,
            "removed": gone,
        },
    )
    transition(
        session,
        incident,
        run,
        S.EXPIRED,
        now=now,
        actor=BOT,
        summary=f"step {run.step_id} superseded: {why}",
        data={"superseded": True},
    )


def _stopped(step: Step, run: StepRun) -> str:
    return f"runbook stopped: step {step.id} {run.state.replace('_', ' ')} ({run.summary})"


def _escalate(step: Step, run: StepRun) -> str:
    return (
        f"step {step.id} {run.state.replace('_', ' ')} ({run.summary}); escalating to "
        "the next line and going on"
    )


def _once(
    session: Session,
    incident: Incident,
    run: StepRun | None,
    now: datetime,
    kind: str,
    summary: str,
) -> bool:
    """Log a runbook-level event once per run (once per incident without a run); whether
    it was logged now."""
    key = None if run is None else run.id
    stmt = select(LogEntry.data).where(
        LogEntry.incident_number == incident.number, LogEntry.type == kind
    )
    if any(data.get("run") == key for data in session.scalars(stmt)):
        return False
    data: dict[str, Any] = {"run": key}
    if run is not None:
        data.update(step=run.step_id, attempt=run.attempt, state=run.state)
    log.append(session, incident, at=now, actor=BOT, type=kind, summary=summary, data=data)
    return True


def _propose(
    session: Session,
    incident: Incident,
    step: Step,
    context: dict[str, Any],
    now: datetime,
    settings: Settings,
    attempt: int,
    after_interruption: bool = False,
) -> StepRun:
    run = StepRun(
        incident_number=incident.number,
        step_id=step.id,
        attempt=attempt,
        state=S.PROPOSED,
        kind="manual" if step.manual is not None else "action",
        action=step.action,
        params={},
        params_hash=params_hash({}),
        approvals_required=0,
        proposed_at=now,
        summary="",
    )
    session.add(run)
    session.flush()  # the run's id goes into its log entries
    title = text(step.title)

    def fail(reason: str) -> StepRun:
        run.summary = reason[:2000]
        run.finished_at = now
        transition(
            session,
            incident,
            run,
            S.FAILED,
            now=now,
            actor=BOT,
            summary=f"step {step.id} ({title}) failed before it ran: {reason}",
            data={"error": reason},
        )
        return run

    def skip(why: str, data: dict[str, Any]) -> StepRun:
        run.summary = f"skipped: {why}"
        run.finished_at = now
        transition(
            session,
            incident,
            run,
            S.SKIPPED,
            now=now,
            actor=BOT,
            summary=f"step {step.id} ({title}) skipped: {why}",
            data=data,
        )
        return run

    if step.when is not None:
        try:
            applies = templates.evaluate(step.when, context)
        except templates.TemplateError as exc:
            return fail(str(exc))
        if not applies:
            return skip(f"`when: {step.when}` is false", {"when": step.when})

    if step.manual is not None:
        run.summary = text(step.manual)
        transition(
            session,
            incident,
            run,
            S.AWAITING_APPROVAL,
            now=now,
            actor=BOT,
            summary=f"step {step.id} ({title}) is for a person: {text(step.manual)} "
            "Mark it done with a note, or skip it.",
            data={"manual": text(step.manual)},
        )
        return run

    assert step.action is not None
    try:
        action = registry.get(step.action)
        if step.for_each is not None:
            raw = foreach.params(step, context, action)
        else:
            raw = templates.render_params(step.with_, context)
            action.parse(raw)
    except BotError as exc:  # TemplateError, ActionUnknown, ParamsInvalid
        return fail(str(exc))
    if step.for_each is not None and not raw["nodes"]:
        run.params, run.params_hash = raw, params_hash(raw)
        why = "the incident's alerts name no node, so there is nothing to run it on"
        return skip(why, {"for_each": step.for_each, "nodes": []})
    run.params = raw
    run.params_hash = params_hash(raw)
    required = max(action.risk.approvals, APPROVALS[step.approval or "auto"])
    if after_interruption:
        required = max(required, 1)  # a person decides whether to run it again
    run.approvals_required = required
    shown = brief(raw, step.action)
    if required == 0:
        run.decided_at = now
        run.actor = BOT.id
        run.summary = f"{shown}: runs automatically ({action.risk.value} risk)"
        transition(
            session,
            incident,
            run,
            S.APPROVED,
            now=now,
            actor=BOT,
            summary=f"step {step.id} ({title}): {step.action} {shown} approved automatically "
            f"({action.risk.value} risk)",
            data={"action": step.action, "params": raw, "params_hash": run.params_hash},
        )
        return run
    run.expires_at = now + settings.approval_ttl
    people = "one person" if required == 1 else f"{required} different people"
    again = "; the previous attempt was interrupted" if after_interruption else ""
    if foreach.needs_count(raw, step.action):
        people += f" naming the count ({len(raw['nodes'])})"
    seen_as = f"{step.action} {shown}" if step.for_each is not None else shown
    run.summary = f"{seen_as}: needs {people} before {run.expires_at:%H:%M} UTC{again}"
    transition(
        session,
        incident,
        run,
        S.AWAITING_APPROVAL,
        now=now,
        actor=BOT,
        summary=f"step {step.id} ({title}): {step.action} {shown} needs approval by {people} "
        f"before {run.expires_at:%H:%M} UTC{again}",
        data={
            "action": step.action,
            "params": raw,
            "params_hash": run.params_hash,
            "approvals_required": required,
            "expires_at": run.expires_at.isoformat(),
        },
    )
    return run


def brief(params: Mapping[str, Any], action: str | None = None) -> str:
    """`(node=gpu-node-02, reason=...)`: the parameters in the order the action declares
    them, so the text is the same whichever database stored them (PostgreSQL's JSONB
    gives keys back in an order of its own). A `for_each` run's: `on 32 nodes of row/a
    (a-01 ... a-32)`."""
    if foreach.is_for_each(params):
        return foreach.shown(params)
    order: list[str] = []
    if action is not None:
        try:
            order = list(registry.get(action).params.model_fields)
        except ActionUnknown:  # a frozen runbook may name an action this build lacks
            order = []
    keys = [key for key in order if key in params]
    keys += sorted(key for key in params if key not in order)
    shown = ", ".join(f"{key}={params[key]}" for key in keys)
    return f"({shown[:200]})"

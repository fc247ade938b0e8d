"""Commands on an incident's runbook steps, until chat buttons land: steps, approve, skip,
done, cancel, stop (the rest of a step over many nodes), repropose (propose a step again;
deciding acknowledges an open incident unless `--no-ack`); and `worker`, which runs approved
steps in its own process."""

from __future__ import annotations

import argparse
import json
import signal
import threading
from collections.abc import Callable
from typing import Any

from bot.cli import common
from bot.clock import SystemClock
from bot.config import Settings
from bot.incidents import service as incidents
from bot.runbooks import service
from bot.runbooks.models import StepRun


def add_commands(commands: Any) -> None:
    """Register the commands on the top-level subparsers."""
    steps = commands.add_parser(
        "steps",
        help="an incident's runbook steps and their approvals",
        description="Show the steps of the runbook an incident follows: state, action, "
        "approvals given of those needed, and what happened.",
    )
    steps.add_argument("incident", metavar="INC-N")
    steps.add_argument("-o", "--output", choices=["table", "json"], default="table")
    steps.set_defaults(handler=show_steps)

    approve = _add_decision(
        commands,
        "approve",
        approve_step,
        help="approve a step (you need a role in the roles setting)",
        description="Approve a step waiting for approval. A disruptive step needs two "
        "different people; an approval counts only before the step expires (approval_ttl). "
        "With --hash, the approval is refused if the step's parameters are no longer the "
        "ones you reviewed (`runbook-bot steps INC-N -o json` shows params_hash).",
    )
    approve.add_argument("--hash", metavar="H", help="the params_hash you reviewed")
    approve.add_argument(
        "--count",
        type=int,
        metavar="N",
        help="a step over many nodes that changes them: how many nodes you approve it on "
        "(required when more than one; `runbook-bot steps INC-N` shows the set)",
    )
    approve.add_argument(
        "--override-breaker",
        type=int,
        metavar="N",
        dest="override",
        help="an admin only, with --count: let N of the step's nodes pass the circuit "
        "breaker's global cap (breaker_global_max_*); each one it lets through is logged",
    )
    _add_decision(
        commands,
        "skip",
        skip_step,
        help="skip a step that waits for a person",
        description="Decide that a waiting step will not run; the runbook goes on. A step "
        "later steps read needs --note saying why: they may be skipped too.",
    ).add_argument("--note", help="why (required when later steps read the step)")
    _add_decision(
        commands,
        "done",
        done_step,
        help="mark a manual step done",
        description="Mark a manual step (replace a cable, call the vendor) done, saying "
        "what was done; the runbook goes on.",
    ).add_argument("--note", required=True, help="what was done")
    _add_decision(
        commands,
        "cancel",
        cancel_step,
        help="cancel a step that has not started, stopping the runbook",
        description="Cancel a step that is proposed, waiting for approval or approved but "
        "not yet running. The runbook stops there; a running action cannot be called back.",
    ).add_argument("--note", help="why")
    _add_decision(
        commands,
        "stop",
        stop_step,
        help="stop the rest of a running step over many nodes",
        description="Stop a running `for_each` step: the nodes running finish, no new node "
        "starts, and the step ends cancelled with the nodes left listed; the runbook stops "
        "there.",
    ).add_argument("--note", help="why")
    _add_decision(
        commands,
        "repropose",
        repropose_step,
        help="propose again a skipped, failed, timed-out, expired or cancelled step",
        description="Give a step whose newest run was skipped, failed, timed out, expired or "
        "was cancelled a new attempt: its approvals start again, and the later steps the bot "
        "skipped by `when` are decided again in their turn.",
    ).add_argument("--note", help="why")

    worker = commands.add_parser(
        "worker",
        help="run approved steps (a separate worker process)",
        description="Claim approved steps and run their actions until stopped (SIGTERM or "
        "Ctrl-C). `serve` runs one in a thread already; run more on PostgreSQL only.",
    )
    worker.set_defaults(handler=run_worker)


def _add_decision(
    commands: Any, name: str, handler: Callable[..., int], *, help: str, description: str
) -> argparse.ArgumentParser:
    """A command deciding on one step as someone: INC-N STEP --as USER."""
    parser: argparse.ArgumentParser = commands.add_parser(name, help=help, description=description)
    parser.add_argument("incident", metavar="INC-N")
    parser.add_argument("step", metavar="STEP", help="the step id, e.g. cordon")
    parser.add_argument(
        "--as",
        dest="actor",
        required=True,
        metavar="USER",
        help="who decides: a person id of the `people` setting (needs a role)",
    )
    if name != "cancel":  # cancelling stops the runbook; it is not responding
        parser.add_argument(
            "--no-ack",
            dest="acknowledge",
            action="store_false",
            help="decide without acknowledging the incident (deciding acknowledges an open "
            "incident and stops its escalation)",
        )
    parser.set_defaults(handler=handler)
    return parser


def show_steps(args: argparse.Namespace, settings: Settings) -> int:
    number = incidents.parse_ref(args.incident)
    with common.database(settings) as db:
        runbook, rows = service.step_rows(db, number)
    if args.output == "json":
        body: dict[str, Any] = {"incident": f"INC-{number}", "runbook": runbook}
        body["steps"] = [row.as_dict() for row in rows]
        return common.say(json.dumps(body, indent=2, ensure_ascii=False))
    table = [["STEP", "STATE", "ACTION", "APPROVALS", "SUMMARY"]]
    for row in rows:
        approvals = f"{row.approvals}/{row.approvals_required}" if row.kind == "action" else "-"
        state = row.state.replace("_", " ") + (f" (#{row.attempt})" if row.attempt > 1 else "")
        summary = row.summary if row.state != "not_reached" else row.title
        if row.progress is not None and row.state == "running":
            summary = _counted(row.progress)
        table.append([row.step, state, row.action or "manual", approvals, summary])
    return common.say(f"INC-{number} follows {runbook}\n" + common.table(table))


def approve_step(args: argparse.Namespace, settings: Settings) -> int:
    run = _decide(
        args,
        settings,
        service.approve,
        params_hash=args.hash,
        count=args.count,
        override=args.override,
    )
    if run.state == "approved":
        return common.say(f"step {run.step_id} approved; the worker runs it as {run.actor}")
    return common.say(f"your approval of step {run.step_id} is recorded; it needs more")


def skip_step(args: argparse.Namespace, settings: Settings) -> int:
    run = _decide(args, settings, service.skip, note=args.note)
    return common.say(f"step {run.step_id} skipped")


def done_step(args: argparse.Namespace, settings: Settings) -> int:
    run = _decide(args, settings, service.complete, note=args.note)
    return common.say(f"step {run.step_id} done")


def repropose_step(args: argparse.Namespace, settings: Settings) -> int:
    run = _decide(args, settings, service.repropose, note=args.note)
    if run.state == "awaiting_approval":
        return common.say(f"step {run.step_id} is proposed again (attempt {run.attempt})")
    return common.say(f"step {run.step_id} is proposed again: {run.state.replace('_', ' ')}")


def cancel_step(args: argparse.Namespace, settings: Settings) -> int:
    run = _decide(args, settings, service.cancel, note=args.note)
    return common.say(f"step {run.step_id} cancelled; the runbook stops there")


def stop_step(args: argparse.Namespace, settings: Settings) -> int:
    run = _decide(args, settings, service.stop, note=args.note)
    return common.say(
        f"the rest of step {run.step_id} is stopped: the nodes running finish, none starts"
    )


def _decide(
    args: argparse.Namespace, settings: Settings, decision: Callable[..., StepRun], **extra: Any
) -> StepRun:
    """Call a `runbooks.service` decision on the step `args` name, as `--as` (with
    `--no-ack`, without acknowledging the incident)."""
    number = incidents.parse_ref(args.incident)
    if not getattr(args, "acknowledge", True):
        extra["acknowledge"] = False
    with common.database(settings) as db:
        return decision(
            db,
            number,
            args.step,
            who=common.decider(settings, args.actor),
            clock=SystemClock(),
            settings=settings,
            **extra,
        )


def run_worker(_: argparse.Namespace, settings: Settings) -> int:
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        common.run_workers(settings, stop)
    except KeyboardInterrupt:
        stop.set()
    return 0


def _counted(progress: dict[str, Any]) -> str:
    """ "32 nodes of row/a: done 12 · running 4 · failed 1 · left 15 (failed: a-07)"."""
    counts = " · ".join(
        f"{word} {progress[key]}"
        for word, key in (("done", "succeeded"), ("running", "running"), ("failed", "failed"))
    )
    failed = f" (failed: {', '.join(progress['failed_nodes'][:5])})" if progress["failed"] else ""
    return f"{progress['set']}: {counts} · left {progress['left']}{failed}"

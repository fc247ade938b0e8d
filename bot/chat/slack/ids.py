"""Numbers in Slack's payloads: which buttons and dialogs carry one of our ids, and the
bolt middleware that refuses a payload whose id is none (past the integer column, `²`,
empty) before any handler reads the database with it."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable

from slack_bolt import BoltRequest, BoltResponse

from bot import inputs
from bot.errors import PayloadInvalid

logger = logging.getLogger(__name__)

NUMBERED_ACTIONS = {
    "step.approve": "the step",
    "step.skip": "the step",
    "step.done": "the step",
    "step.stop": "the step",
    "step.skip_why": "the step",
    "step.repropose": "the step",
    "step.repropose.2": "the step",
    "step.repropose.3": "the step",
    "incident.page_second": "the incident number",
    "incident.ack": "the incident number",
    "incident.own": "the incident number",
    "incident.resolve": "the incident number",
}
"""The buttons whose value is a number (a step run's id or an incident's)."""
NUMBERED_VIEWS = {"incident.resolve": "disposition", "step.done": "note", "step.skip": "note"}
"""The dialogs whose private_metadata is a number, and the input an error is shown under."""


def refuse_bad_ids(
    req: BoltRequest, resp: BoltResponse, next: Callable[[], BoltResponse]
) -> BoltResponse:
    """A number in a button's value or a dialog's metadata that is no id of ours (past the
    integer column, `²`, empty) is refused before any handler reads the database: 400 for
    a button; for a dialog, Slack's contract is 200 with the error shown in the dialog."""
    body = req.body if isinstance(req.body, dict) else {}
    kind = body.get("type")
    try:
        if kind == "block_actions":
            for action in body.get("actions") or []:
                what = NUMBERED_ACTIONS.get(str(action.get("action_id")))
                if what is not None:
                    inputs.parse_id(action.get("value", ""), what)
        elif kind == "view_submission":
            view = body.get("view") or {}
            if str(view.get("callback_id")) in NUMBERED_VIEWS:
                inputs.parse_id(view.get("private_metadata", ""), "the dialog's metadata")
    except PayloadInvalid as exc:
        logger.warning("refused a Slack %s: %s", kind, exc)
        if kind == "view_submission":
            block = NUMBERED_VIEWS[str((body.get("view") or {}).get("callback_id"))]
            answer = {"response_action": "errors", "errors": {block: f"{exc}; reopen it"[:150]}}
            return BoltResponse(
                status=200, body=json.dumps(answer), headers={"content-type": "application/json"}
            )
        return BoltResponse(status=400, body=f"{exc}; refresh the incident card")
    return next()

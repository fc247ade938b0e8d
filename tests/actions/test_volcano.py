"""volcano.queue_state on the simulated cluster: the queue's state and marks after,
idempotency, dry run, and a queue someone else closed."""

from __future__ import annotations

from typing import Any

from kubernetes import client

from bot.sim import SimHandle
from tests.actions.conftest import Recorder, RunAction

MERGE = "application/merge-patch+json"
QUEUE_PATH = "/apis/scheduling.volcano.sh/v1beta1/queues/default*"


def _queue(sim: SimHandle) -> dict[str, Any]:
    found = sim.cluster.get("Queue", None, "default")
    assert found is not None
    return found


def _ours(queue: dict[str, Any]) -> dict[str, str]:
    notes = queue["metadata"].get("annotations") or {}
    return {k: v for k, v in notes.items() if k.startswith("runbook-bot/")}


def _set_by_hand(sim: SimHandle, state: str) -> None:
    """Someone changes the queue's state through the API (as vcctl's controller would)."""
    client.CustomObjectsApi(sim.api_client()).patch_cluster_custom_object_status(
        "scheduling.volcano.sh",
        "v1beta1",
        "queues",
        "default",
        {"status": {"state": state}},
        _content_type=MERGE,
    )


def test_closing_a_queue_sets_its_state_and_marks_who_and_why(
    run_action: RunAction, sim: SimHandle, recorder: Recorder
) -> None:
    result: Any = run_action(
        "volcano.queue_state", queue="default", state="closed", reason="NFS server down"
    ).result

    queue = _queue(sim)
    assert queue["status"]["state"] == "Closed"
    assert queue["spec"] == {"weight": 1, "reclaimable": True}  # the spec is untouched
    assert _ours(queue) == {
        "runbook-bot/incident": "INC-7",
        "runbook-bot/by": "alice",
        "runbook-bot/reason": "NFS server down",
        "runbook-bot/at": "2026-11-29T22:10:00Z",
        "runbook-bot/closed": "true",
    }
    assert (result.ok, result.changed, result.previous, result.state) == (
        True,
        True,
        "Open",
        "Closed",
    )
    assert result.summary == "queue default: Open -> Closed"
    assert recorder.progress == ["queue default: Open -> Closed"]
    paths = [r.path for r in sim.cluster.requests_made("PATCH")]
    assert paths == [
        "/apis/scheduling.volcano.sh/v1beta1/queues/default/status",
        "/apis/scheduling.volcano.sh/v1beta1/queues/default",
    ]


def test_closing_a_closed_or_closing_queue_changes_nothing(
    run_action: RunAction, sim: SimHandle
) -> None:
    run_action("volcano.queue_state", queue="default", state="closed")
    again: Any = run_action("volcano.queue_state", queue="default", state="closed").result
    writes = len(sim.cluster.requests_made("PATCH", QUEUE_PATH))
    _set_by_hand(sim, "Closing")
    closing: Any = run_action("volcano.queue_state", queue="default", state="closed").result

    assert (again.ok, again.changed, again.previous, again.state) == (
        True,
        False,
        "Closed",
        "Closed",
    )
    assert again.summary == "queue default is already Closed; nothing to do"
    assert (closing.changed, closing.state) == (False, "Closing")
    assert writes == 2  # the first close's status and marks; the second wrote nothing
    assert len(sim.cluster.requests_made("PATCH", QUEUE_PATH)) == 3  # and the hand-set


def test_dry_run_close_is_sent_with_dry_run_all_and_changes_nothing(
    run_action: RunAction, sim: SimHandle
) -> None:
    before = _queue(sim)

    result: Any = run_action(
        "volcano.queue_state", ctx_={"dry_run": True}, queue="default", state="closed"
    ).result

    assert _queue(sim) == before
    assert (result.ok, result.dry_run, result.previous, result.state) == (
        True,
        True,
        "Open",
        "Closed",
    )
    assert result.summary == "queue default: Open -> Closed (dry run)"
    patches = sim.cluster.requests_made("PATCH", QUEUE_PATH)
    assert [p.query.get("dryRun") for p in patches] == ["All", "All"]


def test_opening_a_queue_the_bot_closed_restores_it_and_clears_the_marks(
    run_action: RunAction, sim: SimHandle
) -> None:
    run_action("volcano.queue_state", queue="default", state="closed")

    result: Any = run_action("volcano.queue_state", queue="default", state="open").result

    queue = _queue(sim)
    assert queue["status"]["state"] == "Open"
    assert _ours(queue) == {}
    assert (result.ok, result.changed, result.previous, result.state) == (
        True,
        True,
        "Closed",
        "Open",
    )


def test_opening_a_queue_someone_else_closed_is_refused_unless_forced(
    run_action: RunAction, sim: SimHandle
) -> None:
    _set_by_hand(sim, "Closed")

    refused: Any = run_action("volcano.queue_state", queue="default", state="open").result
    still = _queue(sim)["status"]["state"]
    forced: Any = run_action(
        "volcano.queue_state", queue="default", state="open", force=True
    ).result

    assert (refused.ok, refused.changed, still) == (False, False, "Closed")
    assert refused.summary == (
        "queue default was closed by someone other than the bot; leaving it Closed "
        "(pass force=true to open it anyway)"
    )
    assert (forced.ok, forced.changed) == (True, True)
    assert forced.summary == "queue default: Closed -> Open (forced: the bot had not closed it)"
    assert _queue(sim)["status"]["state"] == "Open"


def test_a_queue_that_does_not_exist_is_named(run_action: RunAction, sim: SimHandle) -> None:
    result: Any = run_action("volcano.queue_state", queue="training", state="closed").result

    assert result.ok is False
    assert result.summary == (
        "Volcano queue training does not exist (or Volcano is not installed); check the "
        "name (kubectl get queues)"
    )
    assert sim.cluster.requests_made("PATCH") == []

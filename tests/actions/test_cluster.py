"""The cluster connection: one clear error when there is no cluster, bounded retries of
throttling and server errors, and refusals that say what to check."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
import yaml

from bot.actions import cluster
from bot.clock import FrozenClock
from bot.config import load_settings
from bot.errors import PermanentActionError
from bot.sim import SimHandle
from tests.actions.conftest import START, Recorder, RunAction


def test_no_kubeconfig_anywhere_is_one_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "absent"))

    with pytest.raises(PermanentActionError) as refused:
        cluster.connect(load_settings())

    assert "no usable Kubernetes configuration" in str(refused.value)
    assert "set KUBECONFIG or the kubeconfig setting" in str(refused.value)


def test_an_unreachable_api_server_is_a_retryable_failure_naming_it(
    sim: SimHandle, tmp_path: Path, recorder: Recorder, run_action: RunAction
) -> None:
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    path = sim.write_kubeconfig(tmp_path / "kc")
    config = yaml.safe_load(path.read_text())
    config["clusters"][0]["cluster"]["server"] = f"http://127.0.0.1:{port}"
    path.write_text(yaml.safe_dump(config))
    settings = load_settings(kubeconfig=path, kube_timeout="2s")
    clock = FrozenClock(START)

    outcome = run_action(
        "k8s.node_status",
        ctx_={"settings": settings, "kube_factory": None, "clock": clock},
        node="gpu-node-01",
    )

    assert outcome.result.ok is False
    assert "the Kubernetes API is unreachable" in outcome.result.summary
    assert outcome.retry_after == 30
    assert clock.slept == [0.5, 1.0, 2.0]  # four attempts, backing off on the action's clock
    assert recorder.types() == ["action.started", "action.failed"]


def test_server_errors_are_retried_with_backoff_and_the_action_then_succeeds(
    sim: SimHandle, run_action: RunAction
) -> None:
    sim.cluster.fail_requests("/api/v1/nodes/gpu-node-01", 503, times=2, method="GET")
    clock = FrozenClock(START)

    outcome = run_action("k8s.node_status", ctx_={"clock": clock}, node="gpu-node-01")

    assert outcome.result.ok is True
    reads = sim.cluster.requests_made(method="GET", path="/api/v1/nodes/gpu-node-01")
    assert [r.status for r in reads] == [503, 503, 200]
    assert clock.slept == [0.5, 1.0]


def test_forbidden_names_rbac_and_is_not_retried(sim: SimHandle, run_action: RunAction) -> None:
    sim.cluster.fail_requests("/api/v1/nodes/gpu-node-01", 403, times=5, method="PATCH")

    outcome = run_action("k8s.cordon", node="gpu-node-01")

    assert outcome.result.ok is False
    assert "the Kubernetes API refused it (403" in outcome.result.summary
    assert "check the bot's credentials and RBAC" in outcome.result.summary
    assert outcome.retry_after is None
    assert len(sim.cluster.requests_made(method="PATCH", path="/api/v1/nodes/gpu-node-01")) == 1
    assert sim.cluster.snapshot().nodes["gpu-node-01"].unschedulable is False

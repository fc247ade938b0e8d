"""Parity with kubectl: its filters pod by pod, and whole drains side by side.

For a whole drain, one scenario runs in two fresh simulators, real `kubectl drain` on one
and k8s.drain on the other; both must leave the cluster in the same state. Pods are
compared by who owns them ((namespace, "Kind/name"), or the name of a pod with no
controller), because controllers generate different pod names in each simulator.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections import Counter
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from bot.actions import ActionContext, execute, registry
from bot.actions.kubernetes import budgets, draining
from bot.config import load_settings
from bot.sim import SimHandle, running, seed
from tests.sim.waiting import TIME_SCALE, eventually
from tests.support.ci import skip_or_fail

KUBECTL = shutil.which("kubectl")
Owner = tuple[str, str]


@pytest.fixture
def kubectl() -> str:
    if KUBECTL is None:
        skip_or_fail(
            "kubectl is not on PATH; the drain parity test compares against it",
            install="apt-get install kubectl",
        )
    return KUBECTL


def _owner(pod: dict[str, Any]) -> Owner:
    refs = pod["metadata"].get("ownerReferences") or []
    ref = next((r for r in refs if r.get("controller")), None)
    name = f"{ref['kind']}/{ref['name']}" if ref else pod["metadata"]["name"]
    return pod["metadata"]["namespace"], name


def _pods(sim: SimHandle) -> list[dict[str, Any]]:
    return sim.cluster.objects("Pod")


def _settled(sim: SimHandle) -> bool:
    return not sim.cluster.snapshot().terminating and all(
        p["status"].get("phase") == "Running" and p["spec"].get("nodeName") for p in _pods(sim)
    )


def _state(sim: SimHandle, node: str, before: set[str]) -> dict[str, Any]:
    pods = _pods(sim)
    return {
        "unschedulable": sim.cluster.snapshot().nodes[node].unschedulable,
        "left on the node": Counter(_owner(p) for p in pods if p["spec"]["nodeName"] == node),
        "recreated elsewhere": Counter(
            _owner(p)
            for p in pods
            if p["metadata"]["uid"] not in before and p["spec"]["nodeName"] != node
        ),
        "every owner's pods": Counter(_owner(p) for p in pods),
    }


def _kubectl_drain(kubectl: str, sim: SimHandle, node: str, home: Path) -> int:
    config = sim.write_kubeconfig(home / "kubeconfig")
    command = [kubectl, "--kubeconfig", str(config), "--cache-dir", str(home / "cache")]
    flags = ["--ignore-daemonsets", "--delete-emptydir-data", "--timeout=120s"]
    env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
    done = subprocess.run(
        [*command, "drain", node, *flags],
        capture_output=True,
        text=True,
        timeout=150,
        env=env,
        check=False,
    )
    return done.returncode


def _bot_drain(sim: SimHandle, node: str) -> bool:
    ctx = ActionContext(actor="parity", settings=load_settings(), kube_factory=sim.api_client)
    return execute(registry.get("k8s.drain"), {"node": node, "timeout": "120s"}, ctx).result.ok


@pytest.mark.parametrize("node", ["gpu-node-02", "gpu-node-01"], ids=["drains", "refused-bare-pod"])
def test_k8s_drain_leaves_the_cluster_as_kubectl_drain_does(
    kubectl: str, node: str, tmp_path: Path
) -> None:
    scenario = seed(grace_seconds=5, startup_seconds=2)
    with (
        running(scenario, time_scale=TIME_SCALE) as theirs,
        running(scenario, time_scale=TIME_SCALE) as ours,
    ):
        assert Counter(map(_owner, _pods(theirs))) == Counter(map(_owner, _pods(ours)))
        uids = {sim: {p["metadata"]["uid"] for p in _pods(sim)} for sim in (theirs, ours)}
        owners_before = Counter(map(_owner, _pods(ours)))

        kubectl_ok = _kubectl_drain(kubectl, theirs, node, tmp_path) == 0
        bot_ok = _bot_drain(ours, node)
        for sim in (theirs, ours):
            eventually(partial(_settled, sim), timeout=10, what="the cluster to settle")

        assert bot_ok == kubectl_ok == (node == "gpu-node-02")
        theirs_after = _state(theirs, node, uids[theirs])
        assert _state(ours, node, uids[ours]) == theirs_after
        assert theirs_after["unschedulable"] is True
        assert theirs_after["every owner's pods"] == owners_before  # no pod lost
        assert bool(theirs_after["recreated elsewhere"]) == kubectl_ok


# -- kubectl's filters, one pod at a time (no cluster) -------------------------------------


def _pod(
    *,
    owner: str | None = None,
    phase: str = "Running",
    mirror: bool = False,
    emptydir: bool = False,
    deleting_for: float | None = None,
) -> client.V1Pod:
    now = datetime.now(UTC)
    meta = client.V1ObjectMeta(
        name="p",
        namespace="ns",
        uid="u2",
        owner_references=[
            client.V1OwnerReference(
                api_version="v1", kind=owner, name="x", uid="1", controller=True
            )
        ]
        if owner
        else None,
        annotations={draining.MIRROR: "h"} if mirror else None,
        deletion_timestamp=now - timedelta(seconds=deleting_for) if deleting_for else None,
    )
    volumes = [client.V1Volume(name="v", empty_dir=client.V1EmptyDirVolumeSource())]
    spec = client.V1PodSpec(containers=[], volumes=volumes if emptydir else None)
    return client.V1Pod(metadata=meta, spec=spec, status=client.V1PodStatus(phase=phase))


def _verdict(pod: client.V1Pod, daemon_set: bool = True, **rules: Any) -> str:
    return draining.classify(
        pod, draining.Rules(**rules), datetime.now(UTC), lambda ns, name: daemon_set
    )[0]


def test_filters_decide_in_kubectls_order() -> None:
    assert _verdict(_pod(owner="ReplicaSet", deleting_for=60), skip_wait_seconds=30) == "skip"
    assert _verdict(_pod(owner="ReplicaSet", deleting_for=10), skip_wait_seconds=30) == "evict"
    assert _verdict(_pod(owner="DaemonSet")) == "skip"
    assert _verdict(_pod(owner="DaemonSet"), ignore_daemonsets=False) == "refuse"
    assert _verdict(_pod(owner="DaemonSet", phase="Succeeded")) == "evict"
    assert _verdict(_pod(owner="Node", mirror=True)) == "skip"
    assert _verdict(_pod(owner="ReplicaSet", emptydir=True)) == "evict"
    assert _verdict(_pod(owner="ReplicaSet", emptydir=True), delete_emptydir_data=False) == (
        "refuse"
    )
    assert _verdict(_pod(emptydir=True, phase="Failed"), delete_emptydir_data=False) == "evict"
    assert _verdict(_pod()) == "refuse"
    assert _verdict(_pod(phase="Succeeded")) == "evict"
    assert _verdict(_pod(), force=True) == "evict"


def test_a_daemonset_pod_whose_daemonset_is_gone_is_refused_unless_forced() -> None:
    pod = _pod(owner="DaemonSet")

    refused = draining.classify(pod, draining.Rules(), datetime.now(UTC), lambda ns, n: False)

    assert refused == ("refuse", "its DaemonSet ns/x is gone; force=true deletes it", False)
    assert _verdict(pod, daemon_set=False, force=True) == "evict"


def test_budget_selectors_match_labels_and_expressions() -> None:
    labels, sel, term = (
        {"app": "trainer"},
        client.V1LabelSelector,
        client.V1LabelSelectorRequirement,
    )

    assert budgets.selects(sel(match_labels={"app": "trainer"}), labels)
    assert budgets.selects(sel(), labels) and not budgets.selects(None, labels)
    assert not budgets.selects(sel(match_labels={"app": "x"}), labels)
    assert budgets.selects(sel(match_expressions=[term(key="x", operator="DoesNotExist")]), labels)
    assert not budgets.selects(
        sel(match_expressions=[term(key="app", operator="NotIn", values=["trainer"])]), labels
    )

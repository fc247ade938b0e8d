"""Alert labels are untrusted (DESIGN invariant 4): a `Hostname` that carries a path, shell
or template must never reach the Kubernetes API, a BMC or a template engine as anything
but refused text. Each case fires through the real webhook into the shipped runbooks, with
the simulated cluster (bot/sim) behind the real clients, and the worker runs what is due.
"""

from __future__ import annotations

import pytest

from tests.runbooks.drive import Drive

HOSTILE_HOSTS = [
    "gpu-node-01/../../x",  # a path: /api/v1/nodes/gpu-node-01/../../x
    "gpu-node-01/proxy",  # a subresource of a real node
    "gpu-node-01;reboot",
    "gpu-node-01 && ipmitool chassis power off",
    "$(reboot)",
    "gpu-node-01%2F..%2Fx",
    "{{ ''.__class__.__mro__ }}",  # a template in a label value
    "gpu-node-01\nX-Injected: 1",
]


@pytest.mark.parametrize("host", HOSTILE_HOSTS)
def test_a_hostile_node_label_fails_the_step_by_name_and_never_reaches_the_cluster(
    drive: Drive,
    host: str,
) -> None:
    before = drive.sim.cluster.snapshot().nodes

    number = drive.fire(host=host)
    drive.done(number, "acknowledge")  # the runbook's first step is the on-call's "I'm on it"

    rows = drive.rows(number)
    failed = [row for row in rows.values() if row.state == "failed"]
    assert failed, {step: row.state for step, row in rows.items()}
    assert "invalid parameters: node=" in failed[0].summary, failed[0].summary
    assert "<class" not in failed[0].summary  # a template in the label stayed text
    # Nothing ran anywhere: no action succeeded, no request named the label, no node moved.
    ran = [row.step for row in rows.values() if row.kind == "action" and row.state == "succeeded"]
    assert ran == []
    paths = [request.path for request in drive.sim.cluster.requests_made()]
    assert not [p for p in paths if ".." in p or "proxy" in p or "reboot" in p], paths
    assert drive.sim.cluster.snapshot().nodes == before
    # The label is stored and shown as the text it was, never evaluated.
    assert drive.verified(number)

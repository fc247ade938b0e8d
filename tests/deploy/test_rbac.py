"""The RBAC the Helm chart ships is enough for every shipped runbook, and no more.

The simulator enforces deploy/rbac.yaml (the chart's rendering, checked here to agree
with `helm template`) for the bot's service-account token: anything else is answered 403
with the apiserver's Status (kubectl would print its message, but sends no token over the
simulator's plain HTTP, so it is not driven here). Every runbook in
runbooks/ then runs its happy path end to end (the e2e drives of tests/runbooks) as that
service account, and every rule is tied to the client call in bot/ that needs it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from sqlalchemy import select

from bot.clock import FrozenClock
from bot.db import Database
from bot.runbooks.models import IncidentRunbook
from bot.sim import SimHandle, running, seed
from bot.sim.server import DUMMY_TOKEN
from tests.deploy import chart
from tests.runbooks import (
    test_e2e_gpu_xid,
    test_e2e_ib_partition,
    test_e2e_node_down,
    test_e2e_overheating,
    test_e2e_storage_failure,
)
from tests.runbooks.drive import RUNBOOKS, Drive, simulator
from tests.sim.waiting import TIME_SCALE

BOT = "system:serviceaccount:runbook-bot:runbook-bot"
SOURCE = Path(__file__).resolve().parents[2] / "bot"

NEEDED: dict[tuple[str, str, str, str], str] = {
    # (scope, API group, resource, verb): a client call in bot/ that needs it.
    ("cluster", "", "nodes", "get"): "read_node",
    ("cluster", "", "nodes", "list"): "list_node",
    ("cluster", "", "nodes", "watch"): "list_node",  # the topology cache's watch.Watch
    ("cluster", "", "nodes", "patch"): "patch_node",
    ("cluster", "", "pods", "get"): "read_namespaced_pod",
    ("cluster", "", "pods", "list"): "list_pod_for_all_namespaces",
    ("cluster", "", "pods", "delete"): "delete_namespaced_pod",
    ("cluster", "", "pods/eviction", "create"): "create_namespaced_pod_eviction",
    ("cluster", "", "persistentvolumeclaims", "get"): "read_namespaced_persistent_volume_claim",
    ("cluster", "", "persistentvolumeclaims", "list"): (
        "list_persistent_volume_claim_for_all_namespaces"
    ),
    ("cluster", "", "persistentvolumes", "list"): "list_persistent_volume",
    ("cluster", "storage.k8s.io", "storageclasses", "get"): "read_storage_class",
    ("cluster", "apps", "daemonsets", "get"): "read_namespaced_daemon_set",
    ("cluster", "policy", "poddisruptionbudgets", "list"): (
        "list_namespaced_pod_disruption_budget"
    ),
    # The drain watches the budget an eviction waits on (`watch=True` on the same call).
    ("cluster", "policy", "poddisruptionbudgets", "watch"): (
        "list_namespaced_pod_disruption_budget"
    ),
    ("cluster", "scheduling.volcano.sh", "queues", "get"): "get_cluster_custom_object",
    ("cluster", "scheduling.volcano.sh", "queues", "patch"): "patch_cluster_custom_object",
    ("cluster", "scheduling.volcano.sh", "queues/status", "patch"): (
        "patch_cluster_custom_object_status"
    ),
    ("runbook-bot", "batch", "jobs", "create"): "create_namespaced_job",
    ("runbook-bot", "batch", "jobs", "delete"): "delete_namespaced_job",
    ("runbook-bot", "", "pods/log", "get"): "read_namespaced_pod_log",
}


# -- the shipped file is the chart's rendering ------------------------------------------


def test_deploy_rbac_yaml_is_the_charts_rendering_with_default_values() -> None:
    assert chart.RBAC_FILE.read_text(encoding="utf-8") == chart.rendered_rbac(), (
        "deploy/rbac.yaml differs from the chart: re-render it with the command in its header"
    )


def _rules() -> set[tuple[str, str, str, str]]:
    granted = set()
    for grant in chart.shipped_rbac().grants:
        for rule in grant.rules:
            assert not rule.resource_names, rule
            for group in rule.api_groups:
                for resource in rule.resources:
                    for verb in rule.verbs:
                        granted.add((grant.namespace or "cluster", group, resource, verb))
    return granted


def test_every_granted_permission_is_one_a_client_call_in_bot_needs() -> None:
    files = [p for p in SOURCE.rglob("*.py") if "sim" not in p.relative_to(SOURCE).parts]
    code = "\n".join(p.read_text(encoding="utf-8") for p in files)
    unused = {need: call for need, call in NEEDED.items() if not re.search(rf"\.{call}\b", code)}

    assert _rules() == set(NEEDED)
    assert unused == {}, "bot/ no longer makes these calls: drop the rules from the chart"


def test_nothing_is_granted_by_wildcard_nor_on_secrets_configmaps_or_rbac() -> None:
    documents = list(yaml.safe_load_all(chart.RBAC_FILE.read_text(encoding="utf-8")))
    rules = [rule for doc in documents if doc for rule in doc.get("rules", ())]
    words = {w for rule in rules for key in rule for w in rule[key]}
    granted = _rules()

    assert rules and "*" not in words
    assert not {"secrets", "configmaps", "serviceaccounts", "roles", "clusterroles"} & words
    assert not {"escalate", "bind", "impersonate", "update"} & words
    # Watching is granted only where the bot waits on a status: the topology cache on
    # nodes, the drain on budgets.
    watched = {(group, resource) for _, group, resource, verb in granted if verb == "watch"}
    assert watched == {("", "nodes"), ("policy", "poddisruptionbudgets")}
    assert {scope for scope, *_ in granted} == {"cluster", "runbook-bot"}


# -- the simulator holds the service account to it ---------------------------------------


@pytest.fixture
def sim() -> Iterator[SimHandle]:
    rbac = chart.shipped_rbac()
    scenario = seed(grace_seconds=5, startup_seconds=2)
    scenario = scenario.model_copy(update={"namespaces": [*scenario.namespaces, "runbook-bot"]})
    with running(scenario, time_scale=TIME_SCALE, rbac=rbac) as handle:
        yield handle


def _status(call: Callable[[], Any]) -> tuple[int, dict[str, Any]]:
    with pytest.raises(ApiException) as failure:
        call()
    return failure.value.status, json.loads(failure.value.body)


def test_a_verb_the_cluster_role_lacks_is_forbidden_with_the_apiservers_status(
    sim: SimHandle,
) -> None:
    core = client.CoreV1Api(sim.api_client())

    code, body = _status(lambda: core.delete_node("gpu-node-01"))

    assert code == 403
    assert body == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": f'nodes "gpu-node-01" is forbidden: User "{BOT}" cannot delete resource '
        '"nodes" in API group "" at the cluster scope',
        "reason": "Forbidden",
        "details": {"name": "gpu-node-01", "kind": "nodes"},
        "code": 403,
    }
    assert "gpu-node-01" in sim.cluster.snapshot().nodes
    assert [r.status for r in sim.cluster.requests_made("DELETE")] == [403]


def test_the_node_job_role_holds_only_in_its_namespace(sim: SimHandle) -> None:
    api = sim.api_client()
    batch = client.BatchV1Api(api)
    job = {"metadata": {"name": "probe"}, "spec": {"template": {"spec": {"containers": [
        {"name": "c", "image": "busybox"}], "restartPolicy": "Never"}}}}  # fmt: skip

    created = batch.create_namespaced_job("runbook-bot", job)
    code, body = _status(lambda: batch.create_namespaced_job("ml", job))
    listed, listing = _status(lambda: batch.list_namespaced_job("runbook-bot"))

    assert created.metadata.name == "probe"
    assert (code, body["message"], body["details"]) == (
        403,
        f'jobs.batch is forbidden: User "{BOT}" cannot create resource "jobs" in API group '
        '"batch" in the namespace "ml"',
        {"group": "batch", "kind": "jobs"},
    )
    assert (listed, listing["reason"]) == (403, "Forbidden")


def test_a_subresource_is_its_own_permission(sim: SimHandle) -> None:
    core = client.CoreV1Api(sim.api_client())
    pod = sim.cluster.objects("Pod")[0]["metadata"]

    code, body = _status(lambda: core.read_namespaced_pod_log(pod["name"], pod["namespace"]))
    status = core.read_namespaced_pod(pod["name"], pod["namespace"])  # get pods: granted

    assert status.metadata.name == pod["name"]
    assert (code, body["message"]) == (
        403,
        f'pods "{pod["name"]}" is forbidden: User "{BOT}" cannot get resource "pods/log" in '
        f'API group "" in the namespace "{pod["namespace"]}"',
    )


def test_an_unknown_token_is_unauthorized_and_the_admin_may_do_anything(
    sim: SimHandle,
) -> None:
    with httpx.Client(base_url=sim.url, timeout=10) as http:
        stranger = http.get("/api/v1/nodes", headers={"Authorization": "Bearer nope"})
        anonymous = http.get("/api/v1/nodes")
        admin = http.delete(
            "/api/v1/nodes/gpu-node-04", headers={"Authorization": f"Bearer {DUMMY_TOKEN}"}
        )
        discovery = http.get("/apis", headers={"Authorization": f"Bearer {chart.TOKEN}"})

    assert (stranger.status_code, stranger.json()["reason"]) == (401, "Unauthorized")
    assert anonymous.status_code == 401
    assert admin.status_code == 200
    assert "gpu-node-04" not in sim.cluster.snapshot().nodes
    assert discovery.status_code == 200


# -- every shipped runbook runs as the service account -----------------------------------


@pytest.fixture
def drive(db: Database, clock: FrozenClock, tmp_path: Path) -> Iterator[Drive]:
    """tests/runbooks' drive with the simulator enforcing the shipped RBAC."""
    with (
        simulator(seed(grace_seconds=5, startup_seconds=2), rbac=chart.shipped_rbac()) as sim,
        Drive(db, clock, tmp_path, sim).serving() as drive,
    ):
        yield drive


def _default(drive: Drive) -> None:
    """An alert no runbook matches: owned by hand, then the node read through the API, its
    BMC and a node Job (nvidia-smi)."""
    number = drive.fire(alertname="NodeFilesystemAlmostFull", host="gpu-node-02")
    drive.done(number, "acknowledge", "alice", "mine: /var is 91% full")
    states = drive.states(number)
    assert {step: states[step] for step in ("node_status", "power", "sel", "gpus")} == {
        "node_status": "succeeded",
        "power": "succeeded",
        "sel": "succeeded",
        "gpus": "succeeded",
    }
    assert drive.waiting(number) == ("escalate", 0)


HAPPY_PATHS: dict[str, Callable[[Drive], None]] = {
    "default": _default,
    "gpu-xid": (
        test_e2e_gpu_xid.test_an_xid_79_is_power_cycled_by_two_people_verified_at_level_3_and_returned
    ),
    "ib-partition": (
        test_e2e_ib_partition.test_a_node_with_a_port_down_is_repaired_by_hand_verified_and_returned
    ),
    "node-down": (
        test_e2e_node_down.test_a_hung_node_is_power_cycled_by_two_people_diagnosed_and_burnt_in_before_return
    ),
    "overheating": (
        test_e2e_overheating.test_one_hot_machine_reads_its_fans_through_the_bmc_and_stays_in_service
    ),
    "storage-failure": (
        test_e2e_storage_failure.test_an_unreachable_nfs_export_closes_the_queue_until_it_is_verified
    ),
}


def test_every_shipped_runbook_has_a_happy_path_run_under_rbac() -> None:
    assert sorted(HAPPY_PATHS) == sorted(p.stem for p in RUNBOOKS.glob("*.yaml"))


@pytest.mark.timeout(180)
@pytest.mark.parametrize("backend", ["sqlite"])
@pytest.mark.parametrize("runbook", sorted(HAPPY_PATHS))
def test_the_runbook_runs_end_to_end_as_the_charts_service_account(
    drive: Drive, runbook: str
) -> None:
    HAPPY_PATHS[runbook](drive)

    made = drive.sim.cluster.requests_made()
    assert made, "the runbook made no Kubernetes call"
    assert [(r.method, r.path) for r in made if r.status in (401, 403)] == []
    with drive.rig.db.session() as session:
        ran = set(session.scalars(select(IncidentRunbook.runbook_id)))
    assert ran == {runbook}

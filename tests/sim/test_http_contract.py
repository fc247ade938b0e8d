"""The wire contract kubectl and the client rely on: discovery documents and Status errors."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from bot.sim import SimHandle
from tests.sim.waiting import eventually


@pytest.fixture
def http(sim: SimHandle) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=sim.url, timeout=10) as session:
        yield session


def _status(response: httpx.Response) -> dict[str, Any]:
    assert response.headers["content-type"] == "application/json"
    body: dict[str, Any] = response.json()
    assert body["kind"] == "Status" and body["apiVersion"] == "v1"
    assert body["status"] == "Failure" and body["code"] == response.status_code
    return body


def test_version_has_every_field_the_client_model_requires(http: httpx.Client) -> None:
    body = http.get("/version").json()

    assert set(body) == {
        "major", "minor", "gitVersion", "gitCommit", "gitTreeState",
        "buildDate", "goVersion", "compiler", "platform",
    }  # fmt: skip
    assert (body["major"], body["minor"]) == ("1", "32")


def test_core_discovery_advertises_policy_v1_eviction_and_pod_logs(http: httpx.Client) -> None:
    resources = {r["name"]: r for r in http.get("/api/v1").json()["resources"]}

    eviction = resources["pods/eviction"]
    assert (eviction["group"], eviction["version"], eviction["kind"]) == (
        "policy",
        "v1",
        "Eviction",
    )
    assert eviction["verbs"] == ["create"]
    assert resources["pods/log"]["verbs"] == ["get"]
    assert resources["nodes"]["namespaced"] is False and "patch" in resources["nodes"]["verbs"]
    assert http.get("/api").json()["versions"] == ["v1"]


def test_every_group_in_apis_has_a_resource_list(http: httpx.Client) -> None:
    groups = http.get("/apis").json()["groups"]
    names = [g["name"] for g in groups]

    for group in groups:
        version = group["preferredVersion"]["groupVersion"]
        listing = http.get(f"/apis/{version}").json()
        assert listing["groupVersion"] == version and listing["resources"]
    assert {"apps", "batch", "policy", "coordination.k8s.io", "storage.k8s.io"} <= set(names)
    assert "scheduling.volcano.sh" in names


def test_unknown_paths_and_openapi_are_404_status(http: httpx.Client) -> None:
    for path in ("/openapi/v2", "/openapi/v3", "/api/v1/widgets", "/apis/example.com/v1"):
        body = _status(http.get(path))
        assert body["reason"] == "NotFound", path


def test_missing_object_is_404_naming_resource_and_group(http: httpx.Client) -> None:
    body = _status(http.get("/apis/batch/v1/namespaces/default/jobs/nope"))

    assert body["message"] == 'jobs.batch "nope" not found'
    assert body["details"] == {"name": "nope", "group": "batch", "kind": "jobs"}


def test_wrong_method_is_405_and_wrong_patch_type_is_415(http: httpx.Client) -> None:
    wrong_method = _status(http.get("/api/v1/namespaces/ml/pods/trainer-0/eviction"))
    wrong_type = _status(
        http.patch(
            "/api/v1/nodes/gpu-node-01",
            content=b'{"spec":{"unschedulable":true}}',
            headers={"content-type": "application/json"},
        )
    )

    assert wrong_method["reason"] == "MethodNotAllowed"
    assert wrong_type["reason"] == "UnsupportedMediaType"
    assert "application/strategic-merge-patch+json" in wrong_type["message"]


def test_malformed_bodies_and_mismatched_names_are_400(http: httpx.Client) -> None:
    garbage = _status(
        http.post(
            "/api/v1/namespaces/default/pods",
            content=b"{not json",
            headers={"content-type": "application/json"},
        )
    )
    renamed = _status(
        http.put("/api/v1/nodes/gpu-node-01", json={"metadata": {"name": "gpu-node-02"}})
    )
    eviction = _status(
        http.post(
            "/api/v1/namespaces/ml/pods/trainer-0/eviction",
            json={"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "other"}},
        )
    )

    assert [b["reason"] for b in (garbage, renamed, eviction)] == ["BadRequest"] * 3


def test_invalid_and_misplaced_creates_are_refused(http: httpx.Client, sim: SimHandle) -> None:
    no_containers = _status(
        http.post("/api/v1/namespaces/default/pods", json={"metadata": {"name": "p"}, "spec": {}})
    )
    no_namespace = _status(
        http.post(
            "/api/v1/namespaces/absent/pods",
            json={"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i"}]}},
        )
    )
    bad_job = _status(
        http.post(
            "/apis/batch/v1/namespaces/default/jobs",
            json={
                "metadata": {"name": "j"},
                "spec": {"template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}},
            },
        )
    )

    assert no_containers["code"] == 422 and no_containers["reason"] == "Invalid"
    assert no_namespace["message"] == 'namespaces "absent" not found'
    assert bad_job["reason"] == "Invalid" and "restartPolicy" in bad_job["message"]
    assert sim.cluster.objects("Job") == []


def test_a_pod_created_on_a_node_starts_and_generate_name_is_filled(
    http: httpx.Client, sim: SimHandle
) -> None:
    created = http.post(
        "/api/v1/namespaces/default/pods",
        json={
            "metadata": {"generateName": "probe-"},
            "spec": {"nodeName": "gpu-node-02", "containers": [{"name": "c", "image": "i"}]},
        },
    )

    body = created.json()
    assert created.status_code == 201 and body["metadata"]["name"].startswith("probe-")
    assert body["status"]["phase"] == "Pending" and body["metadata"]["uid"]
    url = f"/api/v1/namespaces/default/pods/{body['metadata']['name']}"
    running = eventually(
        lambda: (r := http.get(url).json())["status"]["phase"] == "Running" and r,
        what="the pod to run",
    )
    assert running["status"]["hostIP"] and running["status"]["podIP"]


def test_log_of_a_pending_pod_is_400_and_text_is_plain(http: httpx.Client) -> None:
    http.post(
        "/api/v1/namespaces/default/pods",
        json={
            "metadata": {"name": "waiting"},
            "spec": {
                "containers": [{"name": "c", "image": "i"}],
                "nodeSelector": {"no": "such-node"},
            },
        },
    )

    pending = _status(http.get("/api/v1/namespaces/default/pods/waiting/log"))
    running = http.get("/api/v1/namespaces/ml/pods/trainer-0/log")

    assert "is waiting to start" in pending["message"]
    assert running.status_code == 200 and running.headers["content-type"].startswith("text/plain")


def test_budget_refusal_body_is_exactly_the_real_apis(http: httpx.Client) -> None:
    eviction = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "trainer-0"}}
    accepted = http.post("/api/v1/namespaces/ml/pods/trainer-0/eviction", json=eviction)
    eviction["metadata"]["name"] = "trainer-1"
    refused = http.post("/api/v1/namespaces/ml/pods/trainer-1/eviction", json=eviction)

    assert accepted.status_code == 201
    assert accepted.json() == {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201,
    }  # fmt: skip
    assert refused.status_code == 429 and "retry-after" not in refused.headers
    assert refused.json() == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": "Cannot evict pod as it would violate the pod's disruption budget.",
        "reason": "TooManyRequests",
        "details": {
            "causes": [
                {
                    "reason": "DisruptionBudget",
                    "message": "The disruption budget trainer-pdb needs 3 healthy pods and has "
                    "3 currently",
                }
            ]
        },
        "code": 429,
    }

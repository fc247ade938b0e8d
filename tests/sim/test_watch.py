"""Watches: the Python client's `watch.Watch` and kubectl's waiting both see changes."""

from __future__ import annotations

import threading
from typing import Any

from kubernetes import client, watch

from bot.sim import SimHandle
from bot.sim.kinds import NAMESPACE, POD
from bot.sim.manifests import namespace
from bot.sim.store import Store


def test_watch_from_a_list_version_sees_eviction_deletion_and_replacement(
    sim: SimHandle, api: Any
) -> None:
    core = client.CoreV1Api(api)
    listed = core.list_namespaced_pod("ml", field_selector="metadata.name=trainer-2")
    old_uid = listed.items[0].metadata.uid
    evict = client.V1Eviction(metadata=client.V1ObjectMeta(name="trainer-2", namespace="ml"))
    timer = threading.Timer(
        0.1, lambda: core.create_namespaced_pod_eviction("trainer-2", "ml", evict)
    )
    timer.start()
    seen: list[tuple[str, str, str | None]] = []
    stream = watch.Watch()

    for event in stream.stream(
        core.list_namespaced_pod,
        "ml",
        field_selector="metadata.name=trainer-2",
        resource_version=listed.metadata.resource_version,
        timeout_seconds=5,
    ):
        pod = event["object"]
        seen.append((event["type"], pod.metadata.uid, pod.status.phase))
        if pod.metadata.uid != old_uid and pod.status.phase == "Running":
            stream.stop()
    timer.join()

    types = [kind for kind, _, _ in seen]
    assert types[0] == "MODIFIED" and seen[0][1] == old_uid  # deletionTimestamp set
    assert ("DELETED", old_uid, "Running") in seen
    assert types.index("DELETED") < types.index("ADDED")
    assert seen[-1][1] != old_uid and seen[-1][2] == "Running"


def test_watch_without_a_version_starts_with_every_matching_object(api: Any) -> None:
    core = client.CoreV1Api(api)

    events = list(
        watch.Watch().stream(
            core.list_pod_for_all_namespaces,
            label_selector="app.kubernetes.io/name=trainer",
            timeout_seconds=1,
        )
    )

    assert sorted((e["type"], e["object"].metadata.name) for e in events) == [
        ("ADDED", f"trainer-{i}") for i in range(4)
    ]


def test_history_that_no_longer_reaches_back_is_reported_as_too_old() -> None:
    store = Store(history=2)
    for name in ("a", "b", "c"):
        store.write(NAMESPACE, namespace(name))

    assert store.changes_since(0) is None
    recent = store.changes_since(2)
    assert recent is not None and [c.obj["metadata"]["name"] for c in recent] == ["c"]
    assert [c.type for c in store.changes_since(1) or []] == ["ADDED", "ADDED"]
    assert POD not in {c.kind for c in recent}

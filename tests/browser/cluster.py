"""What a running demo's simulator and bot say, read the way an operator would check.

`with Simulator(demo) as sim:` reads the cluster through the simulator's Kubernetes API (the
kubeconfig the demo wrote) and the machines through their BMCs' Redfish (the `bmc:` line
the demo printed, the password in its file); `Bot(demo)` reads an incident and its log
through the bot's API with the webhook token. Both over HTTP on loopback, nothing else.
"""

from __future__ import annotations

import re
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import httpx
import yaml

from tests.browser.demo import Demo

TIMEOUT = 10.0
BMC_LINE = re.compile(r"^(http://\S+/redfish/v1) \(Redfish; user (\S+), the password in (\S+)\)$")


class _Reader:
    clients: tuple[httpx.Client, ...] = ()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        for client in self.clients:
            client.close()


def _json(client: httpx.Client, path: str) -> dict[str, Any]:
    response = client.get(path)
    assert response.status_code == 200, f"GET {path}: {response.status_code} {response.text}"
    body: dict[str, Any] = response.json()
    return body


class Simulator(_Reader):
    """The demo's simulated cluster: nodes, pods and queues, and the machines' BMCs."""

    def __init__(self, demo: Demo) -> None:
        config = yaml.safe_load((demo.folder / "kubeconfig").read_text(encoding="utf-8"))
        server = config["clusters"][0]["cluster"]["server"]
        token = config["users"][0]["user"]["token"]
        match = BMC_LINE.match(demo.said("bmc"))
        assert match, f"the demo's bmc line does not say where the BMCs are: {demo.said('bmc')}"
        url, user, password_file = match.groups()
        password = Path(password_file).read_text(encoding="utf-8").strip()
        self.api = httpx.Client(
            base_url=server, headers={"Authorization": f"Bearer {token}"}, timeout=TIMEOUT
        )
        self.bmc = httpx.Client(base_url=url, auth=(user, password), timeout=TIMEOUT)
        self.clients = (self.api, self.bmc)

    def node(self, name: str) -> dict[str, Any]:
        return _json(self.api, f"/api/v1/nodes/{name}")

    def cordoned(self, name: str) -> bool:
        return bool(self.node(name)["spec"].get("unschedulable"))

    def ready(self, name: str) -> str:
        conditions = self.node(name)["status"]["conditions"]
        return next(c["status"] for c in conditions if c["type"] == "Ready")

    def taints(self, name: str) -> set[str]:
        """The node's taint keys, besides the unschedulable one a cordon adds."""
        taints = self.node(name)["spec"].get("taints") or []
        return {t["key"] for t in taints} - {"node.kubernetes.io/unschedulable"}

    def pods(self, namespace: str) -> dict[str, str]:
        """Live pods of `namespace` (not terminating): name -> node."""
        items = _json(self.api, f"/api/v1/namespaces/{namespace}/pods")["items"]
        return {
            p["metadata"]["name"]: p["spec"].get("nodeName", "")
            for p in items
            if not p["metadata"].get("deletionTimestamp")
        }

    def queue_state(self, name: str) -> str:
        path = f"/apis/scheduling.volcano.sh/v1beta1/queues/{name}"
        return str(_json(self.api, path)["status"]["state"])

    def power(self, node: str) -> str:
        return str(_json(self.bmc, f"/Systems/{node}")["PowerState"])

    def gpu_sensor(self, node: str, gpu: int) -> dict[str, Any]:
        thermal = _json(self.bmc, f"/Chassis/{node}/Thermal")
        return next(t for t in thermal["Temperatures"] if t["Name"] == f"GPU{gpu} Temp")


class Bot(_Reader):
    """The demo's bot, through its API: an incident, its steps, its log."""

    def __init__(self, demo: Demo) -> None:
        token = (demo.folder / "webhook-token").read_text(encoding="utf-8").strip()
        self.api = httpx.Client(
            base_url=demo.url, headers={"Authorization": f"Bearer {token}"}, timeout=TIMEOUT
        )
        self.clients = (self.api,)

    def incident(self, number: int) -> dict[str, Any]:
        return _json(self.api, f"/api/incidents/{number}")

    def steps(self, number: int) -> dict[str, str]:
        """Step id -> state."""
        rows = _json(self.api, f"/api/incidents/{number}/steps")["steps"]
        return {row["step"]: row["state"] for row in rows}

    def log(self, number: int) -> list[tuple[str, str, str]]:
        """The incident's log as (type, actor id, summary), oldest first."""
        return [(e["type"], e["actor"]["id"], e["summary"]) for e in self.incident(number)["log"]]

"""Serving the simulator: uvicorn on a loopback port, the kubelet thread, a kubeconfig.

`running(scenario)` is for tests and the demo (a port the kernel picks, in a thread);
`run(path)` is the standalone `runbook-bot sim` command, serving until interrupted.
"""

from __future__ import annotations

import ipaddress
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import uvicorn
import yaml

from bot.sim import api
from bot.sim import scenario as scenarios
from bot.sim.cluster import Cluster
from bot.sim.kinds import NODE, POD
from bot.sim.kubelet import Kubelet
from bot.sim.scenario import Scenario

CONTEXT = "runbook-bot-sim"
DUMMY_TOKEN = "runbook-bot-sim-token"  # the simulator accepts any token; this is no secret


def kubeconfig(url: str) -> dict[str, Any]:
    """A kubeconfig for `url`: one cluster, a token user, context `runbook-bot-sim`."""
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": CONTEXT, "cluster": {"server": url}}],
        "users": [{"name": CONTEXT, "user": {"token": DUMMY_TOKEN}}],
        "contexts": [
            {
                "name": CONTEXT,
                "context": {"cluster": CONTEXT, "user": CONTEXT, "namespace": "default"},
            }
        ],
        "current-context": CONTEXT,
        "preferences": {},
    }


class SimHandle:
    """A running simulator: its base URL, its cluster (for hooks), and client set-up."""

    def __init__(self, url: str, cluster: Cluster) -> None:
        self.url = url
        self.cluster = cluster
        self._clients: list[Any] = []

    def write_kubeconfig(self, path: str | Path) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(yaml.safe_dump(kubeconfig(self.url), sort_keys=False), encoding="utf-8")
        return path

    def api_client(self) -> Any:
        """A `kubernetes.client.ApiClient` for this simulator; closed when the handle stops."""
        from kubernetes import config

        client = config.new_client_from_config_dict(kubeconfig(self.url), persist_config=False)
        self._clients.append(client)
        return client

    def close_clients(self) -> None:
        for client in self._clients:
            client.close()
        self._clients.clear()


def _loopback(host: str) -> None:
    if host == "localhost":
        return
    try:
        if ipaddress.ip_address(host).is_loopback:
            return
    except ValueError:
        pass
    raise ValueError(
        f"the simulator serves without authentication, so only on loopback, not {host}"
    )


def _bind(host: str, port: int) -> socket.socket:
    _loopback(host)
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    return sock


def _server(cluster: Cluster) -> uvicorn.Server:
    config = uvicorn.Config(
        api.build_app(cluster),
        log_level="warning",
        access_log=False,
        lifespan="off",
        ws="none",
        timeout_graceful_shutdown=2,
    )
    return uvicorn.Server(config)


def _as_scenario(source: Scenario | str | Path) -> Scenario:
    return source if isinstance(source, Scenario) else scenarios.load(source)


@contextmanager
def running(source: Scenario | str | Path, *, time_scale: float = 1.0) -> Iterator[SimHandle]:
    """Serve a scenario on 127.0.0.1 (a kernel-chosen port) until the block ends."""
    cluster = Cluster(_as_scenario(source), time_scale=time_scale)
    sock = _bind("127.0.0.1", 0)
    server = _server(cluster)
    thread = threading.Thread(
        target=server.run, kwargs={"sockets": [sock]}, name="sim-api", daemon=True
    )
    kubelet = Kubelet(cluster)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            server.should_exit = True
            sock.close()
            raise RuntimeError("the simulated API server did not start")
        time.sleep(0.01)
    kubelet.start()
    handle = SimHandle(f"http://127.0.0.1:{sock.getsockname()[1]}", cluster)
    try:
        yield handle
    finally:
        handle.close_clients()
        cluster.stopping.set()
        kubelet.stop()
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


def run(
    scenario_path: str | Path,
    *,
    host: str = "127.0.0.1",
    port: int = 6443,
    kubeconfig_path: str | Path,
    time_scale: float = 1.0,
) -> None:
    """Serve a scenario until interrupted (Ctrl-C), announcing how to reach it."""
    cluster = Cluster(scenarios.load(scenario_path), time_scale=time_scale)
    sock = _bind(host, port)
    bound = sock.getsockname()[1]
    shown = f"[{host}]" if ":" in host else host
    handle = SimHandle(f"http://{shown}:{bound}", cluster)
    path = handle.write_kubeconfig(kubeconfig_path)
    summary = cluster.snapshot()
    print(
        f"runbook-bot sim: scenario {cluster.scenario.name!r} with {len(cluster.objects(NODE))} "
        f"nodes and {len(cluster.objects(POD))} pods at {handle.url}\n"
        f"kubeconfig: {path}\n"
        f"try: kubectl --kubeconfig {path} get nodes\n"
        f"(resourceVersion {summary.resource_version}; Ctrl-C stops)",
        flush=True,
    )
    kubelet = Kubelet(cluster)
    kubelet.start()
    try:
        _server(cluster).run(sockets=[sock])
    except KeyboardInterrupt:
        pass  # uvicorn re-raises the interrupt after its graceful shutdown; that is our stop
    finally:
        cluster.stopping.set()
        kubelet.stop()
        sock.close()

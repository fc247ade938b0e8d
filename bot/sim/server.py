"""Serving the simulator: uvicorn on a loopback port, the kubelet thread, a kubeconfig.

`running(scenario)` is for tests and the demo (a port the kernel picks, in a thread);
with `redfish=RedfishOptions(...)` it also serves the machines' BMCs over Redfish
(`redfish`) on a second kernel-chosen loopback port, HTTPS when given a certificate; with
`rbac=Rbac(...)` (`rbac`) requests with that service account's token get only what its
RBAC grants, and the handle's clients and kubeconfig use that token.
`run(path)` is the standalone `runbook-bot sim` command, serving until interrupted.
"""

from __future__ import annotations

import ipaddress
import os
import secrets
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
from bot.sim.rbac import Rbac
from bot.sim.redfish import BmcRequest, RedfishOptions, RedfishService
from bot.sim.scenario import Scenario
from bot.sim.store import HISTORY

CONTEXT = "runbook-bot-sim"
DUMMY_TOKEN = "runbook-bot-sim-token"  # the admin's token (any token without RBAC); no secret


def kubeconfig(url: str, token: str = DUMMY_TOKEN) -> dict[str, Any]:
    """A kubeconfig for `url`: one cluster, a token user, context `runbook-bot-sim`."""
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": CONTEXT, "cluster": {"server": url}}],
        "users": [{"name": CONTEXT, "user": {"token": token}}],
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

    def __init__(
        self,
        url: str,
        cluster: Cluster,
        *,
        redfish: RedfishService | None = None,
        redfish_port: int | None = None,
        token: str = DUMMY_TOKEN,
    ) -> None:
        self.url = url
        self.cluster = cluster
        self.token = token  # the service account's under RBAC, else the admin's
        self.redfish = redfish  # the BMCs, when `running(..., redfish=...)` serves them
        self.redfish_port = redfish_port
        self.redfish_url = (
            f"{redfish.options.scheme}://127.0.0.1:{redfish_port}" if redfish else None
        )
        self._clients: list[Any] = []

    def write_kubeconfig(self, path: str | Path) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(
            yaml.safe_dump(kubeconfig(self.url, self.token), sort_keys=False), encoding="utf-8"
        )
        return path

    def api_client(self, token: str | None = None) -> Any:
        """A `kubernetes.client.ApiClient` for this simulator (with `token`, default the
        handle's); closed when the handle stops."""
        from kubernetes import config

        client = config.new_client_from_config_dict(
            kubeconfig(self.url, token or self.token), persist_config=False
        )
        self._clients.append(client)
        return client

    def close_clients(self) -> None:
        for client in self._clients:
            client.close()
        self._clients.clear()

    # -- the BMCs over Redfish -----------------------------------------------------------

    def bmc_settings(
        self, password_file: str | Path, *, ca_file: str | Path | None = None
    ) -> dict[str, Any]:
        """The `bmc` setting for every node's simulated BMC, with credentials profile
        `default`; writes the BMCs' password to `password_file` (mode 0600) for it."""
        service = self._redfish()
        path = Path(password_file)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch(mode=0o600, exist_ok=True)
        os.chmod(path, 0o600)
        path.write_text(service.options.password + "\n", encoding="utf-8")
        entry: dict[str, Any] = {
            "protocol": "redfish",
            "address": "127.0.0.1",
            "port": self.redfish_port,
            "credentials": "default",
            "scheme": service.options.scheme,
        }
        if ca_file is not None:
            entry["ca_file"] = str(ca_file)
        with self.cluster.lock:
            nodes = sorted(self.cluster.machines)
        return {
            "credentials": {
                "default": {"username": service.options.username, "password_file": str(path)}
            },
            "nodes": {node: {**entry, "system": node} for node in nodes},
        }

    def fail_bmc(self, node: str, times: int = 1, status: int = 500) -> None:
        """The node's BMC answers `status` to its next `times` requests."""
        self._redfish().fail(node, times, status)

    def slow_bmc(self, node: str, seconds: float) -> None:
        """The node's BMC waits `seconds` before every answer (0: prompt again)."""
        self._redfish().slow(node, seconds)

    def bmc_requests(self, method: str | None = None, path: str | None = None) -> list[BmcRequest]:
        """Requests the BMCs received, oldest first; `path` is a glob."""
        return self._redfish().requests(method, path)

    def _redfish(self) -> RedfishService:
        if self.redfish is None:
            raise RuntimeError("no Redfish service: start the simulator with running(redfish=...)")
        return self.redfish


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


def _server(cluster: Cluster, rbac: Rbac | None = None) -> uvicorn.Server:
    return _uvicorn(api.build_app(cluster, rbac, DUMMY_TOKEN))


def _uvicorn(app: Any, **options: Any) -> uvicorn.Server:
    config = uvicorn.Config(
        app,
        log_level="warning",
        access_log=False,
        lifespan="off",
        ws="none",
        timeout_graceful_shutdown=2,
        **options,
    )
    return uvicorn.Server(config)


class _Serving:
    """A uvicorn server on its own loopback socket, in a daemon thread."""

    def __init__(
        self, server: uvicorn.Server, name: str, host: str = "127.0.0.1", port: int = 0
    ) -> None:
        self.server = server
        self.sock = _bind(host, port)
        self.port: int = self.sock.getsockname()[1]
        self.thread = threading.Thread(
            target=server.run, kwargs={"sockets": [self.sock]}, name=name, daemon=True
        )

    def start(self, what: str) -> None:
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                self.stop()
                raise RuntimeError(f"the simulated {what} did not start")
            time.sleep(0.01)

    def stop(self) -> None:
        self.server.should_exit = True
        if self.thread.is_alive():
            self.thread.join(timeout=10)
        self.sock.close()


def _as_scenario(source: Scenario | str | Path) -> Scenario:
    return source if isinstance(source, Scenario) else scenarios.load(source)


@contextmanager
def running(
    source: Scenario | str | Path,
    *,
    time_scale: float = 1.0,
    redfish: RedfishOptions | None = None,
    rbac: Rbac | None = None,
    history: int = HISTORY,
) -> Iterator[SimHandle]:
    """Serve a scenario on 127.0.0.1 (a kernel-chosen port) until the block ends; with
    `redfish`, serve the machines' BMCs too, on a port of their own; with `rbac`, hold
    that service account's token to its rules (the handle's clients use it). `history`
    is how many changes watches can resume across (then 410 Expired)."""
    cluster = Cluster(_as_scenario(source), time_scale=time_scale, history=history)
    servers: list[_Serving] = []
    kubelet = Kubelet(cluster)
    started = False
    try:
        kube = _Serving(_server(cluster, rbac), "sim-api")
        servers.append(kube)
        kube.start("API server")
        service, redfish_port = None, None
        if redfish is not None:
            service = RedfishService(cluster, redfish)
            tls = (
                {"ssl_certfile": str(redfish.certfile), "ssl_keyfile": str(redfish.keyfile)}
                if redfish.certfile
                else {}
            )
            bmcs = _Serving(_uvicorn(service.app, **tls), "sim-redfish")
            servers.append(bmcs)
            bmcs.start("Redfish service")
            redfish_port = bmcs.port
        kubelet.start()
        started = True
        handle = SimHandle(
            f"http://127.0.0.1:{kube.port}",
            cluster,
            redfish=service,
            redfish_port=redfish_port,
            token=rbac.token if rbac else DUMMY_TOKEN,
        )
        try:
            yield handle
        finally:
            handle.close_clients()
    finally:
        cluster.stopping.set()
        if started:
            kubelet.stop()
        for serving in servers:  # all at once: each takes a tick of uvicorn's loop to notice
            serving.server.should_exit = True
        for serving in reversed(servers):
            serving.stop()


def run(
    scenario_path: str | Path | Scenario,
    *,
    host: str = "127.0.0.1",
    port: int = 6443,
    kubeconfig_path: str | Path,
    time_scale: float = 1.0,
    bmc_port: int | None = 6624,
    settings_path: str | Path | None = None,
    settings_extra: dict[str, Any] | None = None,
) -> None:
    """Serve a scenario until interrupted (Ctrl-C), announcing how to reach it.

    With `bmc_port`, the machines' BMCs answer Redfish there (plain HTTP on loopback, a
    password made for this run), and `settings_path` gets a settings file pointing the bot
    at the cluster and its BMCs, for `runbook-bot --config`, with `settings_extra` in it
    too (a fleet's `topology`).
    """
    cluster = Cluster(_as_scenario(scenario_path), time_scale=time_scale)
    sock = _bind(host, port)
    bound = sock.getsockname()[1]
    shown = f"[{host}]" if ":" in host else host
    bmcs: _Serving | None = None
    service: RedfishService | None = None
    if bmc_port is not None:
        service = RedfishService(cluster, RedfishOptions("admin", secrets.token_urlsafe(12)))
        bmcs = _Serving(_uvicorn(service.app), "sim-redfish", host, bmc_port)
    handle = SimHandle(
        f"http://{shown}:{bound}",
        cluster,
        redfish=service,
        redfish_port=bmcs.port if bmcs else None,
    )
    path = handle.write_kubeconfig(kubeconfig_path)
    lines = [
        f"runbook-bot sim: scenario {cluster.scenario.name!r} with {len(cluster.objects(NODE))} "
        f"nodes and {len(cluster.objects(POD))} pods at {handle.url}",
        f"kubeconfig: {path}",
        f"try: kubectl --kubeconfig {path} get nodes",
    ]
    if bmcs is not None:
        bmcs.start("Redfish service")
        config = Path(settings_path or Path(path).with_suffix(".settings.yaml"))
        bmc = handle.bmc_settings(config.with_suffix(".bmc-password"))
        partial = config.with_name(config.name + ".partial")  # readers never see half
        partial.write_text(
            yaml.safe_dump(
                {"kubeconfig": str(path), **(settings_extra or {}), "bmc": bmc}, sort_keys=False
            ),
            encoding="utf-8",
        )
        os.replace(partial, config)
        lines += [
            f"BMCs (Redfish): {handle.redfish_url}/redfish/v1",
            f"settings: {config}",
            f"try: runbook-bot --config {config} action bmc.power_status node="
            f"{sorted(cluster.machines)[0]}",
        ]
    lines.append(f"(resourceVersion {cluster.snapshot().resource_version}; Ctrl-C stops)")
    print("\n".join(lines), flush=True)
    kubelet = Kubelet(cluster)
    kubelet.start()
    try:
        _server(cluster).run(sockets=[sock])
    except KeyboardInterrupt:
        pass  # uvicorn re-raises the interrupt after its graceful shutdown; that is our stop
    finally:
        cluster.stopping.set()
        kubelet.stop()
        if bmcs is not None:
            bmcs.stop()
        sock.close()
